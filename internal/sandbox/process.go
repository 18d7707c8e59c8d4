package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"github.com/seed4b3e0ccb/callbox/internal/sandbox/internal/engine"
	"github.com/seed4b3e0ccb/callbox/internal/sandbox/internal/procwall"
	"github.com/seed4b3e0ccb/callbox/internal/sandbox/internal/procwall/hardening"
)

// Process isolation (isolation: process): the named engine runs in a
// worker process per compiled module (cmd/callbox-worker), locked down
// with seccomp, so an engine bug reaches the worker and not this process.

// ProcessIsolationAvailable reports whether this platform can run
// isolation: process (Linux).
const ProcessIsolationAvailable = procwall.Available

// WorkerName is the worker executable's file name.
const WorkerName = "callbox-worker"

// WorkerEnv names the environment variable that locates the worker when
// neither the host nor its config does.
const WorkerEnv = "CALLBOX_WORKER"

// NewProcess starts the named engine behind process isolation, with
// worker the path of the worker executable ("" for FindWorker's search)
// and user who its workers run as when this process is root (config's
// worker_user; "" for nobody).
func NewProcess(ctx context.Context, name, worker, user string) (Engine, error) {
	if worker == "" {
		w, err := FindWorker()
		if err != nil {
			return nil, err
		}
		worker = w
	}
	u, err := procwall.ResolveUser(user)
	if err != nil {
		return nil, err
	}
	e, err := procwall.New(ctx, procwall.Options{Engine: name, Worker: worker, User: u})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// FindWorker locates the worker executable when nothing names it: the
// CALLBOX_WORKER variable, then callbox-worker beside the file this code
// runs from (the program, or libcallbox.so inside a Python or BEAM
// process), then beside the running program.
func FindWorker() (string, error) {
	if w := os.Getenv(WorkerEnv); w != "" {
		return w, nil
	}
	var tried []string
	if self, err := codeFile(); err == nil {
		p := filepath.Join(filepath.Dir(self), WorkerName)
		if isExecutable(p) {
			return p, nil
		}
		tried = append(tried, p)
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), WorkerName)
		if isExecutable(p) {
			return p, nil
		}
		tried = append(tried, p)
	}
	return "", fmt.Errorf("isolation: process needs the %s executable: set the config's worker key or %s (looked in %s)", WorkerName, WorkerEnv, strings.Join(tried, ", "))
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// codeFile is the file mapped where this function's code lives: the
// program, or the shared library that contains callbox.
func codeFile() (string, error) {
	pc := uint64(reflect.ValueOf(codeFile).Pointer())
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		a, err1 := strconv.ParseUint(lo, 16, 64)
		b, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 == nil && err2 == nil && a <= pc && pc < b {
			return fields[5], nil
		}
	}
	return "", errors.New("this code's file is not in /proc/self/maps")
}

// WorkerInfo describes the worker process behind a module compiled by a
// process-isolated engine.
type WorkerInfo struct {
	// PID is the worker's process id (0 when none is running).
	PID int
	// Hardening lists each lockdown step, applied or not, with detail.
	Hardening []HardeningStep
}

// HardeningStep is one lockdown measure of a worker: its name, whether it
// was applied, and the detail (what it set, or why it could not).
type HardeningStep = hardening.Step

// ModuleWorker reports the worker behind m, and false when m does not run
// in one (it was compiled in process).
func ModuleWorker(m Module) (WorkerInfo, bool) {
	w, ok := m.(interface {
		Report() procwall.Report
		WorkerPID() int
	})
	if !ok {
		return WorkerInfo{}, false
	}
	return WorkerInfo{PID: w.WorkerPID(), Hardening: w.Report().Steps}, true
}

// InstanceAlive reports whether inst can still serve: false once the
// worker process it lives in has died.
func InstanceAlive(inst Instance) bool { return engine.Alive(inst) }

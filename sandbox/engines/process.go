package engines

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/procwall"
	"github.com/seed4b3e0ccb/callbox/sandbox/worker"
)

// Process isolation (isolation: process): the named engine runs in a
// worker process per compiled module (cmd/callbox-worker, or a program
// that serves as its own through WorkerMain, as the callbox CLI does), locked down
// with seccomp, so an engine bug reaches the worker and not this process.

// ProcessIsolationAvailable reports whether this platform can run
// isolation: process (Linux).
func ProcessIsolationAvailable() bool { return procwall.Available }

// WorkerName is the worker executable's file name, and the name every
// worker runs under.
const WorkerName = sandbox.WorkerName

// WorkerEnv names the environment variable that locates the worker when
// neither the host nor its config does.
const WorkerEnv = "CALLBOX_WORKER"

// NewProcess starts the named engine behind process isolation, with
// worker the path of the worker executable ("" for FindWorker's search)
// and user who its workers run as when this process is root (config's
// worker_user; "" for nobody).
func NewProcess(ctx context.Context, name, worker, user string) (sandbox.Engine, error) {
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

// selfWorker records that this program serves as its own worker: it
// called WorkerMain, so running it again under the worker's name serves a
// host. One fact about the whole process, as os.Args is, set once, before
// any host starts a worker.
var selfWorker atomic.Bool

// WorkerMain makes the running program its own worker. Called first thing
// in main: when a host started this program as its worker (under the name
// WorkerName, with the control socket on descriptor 3), it serves that
// host and exits the process; otherwise it returns at once, and hosts in
// this program start their workers by running the program again, so no
// separate callbox-worker executable is needed.
func WorkerMain() {
	selfWorker.Store(true)
	if filepath.Base(os.Args[0]) != WorkerName {
		return
	}
	os.Exit(worker.Main(os.Args))
}

// FindWorker locates the worker when nothing names it: the CALLBOX_WORKER
// variable; then this program itself, when it called WorkerMain; then
// callbox-worker beside the file this code runs from (the program, or
// libcallbox.so inside a Python or BEAM process), or in libexec/callbox
// beside that file's directory (where make install puts it: PREFIX/lib
// and PREFIX/libexec/callbox), then beside the running program.
func FindWorker() (string, error) {
	if w := os.Getenv(WorkerEnv); w != "" {
		return w, nil
	}
	exe, exeErr := os.Executable()
	if selfWorker.Load() && exeErr == nil {
		return exe, nil
	}
	var tried []string
	look := func(dir string) (string, bool) {
		p := filepath.Join(dir, WorkerName)
		if slices.Contains(tried, p) {
			return "", false
		}
		tried = append(tried, p)
		return p, isExecutable(p)
	}
	if self, err := codeFile(); err == nil {
		dir := filepath.Dir(self)
		if p, ok := look(dir); ok {
			return p, nil
		}
		// make install's layout: PREFIX/lib/libcallbox.so.N with
		// PREFIX/libexec/callbox/callbox-worker.
		if p, ok := look(filepath.Join(filepath.Dir(dir), "libexec", "callbox")); ok {
			return p, nil
		}
	}
	if exeErr == nil {
		if p, ok := look(filepath.Dir(exe)); ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("isolation: process needs a worker: call host.WorkerMain first thing in main (the program serves as its own), or install the %s executable, or set the config's worker key or %s (looked in %s)", WorkerName, WorkerEnv, strings.Join(tried, ", "))
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
type HardeningStep struct {
	Name    string `json:"name"`
	Applied bool   `json:"applied"`
	Detail  string `json:"detail"`
}

// ModuleWorker reports the worker behind m, and false when m does not run
// in one (it was compiled in process).
func ModuleWorker(m sandbox.Module) (WorkerInfo, bool) {
	w, ok := m.(interface {
		Report() procwall.Report
		WorkerPID() int
	})
	if !ok {
		return WorkerInfo{}, false
	}
	steps := w.Report().Steps
	info := WorkerInfo{PID: w.WorkerPID(), Hardening: make([]HardeningStep, len(steps))}
	for i, s := range steps {
		info.Hardening[i] = HardeningStep(s)
	}
	return info, true
}

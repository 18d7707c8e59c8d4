// Package worker is the process-isolation worker (isolation: process):
// the program cmd/callbox-worker runs, and the library's Python package
// ships. Main starts one engine, locks the process down (no files, no
// network, no new processes, a seccomp allowlist) and serves the host on
// descriptor 3 until the host closes it.
package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"

	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/procwall"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/procwall/lockdown"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/wasmtime"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/wazero"
)

// warmModule is (module (func (result i32) i32.const 0)).
var warmModule = []byte{
	0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
	0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7f, // type: () -> i32
	0x03, 0x02, 0x01, 0x00, // function 0 of type 0
	0x0a, 0x06, 0x01, 0x04, 0x00, 0x41, 0x00, 0x0b, // code: i32.const 0
}

// controlFD is the descriptor the host passes the control socket on.
const controlFD = 3

// Main runs the worker with args (os.Args) and returns its exit status:
// 0 when the host closed the control socket, 2 for bad arguments, 3 when
// the process could not lock itself down, 1 for any other failure (a
// first message that is not a compile request, a module refused, a
// broken protocol). The arguments are the engine's name, the
// address-space, descriptor and file-size limits, the user and group ids
// to switch to (-1: none), the callback's max_stack and whether it is
// deterministic, as the host passes them.
//
// Main must run on the process's first thread, as main does when it calls
// Main first: it keeps that thread to itself, so no guest runs there.
// glibc answers pthread_getattr_np (which the wasmtime glue asks, to find
// the room left on a thread's stack) for the first thread by reading
// /proc/self/maps, which the locked-down worker cannot open; for every
// other thread it reads its own records.
func Main(args []string) int {
	runtime.LockOSThread()
	if !onFirstThread() {
		fmt.Fprintln(os.Stderr, "callbox-worker: the worker must start on the program's first thread: call it (host.WorkerMain) first thing in main")
		return 1
	}
	if len(args) != 9 {
		fmt.Fprintln(os.Stderr, "callbox-worker is started by a callbox host (isolation: process); it takes: ENGINE ADDRESS_SPACE FILES FILE_SIZE UID GID MAX_STACK DETERMINISTIC")
		return 2
	}
	as, err1 := strconv.ParseUint(args[2], 10, 64)
	files, err2 := strconv.ParseUint(args[3], 10, 64)
	fsize, err3 := strconv.ParseUint(args[4], 10, 64)
	uid, err4 := strconv.Atoi(args[5])
	gid, err5 := strconv.Atoi(args[6])
	maxStack, err6 := strconv.ParseUint(args[7], 10, 64)
	deterministic, err7 := strconv.ParseBool(args[8])
	if err := errors.Join(err1, err2, err3, err4, err5, err6, err7); err != nil {
		fmt.Fprintf(os.Stderr, "callbox-worker: bad arguments %q: %v\n", args[2:], err)
		return 2
	}
	ctx := context.Background()
	// The engine starts inside the lockdown, after Landlock (which
	// reaches every thread by signalling each: before the engine, only
	// the Go runtime's few; wasmtime's epoch thread answers slowly) and
	// before the seccomp filter. One compile then starts what an engine
	// starts once per process: wasmtime's compiler thread pool sizes
	// itself from /proc/self/cgroup, an open the filter would kill (under
	// Landlock it merely fails, and the pool takes the CPUs it may run on).
	// The warm-up compiles under the callback's max_stack and determinism,
	// so that the engine the module will need exists before the filter:
	// wasmtime makes one engine per stack size and NaN setting, and making
	// one sets up its logger (an ioctl on stderr the filter would kill).
	var eng sandbox.Engine
	var engErr error
	start := func() {
		switch args[1] {
		case config.EngineWazero:
			eng, engErr = wazero.New(ctx, wazero.Options{SharedMemory: true})
		case config.EngineWasmtime:
			eng, engErr = wasmtime.New(ctx, wasmtime.Options{SharedMemory: true})
		default:
			engErr = fmt.Errorf("unknown engine %q", args[1])
		}
		if engErr != nil {
			return
		}
		// The one compile path, so that the validators the worker runs on
		// every module (wazero's runtime, wasmtime's engine) start here
		// too, before the filter.
		if m, err := sandbox.Compile(ctx, eng, warmModule, sandbox.ModuleConfig{Name: "warm-up", Limits: config.Limits{MaxStack: maxStack}, Deterministic: deterministic}); err == nil {
			_ = m.Close(ctx)
		}
	}
	report, err := lockdown.Apply(lockdown.Limits{AddressSpace: as, Files: files, FileSize: fsize}, lockdown.User{UID: uid, GID: gid}, controlFD, start)
	if engErr != nil {
		fmt.Fprintln(os.Stderr, "callbox-worker:", engErr)
		return 1
	}
	if err != nil {
		// The hello still goes out, so the host can say which step
		// failed; a worker that is not locked down never compiles.
		_ = procwall.Refuse(controlFD, report)
		return 3
	}
	// wasmtime's epoch ticker asked for SCHED_FIFO 1 and, with no
	// capability left, was refused: the host raises it, if it may.
	if t, ok := eng.(interface{ TickerThread() int }); ok {
		report.RealtimeThread = t.TickerThread()
	}
	if err := procwall.Serve(eng, controlFD, report, serveOptions()); err != nil {
		fmt.Fprintln(os.Stderr, "callbox-worker:", err)
		return 1
	}
	return 0
}

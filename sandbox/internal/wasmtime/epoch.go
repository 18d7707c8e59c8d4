//go:build cgo

package wasmtime

/*
#include "glue.h"
*/
import "C"

import (
	"errors"
	"sync"
	"time"
	"unsafe"

	wt "github.com/bytecodealliance/wasmtime-go/v39"
)

// epochTicker advances every wasmtime engine's epoch at a fixed interval
// while at least one guest call is running, so an idle host costs no
// wake-ups. The ticking runs on a C thread (ticker.c), not a goroutine: a
// goroutine's tick waits for a Go P, and with every P busy (guests on the
// other engine, or any CPU-bound Go code) that wait is Go's 10 ms
// preemption slice, which is what a 1 ms timeout check must not depend on.
// Calls mark themselves running inside the cgo crossing that makes them
// (cb_call), so enter and exit cost no extra crossing.
//
// Besides every interval, the thread ticks at the earliest deadline of a
// running call (it reads the deadline each registered instance's guard
// holds while a call runs), so a timeout trips within the thread's wake-up
// latency of the deadline, not up to an interval after it. Where the
// process may (CAP_SYS_NICE or RLIMIT_RTPRIO), the thread runs at a
// real-time priority (SCHED_FIFO 1), so that wake-up does not wait for
// CPU-bound threads' time slices; it runs for microseconds per tick.
//
// The ticker also holds the core turns (turns.c): guest calls that outlive
// a tick take turns on at most Options.Cores cores, so the OS never
// time-slices more runnable guests than cores.
type epochTicker struct {
	mu     sync.Mutex
	t      *C.cb_ticker_t
	closed bool
}

// newEpochTicker starts the ticker thread; cores is how many guest calls
// take turns on the cores at once (0: no turns).
func newEpochTicker(interval time.Duration, cores int) (*epochTicker, error) {
	t := C.cb_ticker_new(C.int64_t(interval.Nanoseconds()), C.int64_t(cores))
	if t == nil {
		return nil, errors.New("wasmtime: cannot start the epoch ticker thread")
	}
	return &epochTicker{t: t}, nil
}

// add registers an engine whose epoch the ticker advances.
func (t *epochTicker) add(e *wt.Engine) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errors.New("wasmtime: engine is closed")
	}
	// wasmtime-go's Engine is a single pointer to the wasm_engine_t.
	ptr := *(**C.wasm_engine_t)(unsafe.Pointer(e))
	if ptr == nil || C.cb_ticker_add(t.t, ptr) == 0 {
		return errors.New("wasmtime: too many engine configurations (fuel/stack combinations) in one host")
	}
	return nil
}

// close stops the ticker thread; no engine is touched after it returns.
func (t *epochTicker) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.closed = true
		C.cb_ticker_close(t.t)
	}
}

// register lets the ticker tick at the deadlines of guard's calls.
func (t *epochTicker) register(g *C.cb_guard_t) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errors.New("wasmtime: engine is closed")
	}
	if C.cb_ticker_register(t.t, g) == 0 {
		return errors.New("wasmtime: out of memory registering an instance with the epoch ticker")
	}
	return nil
}

// unregister stops the ticker reading guard (a closed ticker reads
// nothing).
func (t *epochTicker) unregister(g *C.cb_guard_t) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		C.cb_ticker_unregister(t.t, g)
	}
}

// turnStats is the core turns now (turns.c's cb_ticker_turns): those
// nobody holds, the calls waiting for one, and the turns calls blocking in
// host calls have given up so far. Tests wait on these instead of sleeping.
type turnStats struct {
	Free    int64
	Waiting int32
	GivenUp uint64
}

// turns reads the ticker's turnStats.
func (t *epochTicker) turns() turnStats {
	var free C.int64_t
	var waiting C.int32_t
	var givenUp C.uint64_t
	C.cb_ticker_turns(t.t, &free, &waiting, &givenUp)
	return turnStats{Free: int64(free), Waiting: int32(waiting), GivenUp: uint64(givenUp)}
}

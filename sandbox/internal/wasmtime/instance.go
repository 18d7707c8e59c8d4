//go:build cgo

// instance.go: an instance of a compiled module: its instantiation (the
// store, the guard and its registration with the ticker, the start
// function), its exports, the calls into it through cb_call with the
// guard armed and the trap classified after, its memory view, and the Go
// side of the epoch callback (callboxWatch).

package wasmtime

/*
#include <stdlib.h>
#include "glue.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/cgo"
	"sync/atomic"
	"time"
	"unsafe"

	wt "github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/core"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/meter"
)

// Instantiate implements core.Module. The start function runs against
// deadline, like a call.
func (m *module) Instantiate(ctx context.Context, deadline time.Time) (sandbox.Instance, error) {
	inst := &instance{m: m, state: core.NewGuestState(&m.cfg.Limits, m.cfg.Logger)}
	if m.cfg.Profile != nil {
		inst.state.Profile = core.NewProfileRecorder(m.cfg.Profile)
	}
	inst.SetDeadline(deadline)
	inst.store = wt.NewStoreWithData(m.eng, inst)
	lim := m.cfg.Limits
	memLimit := int64(-1)
	if lim.MaxMemory > 0 {
		memLimit = int64(lim.MaxMemory)
	}
	// Tables are bounded in the module itself (core.Compile), as on
	// wazero.
	inst.store.Limiter(memLimit, -1, -1, -1, -1)
	inst.storePtr = *(**C.wasmtime_store_t)(unsafe.Pointer(inst.store))
	if C.cb_store_context(inst.storePtr) != (*C.wasmtime_context_t)(unsafe.Pointer(inst.store.Context())) {
		inst.store.Close()
		return nil, errors.New("wasmtime: store layout differs from the one this build expects")
	}
	inst.ctxPtr = C.cb_store_context(inst.storePtr)
	inst.handle = cgo.NewHandle(inst)
	inst.guard = C.cb_guard_new(m.e.ticker.t, C.uintptr_t(inst.handle))
	if inst.guard == nil {
		inst.Close(ctx)
		return nil, errors.New("wasmtime: out of memory allocating an instance's guard")
	}
	if err := m.e.ticker.register(inst.guard); err != nil {
		C.cb_guard_free(inst.guard)
		inst.guard = nil
		inst.Close(ctx)
		return nil, err
	}
	// Host calls reach the instance through the guard: pinned, it may be
	// kept in C memory until Close.
	inst.pinner.Pin(inst)
	inst.guard.inst = unsafe.Pointer(inst)
	if m.metered {
		inst.state.Counter = hostCounter{inst.guard}
	}
	// A guest asleep in a host call gives its core turn to a waiting one
	// (it takes a turn again at its next tick).
	guard := inst.guard
	inst.state.Blocking = func() { C.cb_guard_release_turn(guard) }
	C.cb_set_epoch_callback(inst.storePtr, inst.guard)
	inst.args = (*[maxStack]C.cb_val_raw_t)(C.calloc(maxStack, C.size_t(unsafe.Sizeof(C.cb_val_raw_t{}))))
	inst.res = (*C.cb_call_result_t)(C.calloc(1, C.size_t(unsafe.Sizeof(C.cb_call_result_t{}))))

	inst.store.SetEpochDeadline(1)
	watch := inst.begin(ctx, true)
	if m.metered {
		// The counter starts at its initial value, 0; the start
		// function's first check refills it.
		inst.state.Fuel.Start(core.LoadFuel, wasmtimeSlice, 0)
	}
	// The guard is the thread's current one from cb_guard_begin to
	// cb_guard_end: the instantiation must run on the same thread.
	// wasmtime-go's Linker and Module are a single pointer first; its
	// Instance is a single wasmtime_instance_t (checked in init).
	var raw C.cb_instance_t
	res := inst.res
	runtime.LockOSThread()
	C.cb_guard_begin(inst.guard, inst.deadlineNs, watch)
	C.cb_instantiate(*(**C.wasmtime_linker_t)(unsafe.Pointer(m.linker)), inst.ctxPtr,
		*(**C.wasmtime_module_t)(unsafe.Pointer(m.mod)), m.nativeStack(), &raw, res)
	C.cb_guard_end(inst.guard)
	runtime.UnlockOSThread()
	inst.memfd, inst.memCap = int(res.memfd), uint64(res.mem_cap)
	runtime.KeepAlive(m.linker)
	runtime.KeepAlive(m.mod)
	runtime.KeepAlive(inst.store)
	t := inst.end(nil, res)
	if t != nil {
		inst.Close(ctx)
		return nil, fmt.Errorf("instantiate: %w", t)
	}
	wi := new(wt.Instance)
	*(*C.cb_instance_t)(unsafe.Pointer(wi)) = raw
	inst.inst = wi
	if ext := wi.GetExport(inst.store, "memory"); ext != nil && ext.Memory() != nil {
		// wasmtime-go's Memory is a single wasmtime_memory_t value.
		inst.mem = (*C.cb_memory_t)(C.calloc(1, C.size_t(unsafe.Sizeof(C.cb_memory_t{}))))
		*inst.mem = *(*C.cb_memory_t)(unsafe.Pointer(ext.Memory()))
		var data *C.uint8_t
		var size C.size_t
		C.cb_memory_view(inst.ctxPtr, inst.mem, &data, &size)
		inst.setView(data, size)
	}
	if m.metered {
		ext := wi.GetExport(inst.store, meter.BudgetExport)
		if ext == nil || ext.Global() == nil {
			inst.Close(ctx)
			return nil, errors.New("instantiate: metered module lacks its budget global")
		}
		inst.budget = ext.Global()
		// wasmtime-go's Global is a single wasmtime_global_t value.
		inst.budgetRaw = (*C.cb_global_t)(C.calloc(1, C.size_t(unsafe.Sizeof(C.cb_global_t{}))))
		*inst.budgetRaw = *(*C.cb_global_t)(unsafe.Pointer(inst.budget))
	}
	return inst, nil
}

// hostCounter reaches a metered instance's budget global from a host
// function, through the caller the trampoline records in the guard
// (cb_counter_get/cb_counter_set): only imports that charge for guest
// bytes (GuestState.ChargeBytes) cross back into C for it.
type hostCounter struct{ g *C.cb_guard_t }

func (h hostCounter) Get() int64  { return int64(C.cb_counter_get(h.g)) }
func (h hostCounter) Set(v int64) { C.cb_counter_set(h.g, C.int64_t(v)) }

// setView records the memory's current data pointer and size.
func (i *instance) setView(data *C.uint8_t, size C.size_t) {
	if data == nil || size == 0 {
		i.view = nil
		return
	}
	i.view = unsafe.Slice((*byte)(unsafe.Pointer(data)), int(size))
}

// maxStack is the largest params/results count of any export callbox calls.
const maxStack = 8

type instance struct {
	m        *module
	store    *wt.Store
	storePtr *C.wasmtime_store_t
	ctxPtr   *C.wasmtime_context_t
	inst     *wt.Instance
	mem      *C.cb_memory_t // nil when the module has no memory export
	view     []byte         // the memory as of the end of the last call
	state    *core.GuestState
	handle   cgo.Handle
	guard    *C.cb_guard_t // C memory: the epoch callback's per-call state
	args     *[maxStack]C.cb_val_raw_t
	res      *C.cb_call_result_t // C memory, reused by every call
	// memfd is the file behind the memory under Options.SharedMemory (-1
	// or 0 otherwise: see MemoryFile), memCap the most it may grow to.
	memfd  int
	memCap uint64

	// Metered modules (a fuel budget): the budget global, and a copy of
	// it in C memory for cb_call (host functions reach it through
	// hostCounter).
	budget    *wt.Global
	budgetRaw *C.cb_global_t
	// deadlineNs is the deadline last set, on the guard's CLOCK_MONOTONIC
	// clock; 0: none.
	deadlineNs C.int64_t
	pinner     runtime.Pinner
	// hostStack holds a host call's parameters and results.
	hostStack [16]uint64

	// Per call, on the calling goroutine (the epoch callback runs on it).
	callCtx     context.Context
	unwatch     func() // stops watching callCtx; nil when not watching
	fuelUsed    uint64
	fuelKnown   bool
	fuelCounter int64 // the counter's value at the call's start
}

// function is a resolved export.
type function struct {
	fn      C.cb_wasmtime_func_t
	params  int
	results []sandbox.ValType
	service bool // an ABI service export: runs under core.LoadFuel
}

// Export implements core.Instance.
func (i *instance) Export(name string, params, results []sandbox.ValType) (sandbox.Function, error) {
	if len(params) > maxStack || len(results) > maxStack {
		return nil, fmt.Errorf("export %q: too many parameters", name)
	}
	ext := i.inst.GetExport(i.store, name)
	if ext == nil || ext.Func() == nil {
		return nil, sandbox.MissingExport(name)
	}
	f := ext.Func()
	ty := f.Type(i.store)
	got := sandbox.FuncType{Params: valTypes(ty.Params()), Results: valTypes(ty.Results())}
	if err := sandbox.CheckExport(name, got, sandbox.FuncType{Params: params, Results: results}); err != nil {
		return nil, err
	}
	// wasmtime-go's Func is a single wasmtime_func_t value.
	raw := *(*C.cb_wasmtime_func_t)(unsafe.Pointer(f))
	return &function{fn: raw, params: len(params), results: results, service: core.IsServiceExport(name)}, nil
}

func valTypes(vs []*wt.ValType) []sandbox.ValType {
	out := make([]sandbox.ValType, len(vs))
	for i, v := range vs {
		switch v.Kind() {
		case wt.KindI32:
			out[i] = sandbox.I32
		case wt.KindI64:
			out[i] = sandbox.I64
		case wt.KindF32:
			out[i] = sandbox.F32
		case wt.KindF64:
			out[i] = sandbox.F64
		default:
			out[i] = sandbox.ValType(v.Kind())
		}
	}
	return out
}

// SetDeadline implements core.Instance: the deadline is converted once
// to the guard's clock, by arithmetic on Go's monotonic readings (no clock
// read, no cgo crossing); cb_call arms the guard with it.
func (i *instance) SetDeadline(deadline time.Time) {
	i.state.SetDeadline(deadline)
	if deadline.IsZero() {
		i.deadlineNs = 0
		return
	}
	e := i.m.e
	i.deadlineNs = C.int64_t(max(e.anchorNs+int64(deadline.Sub(e.anchorGo)), 1))
}

// begin prepares a call and returns whether the caller's context can end
// (then the epoch callback asks Go to watch it once the call outlives a
// tick). The guard (with the deadline last set), the metered budget
// counter and the epoch deadline are armed in C, by cb_call in the same
// crossing as the call (or cb_guard_begin, for instantiation). A service
// export runs under core.LoadFuel, not the callback's budget.
func (i *instance) begin(ctx context.Context, service bool) C.int32_t {
	i.callCtx = ctx
	i.state.Begin(ctx)
	if i.m.metered {
		i.fuelCounter = 0
		if i.budgetRaw != nil {
			fuel := i.m.cfg.Limits.Fuel
			if service {
				fuel = core.LoadFuel
			}
			i.fuelCounter = i.state.Fuel.Begin(fuel, wasmtimeSlice)
		}
	}
	if ctx.Done() != nil {
		return 1
	}
	return 0
}

// end disarms the call and classifies its failure, if any: err is a
// wasmtime-go error, res a raw result from the direct call path.
func (i *instance) end(err error, res *C.cb_call_result_t) *sandbox.Trap {
	if i.unwatch != nil {
		i.unwatch()
		i.unwatch = nil
	}
	i.state.End()
	ctx := i.callCtx
	i.callCtx = nil
	// The engine's own trap: the failure where nothing before it in the
	// shared order decides, and where the guest was in any case.
	var trap *sandbox.Trap
	if i.guard.tripped == C.CB_TRIP_CPU {
		// Stopped at its CPU limit: that is the call's failure, whatever
		// else the interruption looks like.
		i.state.Fail(core.CPULimitTrap(i.m.cfg.Limits.MaxCPU))
		i.guard.tripped = C.CB_TRIP_NONE
	}
	interrupted := i.guard.tripped != C.CB_TRIP_NONE
	failed := err != nil || res != nil && (res.trap != nil || res.error != nil || res.stack_room != 0)
	if failed { // also when interrupted or aborted: the trap's frames say where
		switch {
		case res != nil && res.stack_room != 0:
			trap = core.ThreadStackTrap(uint64(res.stack_room), uint64(i.m.nativeStack()), i.m.cfg.Limits.MaxStack)
		case res != nil && res.trap != nil:
			trap = classifyRawTrap(res.trap, &i.m.cfg.Limits, i.m.bt)
		case res != nil && res.error != nil:
			trap = core.EngineTrap(abi.OtherTrap, rawErrorMessage(res.error), rawErrorFrames(res.error, i.m.bt), nil, &i.m.cfg.Limits)
		default:
			trap = classifyGoError(err, &i.m.cfg.Limits, i.m.bt)
		}
	}
	if res != nil {
		if res.trap != nil {
			C.cb_trap_delete(res.trap)
		}
		if res.error != nil {
			C.cb_error_delete(res.error)
		}
	}
	var t *sandbox.Trap
	if failed || i.state.Abort != nil {
		t = i.state.Classify(ctx, interrupted, trap, uint64(len(i.view)))
	}
	// The meter's counter: exact after a return or FuelExhausted, a floor
	// at most one slice short after an interruption or another trap
	// (FuelMeter.Used).
	i.fuelUsed, i.fuelKnown = 0, false
	if i.m.metered && res != nil && i.budgetRaw != nil {
		i.fuelUsed, i.fuelKnown = i.state.Fuel.Used(int64(res.counter)), true
	}
	i.state.ProfileEnd(i.fuelUsed)
	return t
}

// Call implements core.Instance through wasmtime's unchecked call, which
// skips wasmtime-go's per-call type reflection, in one cgo crossing.
func (i *instance) Call(ctx context.Context, fn sandbox.Function, stack []uint64) error {
	f := fn.(*function)
	watch := i.begin(ctx, f.service)
	for k := 0; k < f.params; k++ {
		i.args[k] = C.cb_val_raw_t{lo: C.uint64_t(stack[k])}
	}
	res := i.res
	var cpuLimit C.int64_t
	if !f.service {
		cpuLimit = C.int64_t(i.m.cfg.Limits.MaxCPU)
	}
	C.cb_call(i.ctxPtr, &f.fn, &i.args[0], C.size_t(max(f.params, len(f.results))), i.mem, i.budgetRaw, C.int64_t(i.fuelCounter), i.guard, i.deadlineNs, cpuLimit, watch, i.m.nativeStack(), res)
	runtime.KeepAlive(i.store)
	if i.mem != nil {
		i.setView(res.mem_data, res.mem_size)
	}
	if t := i.end(nil, res); t != nil {
		return t
	}
	for k, r := range f.results {
		v := uint64(i.args[k].lo)
		if r == sandbox.I32 || r == sandbox.F32 {
			v = uint64(uint32(v))
		}
		stack[k] = v
	}
	return nil
}

// Memory implements core.Instance: the view as of the last call, which
// is exact between calls (only the guest grows memory).
func (i *instance) Memory() []byte { return i.view }

// State implements core.Instance.
func (i *instance) LastCall() sandbox.CallReport { return i.state.Report() }

// GuestState is the whole import state (core.Stateful), for the
// process-isolation worker.
func (i *instance) GuestState() *core.GuestState { return i.state }

// FuelConsumed implements core.Instance.
func (i *instance) FuelConsumed() (uint64, bool) { return i.fuelUsed, i.fuelKnown }

// Close implements core.Instance.
func (i *instance) Close(context.Context) error {
	if i.handle != 0 {
		i.handle.Delete()
		i.handle = 0
	}
	for _, p := range []unsafe.Pointer{unsafe.Pointer(i.args), unsafe.Pointer(i.res), unsafe.Pointer(i.mem), unsafe.Pointer(i.budgetRaw)} {
		if p != nil {
			C.free(p)
		}
	}
	i.args, i.res, i.mem, i.budgetRaw = nil, nil, nil, nil
	if i.store != nil {
		i.store.Close()
		i.store = nil
	}
	if i.guard != nil {
		i.m.e.ticker.unregister(i.guard)
		C.cb_guard_free(i.guard) // after the store, whose callback holds it
		i.guard = nil
	}
	i.pinner.Unpin()
	return nil
}

// callboxWatch runs on the guest's thread at the first epoch tick of a call
// whose context can end: from then on the context's end sets the guard's
// stop word, which the epoch callback checks in C at every tick. Calls
// shorter than a tick never get here, so they pay nothing for it.
//
//export callboxWatch
func callboxWatch(h C.uintptr_t) {
	inst, ok := cgo.Handle(h).Value().(*instance)
	if !ok || inst.callCtx == nil || inst.guard == nil {
		return
	}
	stop := (*uint32)(unsafe.Pointer(&inst.guard.stop))
	seq := uint32(inst.guard.seq)
	if inst.callCtx.Err() != nil {
		atomic.StoreUint32(stop, seq)
		return
	}
	// stop (in end) may find the function already started; end then waits
	// for done, so it never writes to a guard that has been freed, and a
	// late write carries this call's number, which no later call matches.
	done := make(chan struct{})
	guard := inst.guard
	stopWatch := context.AfterFunc(inst.callCtx, func() {
		atomic.StoreUint32(stop, seq)
		C.cb_guard_poke(guard) // a call waiting for its turn sees it now
		close(done)
	})
	inst.unwatch = func() {
		if !stopWatch() {
			<-done
		}
	}
}

// MemoryFile implements core.SharedMemory: the memfd behind the
// instance's memory (Options.SharedMemory) and the bytes it may grow to,
// max_memory included; -1 when the memory is the engine's own.
func (i *instance) MemoryFile() (fd int, reserved uint64) {
	if !i.m.e.opts.SharedMemory || i.memCap == 0 {
		return -1, 0
	}
	reserved = i.memCap
	if limit := i.m.cfg.Limits.MaxMemory; limit > 0 && limit < reserved {
		reserved = limit // whole pages: config validates it
	}
	return i.memfd, reserved
}

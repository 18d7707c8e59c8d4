//go:build cgo

package wasmtime

/*
#include <stdlib.h>
#include "glue.h"
*/
import "C"

import (
	"github.com/seed4b3e0ccb/callbox/abi"

	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/cgo"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	wt "github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/seed4b3e0ccb/callbox/internal/cachefile"
	"github.com/seed4b3e0ccb/callbox/internal/meter"
	"github.com/seed4b3e0ccb/callbox/internal/sandbox"
)

// Available reports whether this build includes the wasmtime engine (it
// needs cgo).
const Available = true

// engineKey selects a wasmtime engine: the stack limit is an engine-wide
// setting in wasmtime, so callbacks that differ in it compile with
// different engines. (Fuel is not wasmtime's: see Compile.)
type engineKey struct {
	maxStack uint64
}

// Engine is callbox's wasmtime engine.
type Engine struct {
	opts    Options
	mu      sync.Mutex
	engines map[engineKey]*wt.Engine
	ticker  *epochTicker
	disk    *cachefile.Dir        // serialized compiled modules; nil without CacheDir
	modules map[string]*wt.Module // compiled modules by cache key, shared by callbacks
}

var _ sandbox.Engine = (*Engine)(nil)

// New creates the engine. Nothing is compiled until Compile.
func New(_ context.Context, opts Options) (*Engine, error) {
	// The cgo shim reads wasmtime-go's Func and Memory values as the C
	// structs they wrap; refuse to run against a layout we do not know.
	if unsafe.Sizeof(wt.Func{}) != unsafe.Sizeof(C.cb_wasmtime_func_t{}) || unsafe.Sizeof(wt.Memory{}) != unsafe.Sizeof(C.cb_memory_t{}) {
		return nil, errors.New("wasmtime: wasmtime-go's Func/Memory layout differs from the one this build expects")
	}
	if opts.EpochInterval <= 0 {
		opts.EpochInterval = time.Millisecond
	}
	e := &Engine{opts: opts, engines: map[engineKey]*wt.Engine{}, modules: map[string]*wt.Module{}}
	if opts.CacheDir != "" {
		d, err := cachefile.Open(filepath.Join(opts.CacheDir, "wasmtime"))
		if err != nil {
			return nil, err
		}
		e.disk = d
	}
	ticker, err := newEpochTicker(opts.EpochInterval)
	if err != nil {
		return nil, err
	}
	e.ticker = ticker
	// The engine most callbacks use (no fuel, default stack) is made now,
	// with the process, rather than on the first compile.
	if _, err := e.engine(engineKey{}); err != nil {
		e.Close(context.Background())
		return nil, err
	}
	return e, nil
}

// Name implements sandbox.Engine.
func (e *Engine) Name() string { return "wasmtime" }

// Version implements sandbox.Engine.
func (e *Engine) Version() string { return Version }

// Supports implements sandbox.Engine: wasmtime meters fuel and bounds the
// stack.
func (e *Engine) Supports(sandbox.Feature) bool { return true }

func (e *Engine) engine(k engineKey) (*wt.Engine, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if eng, ok := e.engines[k]; ok {
		return eng, nil
	}
	cfg := wt.NewConfig()
	cfg.SetEpochInterruption(true)
	if k.maxStack > 0 {
		cfg.SetMaxWasmStack(int(k.maxStack))
	}
	cfg.SetCraneliftOptLevel(wt.OptLevelSpeed)
	eng := wt.NewEngineWithConfig(cfg)
	if err := e.ticker.add(eng); err != nil {
		eng.Close()
		return nil, err
	}
	e.engines[k] = eng
	return eng, nil
}

// Compile implements sandbox.Engine. Compiled modules are cached in
// memory and, with a CacheDir, on disk, under a key of the original
// module's sha256, the rewrite's version, the engine version and every
// setting that changes compiled code: a hit skips the rewrite and the
// compile.
//
// A callback with a fuel budget runs the metered module (internal/meter),
// the one the wazero engine runs, so fuel means the same on both engines;
// wasmtime's own fuel counts differently (and charges nothing for bulk
// memory operations). Timeouts stay with epochs: the meter's refill import
// only accounts fuel here, once per wasmtimeSlice units.
func (e *Engine) Compile(_ context.Context, wasm []byte, cfg sandbox.ModuleConfig) (sandbox.Module, error) {
	ek := engineKey{maxStack: cfg.Limits.MaxStack}
	eng, err := e.engine(ek)
	if err != nil {
		return nil, err
	}
	metered := cfg.Limits.Fuel > 0
	sum := sandbox.ModuleSum(wasm, cfg)
	key := fmt.Sprintf("%x-meter%d-wasmtime%s-fuel%v-stack%d-%s", sum, meter.Version, Version, metered, ek.maxStack, runtime.GOARCH)
	mod, err := e.compiled(eng, key, wasm, metered)
	if err != nil {
		return nil, err
	}
	linker := wt.NewLinker(eng)
	hfs := append(sandbox.HostFuncs(cfg.WASI), sandbox.GrowDeniedFunc())
	if metered {
		hfs = append(hfs, sandbox.RefillFunc(), sandbox.OverflowFunc(meteredStack))
	}
	for _, hf := range hfs {
		if err := linker.FuncNew(hf.Module, hf.Name, funcType(hf), adapt(hf)); err != nil {
			return nil, fmt.Errorf("wasmtime: define %s.%s: %w", hf.Module, hf.Name, err)
		}
	}
	return &module{e: e, eng: eng, mod: mod, linker: linker, cfg: cfg, metered: metered}, nil
}

// meteredStack is the meter's stack limit on wasmtime, which bounds the
// stack itself (max_stack): high enough never to trip.
const meteredStack = 1 << 62

// wasmtimeSlice is how many fuel units a metered guest runs between two
// refills (a crossing into Go each): 0.1-0.3 ms of plain compiled code.
// Fuel statistics after a timeout are at most this far short.
const wasmtimeSlice = 1 << 20

// compiled returns the compiled module for key: from memory, from disk, or
// rewritten and compiled now.
func (e *Engine) compiled(eng *wt.Engine, key string, wasm []byte, metered bool) (*wt.Module, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if mod, ok := e.modules[key]; ok {
		return mod, nil
	}
	var mod *wt.Module
	if e.disk != nil {
		// Deserializing from the file lets wasmtime map it instead of
		// copying it.
		if path, ok := e.disk.GetRaw(key); ok {
			mod, _ = wt.NewModuleDeserializeFile(eng, path) // a bad entry recompiles
		}
	}
	if mod == nil {
		// wasmtime's store limiter refuses memory.grow silently; the grow
		// hook tells the host when that refusal was the memory limit. A
		// module the rewriter cannot handle runs as is (MemoryLimit is
		// then inferred from the memory size).
		rewritten, err := meter.Instrument(wasm, meter.Options{Meter: metered, StackLimit: meteredStack, GrowHook: true})
		switch {
		case err != nil && metered:
			return nil, fmt.Errorf("fuel is counted by metering the module, and this one cannot be metered (%w); remove fuel", err)
		case err == nil:
			wasm = rewritten
		}
		m, err := wt.NewModule(eng, wasm)
		if err != nil {
			return nil, fmt.Errorf("wasmtime: %w", err)
		}
		mod = m
		if e.disk != nil {
			if payload, err := mod.Serialize(); err == nil {
				e.disk.PutRaw(key, payload)
			}
		}
	}
	e.modules[key] = mod
	return mod, nil
}

// Close implements sandbox.Engine.
func (e *Engine) Close(context.Context) error {
	e.ticker.close()
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, mod := range e.modules {
		mod.Close()
		delete(e.modules, k)
	}
	for k, eng := range e.engines {
		eng.Close()
		delete(e.engines, k)
	}
	return nil
}

func valType(v sandbox.ValType) *wt.ValType {
	switch v {
	case sandbox.I64:
		return wt.NewValType(wt.KindI64)
	case sandbox.F32:
		return wt.NewValType(wt.KindF32)
	case sandbox.F64:
		return wt.NewValType(wt.KindF64)
	}
	return wt.NewValType(wt.KindI32)
}

func funcType(hf sandbox.HostFunc) *wt.FuncType {
	p := make([]*wt.ValType, len(hf.Params))
	for i, v := range hf.Params {
		p[i] = valType(v)
	}
	r := make([]*wt.ValType, len(hf.Results))
	for i, v := range hf.Results {
		r[i] = valType(v)
	}
	return wt.NewFuncType(p, r)
}

// adapt wraps an engine-neutral host function for wasmtime. The instance
// is found through the store's data.
func adapt(hf sandbox.HostFunc) func(*wt.Caller, []wt.Val) ([]wt.Val, *wt.Trap) {
	return func(c *wt.Caller, args []wt.Val) ([]wt.Val, *wt.Trap) {
		inst, _ := c.Data().(*instance)
		if inst == nil {
			return nil, wt.NewTrap("callbox: unknown instance")
		}
		g := inst.state
		if inst.m.metered {
			if inst.hc.global == nil {
				// The start function's imports run before Instantiate
				// has the global: reach it through the caller.
				if ext := c.GetExport(meter.BudgetExport); ext != nil {
					inst.hc.global = ext.Global()
				}
			}
			if inst.hc.global != nil {
				inst.hc.c = c
				g.Counter = &inst.hc
			}
		}
		n := max(len(hf.Params), len(hf.Results))
		stack := make([]uint64, n)
		for i, a := range args {
			switch a.Kind() {
			case wt.KindI64:
				stack[i] = uint64(a.I64())
			default:
				stack[i] = uint64(uint32(a.I32()))
			}
		}
		var mem []byte
		if ext := c.GetExport("memory"); ext != nil && ext.Memory() != nil {
			mem = ext.Memory().UnsafeData(c)
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					g.Fail(&sandbox.Trap{Class: sandbox.HostPanic, Message: fmt.Sprintf("host function %s.%s panicked: %v", hf.Module, hf.Name, r)})
				}
			}()
			hf.Fn(g, mem, stack)
		}()
		if g.Abort != nil {
			return nil, wt.NewTrap("callbox: call aborted by the host")
		}
		out := make([]wt.Val, len(hf.Results))
		for i, r := range hf.Results {
			if r == sandbox.I64 {
				out[i] = wt.ValI64(int64(stack[i]))
			} else {
				out[i] = wt.ValI32(int32(uint32(stack[i])))
			}
		}
		return out, nil
	}
}

type module struct {
	e       *Engine
	eng     *wt.Engine
	mod     *wt.Module
	linker  *wt.Linker
	cfg     sandbox.ModuleConfig
	metered bool // fuel is counted by the meter's budget global
}

// Close releases the module's linker; the compiled module stays in the
// engine's cache until the engine closes.
func (m *module) Close(context.Context) error {
	m.linker.Close()
	return nil
}

// Instantiate implements sandbox.Module. The start function runs under the
// module's timeout, like a call.
func (m *module) Instantiate(ctx context.Context) (sandbox.Instance, error) {
	inst := &instance{m: m, state: sandbox.NewGuestState(&m.cfg.Limits, m.cfg.Logger)}
	inst.store = wt.NewStoreWithData(m.eng, inst)
	lim := m.cfg.Limits
	memLimit := int64(-1)
	if lim.MaxMemory > 0 {
		memLimit = int64(lim.MaxMemory)
	}
	inst.store.Limiter(memLimit, abi.MaxTableElements, -1, -1, -1)
	inst.storePtr = *(**C.wasmtime_store_t)(unsafe.Pointer(inst.store))
	if C.cb_store_context(inst.storePtr) != (*C.wasmtime_context_t)(unsafe.Pointer(inst.store.Context())) {
		inst.store.Close()
		return nil, errors.New("wasmtime: store layout differs from the one this build expects")
	}
	inst.ctxPtr = C.cb_store_context(inst.storePtr)
	inst.handle = cgo.NewHandle(inst)
	inst.guard = (*C.cb_guard_t)(C.calloc(1, C.size_t(unsafe.Sizeof(C.cb_guard_t{}))))
	inst.guard.ticker = m.e.ticker.t
	inst.guard.handle = C.uintptr_t(inst.handle)
	if err := m.e.ticker.register(inst.guard); err != nil {
		C.free(unsafe.Pointer(inst.guard))
		inst.guard = nil
		inst.Close(ctx)
		return nil, err
	}
	C.cb_set_epoch_callback(inst.storePtr, inst.guard)
	inst.args = (*[maxStack]C.cb_val_raw_t)(C.calloc(maxStack, C.size_t(unsafe.Sizeof(C.cb_val_raw_t{}))))
	inst.res = (*C.cb_call_result_t)(C.calloc(1, C.size_t(unsafe.Sizeof(C.cb_call_result_t{}))))

	inst.store.SetEpochDeadline(1)
	timeout, watch := inst.begin(ctx, true)
	if m.metered {
		// The counter starts at its initial value, 0; the start
		// function's first check refills it.
		inst.state.Fuel.Start(sandbox.LoadFuel, wasmtimeSlice, 0)
	}
	C.cb_guard_begin(inst.guard, timeout, watch)
	wi, err := m.linker.Instantiate(inst.store, m.mod)
	C.cb_guard_end(inst.guard)
	t := inst.end(err, nil)
	if t != nil {
		inst.Close(ctx)
		return nil, fmt.Errorf("instantiate: %w", t)
	}
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

// hostCounter reaches the budget global from a host function, through its
// caller.
type hostCounter struct {
	c      *wt.Caller
	global *wt.Global
}

func (h *hostCounter) Get() int64  { return h.global.Get(h.c).I64() }
func (h *hostCounter) Set(v int64) { _ = h.global.Set(h.c, wt.ValI64(v)) }

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
	state    *sandbox.GuestState
	handle   cgo.Handle
	guard    *C.cb_guard_t // C memory: the epoch callback's per-call state
	args     *[maxStack]C.cb_val_raw_t
	res      *C.cb_call_result_t // C memory, reused by every call

	// Metered modules (a fuel budget): the budget global, and a copy of
	// it in C memory for cb_call; hc serves host functions.
	budget    *wt.Global
	budgetRaw *C.cb_global_t
	hc        hostCounter

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
	service bool // an ABI service export: runs under sandbox.LoadFuel
}

// Export implements sandbox.Instance.
func (i *instance) Export(name string, params, results []sandbox.ValType) (sandbox.Function, error) {
	if len(params) > maxStack || len(results) > maxStack {
		return nil, fmt.Errorf("export %q: too many parameters", name)
	}
	ext := i.inst.GetExport(i.store, name)
	if ext == nil || ext.Func() == nil {
		return nil, fmt.Errorf("export %q is missing", name)
	}
	f := ext.Func()
	ty := f.Type(i.store)
	if !sameTypes(ty.Params(), params) || !sameTypes(ty.Results(), results) {
		return nil, fmt.Errorf("export %q has type %s, want %s", name, typeString(ty.Params(), ty.Results()), sandboxTypeString(params, results))
	}
	// wasmtime-go's Func is a single wasmtime_func_t value.
	raw := *(*C.cb_wasmtime_func_t)(unsafe.Pointer(f))
	return &function{fn: raw, params: len(params), results: results, service: sandbox.IsServiceExport(name)}, nil
}

func sameTypes(a []*wt.ValType, b []sandbox.ValType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Kind() != valType(b[i]).Kind() {
			return false
		}
	}
	return true
}

func typeString(p, r []*wt.ValType) string {
	name := func(vs []*wt.ValType) string {
		s := make([]string, len(vs))
		for i, v := range vs {
			s[i] = v.String()
		}
		return strings.Join(s, ", ")
	}
	return "(" + name(p) + ") -> (" + name(r) + ")"
}

func sandboxTypeString(p, r []sandbox.ValType) string {
	name := func(vs []sandbox.ValType) string {
		s := make([]string, len(vs))
		for i, v := range vs {
			s[i] = v.String()
		}
		return strings.Join(s, ", ")
	}
	return "(" + name(p) + ") -> (" + name(r) + ")"
}

// begin prepares a call and returns what the guard needs: the timeout in
// nanoseconds (0: none) and whether the caller's context can end (then the
// epoch callback asks Go to watch it once the call outlives a tick). The
// guard, fuel and epoch deadline are armed in C, by cb_call in the same
// crossing as the call (or cb_guard_begin and armStore, for
// instantiation).
func (i *instance) begin(ctx context.Context, service bool) (C.int64_t, C.int32_t) {
	i.callCtx = ctx
	i.state.Begin(ctx)
	if i.m.metered {
		i.fuelCounter = 0
		if i.budgetRaw != nil {
			fuel := i.m.cfg.Limits.Fuel
			if service {
				fuel = sandbox.LoadFuel
			}
			i.fuelCounter = i.state.Fuel.Begin(fuel, wasmtimeSlice)
		}
	}
	var watch C.int32_t
	if ctx.Done() != nil {
		watch = 1
	}
	return C.int64_t(i.m.cfg.Limits.Timeout.Nanoseconds()), watch
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
	if i.m.metered && res != nil && i.budgetRaw != nil {
		i.fuelUsed, i.fuelKnown = i.state.Fuel.Used(int64(res.counter)), true
	}
	var t *sandbox.Trap
	switch {
	case i.state.Abort != nil:
		t = i.state.Abort
	case i.guard.tripped == C.CB_TRIP_DEADLINE:
		t = &sandbox.Trap{Class: sandbox.Timeout, Message: fmt.Sprintf("timeout after %v", i.m.cfg.Limits.Timeout)}
	case i.guard.tripped == C.CB_TRIP_STOP:
		t = sandbox.InterruptTrap(ctx, i.m.cfg.Limits.Timeout)
	case res != nil && res.trap != nil:
		t = classifyRawTrap(res.trap)
	case res != nil && res.error != nil:
		t = &sandbox.Trap{Class: sandbox.OtherTrap, Message: rawErrorMessage(res.error)}
	case err != nil:
		t = classifyGoError(err)
	}
	if res != nil {
		if res.trap != nil {
			C.cb_trap_delete(res.trap)
		}
		if res.error != nil {
			C.cb_error_delete(res.error)
		}
	}
	if t == nil {
		return nil
	}
	return sandbox.MemoryLimitTrap(t, i.state, uint64(len(i.view)))
}

// Call implements sandbox.Instance through wasmtime's unchecked call, which
// skips wasmtime-go's per-call type reflection, in one cgo crossing.
func (i *instance) Call(ctx context.Context, fn sandbox.Function, stack []uint64) error {
	f := fn.(*function)
	timeout, watch := i.begin(ctx, f.service)
	for k := 0; k < f.params; k++ {
		i.args[k] = C.cb_val_raw_t{lo: C.uint64_t(stack[k])}
	}
	res := i.res
	C.cb_call(i.ctxPtr, &f.fn, &i.args[0], C.size_t(max(f.params, len(f.results))), i.mem, i.budgetRaw, C.int64_t(i.fuelCounter), i.guard, timeout, watch, res)
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

// Memory implements sandbox.Instance: the view as of the last call, which
// is exact between calls (only the guest grows memory).
func (i *instance) Memory() []byte { return i.view }

// State implements sandbox.Instance.
func (i *instance) State() *sandbox.GuestState { return i.state }

// FuelConsumed implements sandbox.Instance.
func (i *instance) FuelConsumed() (uint64, bool) { return i.fuelUsed, i.fuelKnown }

// Close implements sandbox.Instance.
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
		C.free(unsafe.Pointer(i.guard)) // after the store, whose callback holds it
		i.guard = nil
	}
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
	stopWatch := context.AfterFunc(inst.callCtx, func() {
		atomic.StoreUint32(stop, seq)
		close(done)
	})
	inst.unwatch = func() {
		if !stopWatch() {
			<-done
		}
	}
}

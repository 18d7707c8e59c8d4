//go:build cgo

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
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	wt "github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/internal/sandbox/internal/engine"
	"github.com/seed4b3e0ccb/callbox/internal/sandbox/internal/meter"
	"github.com/seed4b3e0ccb/callbox/internal/sandbox/internal/validate"
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
	// modules holds compiled modules, shared by callbacks (in memory, and
	// serialized on disk under CacheDir/wasmtime).
	modules *engine.CompileCache[*wt.Module]
	// A Go time and the C guard's CLOCK_MONOTONIC reading taken together:
	// deadlines convert to the guard's clock by arithmetic alone (Go's
	// monotonic readings), with no clock read and no cgo crossing.
	anchorGo time.Time
	anchorNs int64
	// hostFuncs is every host function a module may import (the WASI
	// profile included: a linker defines the subset its module is
	// granted); the C trampoline names one by its index here.
	hostFuncs []engine.HostFunc
	hostIndex map[string]int // "module.name" -> index in hostFuncs
	validator *validate.Validator
}

var _ engine.Engine = (*Engine)(nil)

// New creates the engine. Nothing is compiled until Compile.
func New(_ context.Context, opts Options) (*Engine, error) {
	// The cgo shim reads wasmtime-go's Func, Memory, Linker and Module
	// values as the C structs they wrap, and makes Instances from the C
	// struct; refuse to run against a layout we do not know.
	if unsafe.Sizeof(wt.Func{}) != unsafe.Sizeof(C.cb_wasmtime_func_t{}) || unsafe.Sizeof(wt.Memory{}) != unsafe.Sizeof(C.cb_memory_t{}) ||
		unsafe.Sizeof(wt.Linker{}) != 2*unsafe.Sizeof(uintptr(0)) || unsafe.Sizeof(wt.FuncType{}) != 3*unsafe.Sizeof(uintptr(0)) ||
		unsafe.Sizeof(wt.Module{}) != unsafe.Sizeof(uintptr(0)) || unsafe.Sizeof(wt.Instance{}) != unsafe.Sizeof(C.cb_instance_t{}) ||
		unsafe.Sizeof(wt.Config{}) != unsafe.Sizeof(uintptr(0)) {
		return nil, errors.New("wasmtime: wasmtime-go's Func/Memory/Linker/FuncType/Module/Instance/Config layout differs from the one this build expects")
	}
	if C.GoString(C.cb_budget_name()) != meter.BudgetExport {
		return nil, errors.New("wasmtime: the C glue's budget global name differs from the meter's")
	}
	if opts.EpochInterval <= 0 {
		opts.EpochInterval = time.Millisecond
	}
	e := &Engine{opts: opts, engines: map[engineKey]*wt.Engine{}, hostIndex: map[string]int{}, validator: validate.New()}
	e.hostFuncs = append(append(engine.HostFuncs(true), engine.GrowDeniedFunc()), meterFuncs()...)
	for i, hf := range e.hostFuncs {
		e.hostIndex[hf.Module+"."+hf.Name] = i
	}
	e.anchorGo, e.anchorNs = time.Now(), int64(C.cb_mono_ns())
	modules, err := engine.NewCompileCache(opts.CacheDir, "wasmtime", func(m *wt.Module) ([]byte, bool) {
		b, err := m.Serialize()
		return b, err == nil
	})
	if err != nil {
		return nil, err
	}
	e.modules = modules
	cores := opts.Cores
	if cores == 0 {
		cores = runtime.GOMAXPROCS(0)
	}
	ticker, err := newEpochTicker(opts.EpochInterval, max(cores, 0))
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

// Name implements engine.Engine.
func (e *Engine) Name() string { return "wasmtime" }

// Version implements engine.Engine.
func (e *Engine) Version() string { return Version }

// Supports implements engine.Engine: wasmtime meters fuel and bounds the
// stack, and on 64-bit hosts its default linear memories are static (a
// 4 GiB reservation, more than ABI v1's largest max_memory), so they never
// move.
func (e *Engine) Supports(f engine.Feature) bool {
	if f == engine.FeatureStableMemory {
		return unsafe.Sizeof(uintptr(0)) == 8
	}
	return true
}

func (e *Engine) engine(k engineKey) (*wt.Engine, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if eng, ok := e.engines[k]; ok {
		return eng, nil
	}
	cfg := wt.NewConfig()
	validate.ConfigureWasmtime(cfg)
	cfg.SetEpochInterruption(true)
	if k.maxStack > 0 {
		cfg.SetMaxWasmStack(int(k.maxStack))
	}
	cfg.SetCraneliftOptLevel(wt.OptLevelSpeed)
	if e.opts.SharedMemory {
		// wasmtime-go's Config is a single wasm_config_t pointer
		// (checked in New).
		C.cb_config_shared_memory(*(**C.wasm_config_t)(unsafe.Pointer(cfg)))
	}
	eng := wt.NewEngineWithConfig(cfg)
	if err := e.ticker.add(eng); err != nil {
		eng.Close()
		return nil, err
	}
	e.engines[k] = eng
	return eng, nil
}

// Compile implements engine.Engine. Compiled modules are cached in
// memory and, with a CacheDir, on disk, under a key of the original
// module's sha256, the rewrite's version, the engine version and every
// setting that changes compiled code: a hit skips the rewrite and the
// compile.
//
// A callback with a fuel budget runs the metered module (internal/sandbox/internal/meter),
// the one the wazero engine runs, so fuel means the same on both engines;
// wasmtime's own fuel counts differently (and charges nothing for bulk
// memory operations). Timeouts stay with epochs: the meter's refill import
// only accounts fuel here, once per wasmtimeSlice units.
func (e *Engine) Compile(_ context.Context, wasm []byte, cfg engine.ModuleConfig) (engine.Module, error) {
	ek := engineKey{maxStack: cfg.Limits.MaxStack}
	eng, err := e.engine(ek)
	if err != nil {
		return nil, err
	}
	metered := cfg.Limits.Fuel > 0
	key := engine.CacheKey(engine.ModuleSum(wasm, cfg), fmt.Sprintf("meter%d", meter.Version), "wasmtime"+Version,
		fmt.Sprintf("fuel%v", metered), fmt.Sprintf("stack%d", ek.maxStack), runtime.GOARCH)
	mod, err := e.modules.Get(key, func(path string) (*wt.Module, bool) {
		// Deserializing from the file lets wasmtime map it instead of
		// copying it.
		m, err := wt.NewModuleDeserializeFile(eng, path)
		return m, err == nil
	}, func() (*wt.Module, error) {
		// wasmtime's store limiter refuses memory.grow silently; the grow
		// hook tells the host when that refusal was the memory limit. A
		// module the rewriter cannot handle runs as is (MemoryLimit is
		// then inferred from the memory size).
		rewritten, err := meter.Instrument(wasm, MeterOptions(metered))
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
		return m, nil
	})
	if err != nil {
		return nil, err
	}
	linker := wt.NewLinker(eng)
	hfs := append(engine.HostFuncs(cfg.WASI), engine.GrowDeniedFunc())
	if metered {
		hfs = append(hfs, meterFuncs()...)
	}
	for _, hf := range hfs {
		if err := e.define(linker, hf); err != nil {
			linker.Close()
			return nil, err
		}
	}
	return &module{e: e, eng: eng, mod: mod, linker: linker, cfg: cfg, metered: metered}, nil
}

// meteredStack is the meter's stack limit on wasmtime, which bounds the
// stack itself (max_stack): high enough never to trip.
const meteredStack = 1 << 62

// MeterOptions are the rewrite's options for a module this engine
// compiles: the grow hook always, the budget (and the stack counter,
// set never to trip) when the callback has fuel.
func MeterOptions(fuel bool) meter.Options {
	return meter.Options{Meter: fuel, StackLimit: meteredStack, GrowHook: true}
}

// meterFuncs are the metered module's imports: the refill (fuel accounting
// only; epochs interrupt) and the stack overflow.
func meterFuncs() []engine.HostFunc {
	return []engine.HostFunc{engine.RefillFunc(), engine.OverflowFunc(meteredStack)}
}

// wasmtimeSlice is how many fuel units a metered guest runs between two
// refills (a crossing into Go each): 0.1-0.3 ms of plain compiled code.
// Fuel statistics after a timeout are at most this far short.
const wasmtimeSlice = 1 << 20

// Validate implements engine.Engine.
func (e *Engine) Validate(ctx context.Context, wasm []byte, sum [32]byte) error {
	return e.validator.Validate(ctx, wasm, sum)
}

// Close implements engine.Engine.
func (e *Engine) Close(ctx context.Context) error {
	_ = e.validator.Close(ctx)
	e.ticker.close()
	e.modules.Close((*wt.Module).Close)
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, eng := range e.engines {
		eng.Close()
		delete(e.engines, k)
	}
	return nil
}

func valType(v engine.ValType) *wt.ValType {
	switch v {
	case engine.I64:
		return wt.NewValType(wt.KindI64)
	case engine.F32:
		return wt.NewValType(wt.KindF32)
	case engine.F64:
		return wt.NewValType(wt.KindF64)
	}
	return wt.NewValType(wt.KindI32)
}

func funcType(hf engine.HostFunc) *wt.FuncType {
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

// define adds a host function to a linker as wasmtime's unchecked kind,
// implemented by callboxHost through the C trampoline (glue.c).
func (e *Engine) define(linker *wt.Linker, hf engine.HostFunc) error {
	idx, ok := e.hostIndex[hf.Module+"."+hf.Name]
	if !ok {
		return fmt.Errorf("wasmtime: host function %s.%s is not in the engine's table", hf.Module, hf.Name)
	}
	ty := funcType(hf)
	mod, name := C.CString(hf.Module), C.CString(hf.Name)
	defer C.free(unsafe.Pointer(mod))
	defer C.free(unsafe.Pointer(name))
	// wasmtime-go's Linker and FuncType start with their C pointers.
	cerr := C.cb_define_host(*(**C.wasmtime_linker_t)(unsafe.Pointer(linker)), mod, C.size_t(len(hf.Module)), name, C.size_t(len(hf.Name)),
		*(**C.wasm_functype_t)(unsafe.Pointer(ty)), C.uintptr_t(idx))
	runtime.KeepAlive(ty)
	runtime.KeepAlive(linker)
	if cerr != nil {
		msg := rawErrorMessage(cerr)
		C.cb_error_delete(cerr)
		return fmt.Errorf("wasmtime: define %s.%s: %s", hf.Module, hf.Name, msg)
	}
	return nil
}

// callboxHost runs a host function called by a guest, on the guest's
// thread: one C-to-Go crossing per call, with no lookup and no allocation
// (the trampoline passes the instance, pinned, from the thread's current
// guard; the stack is the instance's own, the memory a view of the
// guest's). It returns 1 to stop the guest (an abort was recorded, see
// GuestState.CallHost).
//
//export callboxHost
func callboxHost(ptr unsafe.Pointer, fn C.uintptr_t, args *C.cb_val_raw_t, n C.size_t, data *C.uint8_t, size C.size_t) C.int {
	inst := (*instance)(ptr)
	if int(fn) >= len(inst.m.e.hostFuncs) {
		return 1
	}
	hf := &inst.m.e.hostFuncs[fn]
	raw := unsafe.Slice(args, int(n))
	stack := inst.hostStack[:max(len(hf.Params), len(hf.Results))]
	for k, p := range hf.Params {
		v := uint64(raw[k].lo)
		if p == engine.I32 || p == engine.F32 {
			v = uint64(uint32(v))
		}
		stack[k] = v
	}
	var mem []byte
	if data != nil && size > 0 {
		mem = unsafe.Slice((*byte)(unsafe.Pointer(data)), int(size))
	}
	if inst.state.CallHost(hf, mem, stack) {
		return 1
	}
	for k, r := range hf.Results {
		v := stack[k]
		if r == engine.I32 || r == engine.F32 {
			v = uint64(uint32(v))
		}
		raw[k] = C.cb_val_raw_t{lo: C.uint64_t(v)}
	}
	return 0
}

type module struct {
	e       *Engine
	eng     *wt.Engine
	mod     *wt.Module
	linker  *wt.Linker
	cfg     engine.ModuleConfig
	metered bool // fuel is counted by the meter's budget global
}

// defaultWasmStack is wasmtime's max_wasm_stack when a callback sets no
// max_stack; nativeMargin is the native stack an entry needs beyond the
// guest's (wasmtime's own frames, host calls, signal handling).
const (
	defaultWasmStack = 512 << 10
	nativeMargin     = 1 << 20
)

// nativeStack is the native stack an entry into the module's guests may
// use: cb_call and cb_instantiate switch to a stack of the thread's own
// when the calling thread has less room (glue.c).
func (m *module) nativeStack() C.size_t { return C.size_t(nativeStackFor(m.cfg.Limits.MaxStack)) }

// nativeStackFor is the native stack a guest with wasm stack limit
// maxStack (0: the default) may use.
func nativeStackFor(maxStack uint64) uint64 {
	s := uint64(defaultWasmStack)
	if maxStack > 0 {
		s = maxStack
	}
	return s + nativeMargin
}

// CallerStack is the native stack a thread calling a guest with wasm
// stack limit maxStack must have: 0 where the engine switches to a stack
// of its own when the thread's is short (Linux on x86-64 or with glibc,
// glue.c), else what the guest may use.
func CallerStack(maxStack uint64) uint64 {
	if C.cb_stack_switches() != 0 {
		return 0
	}
	return nativeStackFor(maxStack)
}

// The stack switches a test may choose (cb_test_stack_switch).
const (
	switchAssembly = 0 // x86-64's
	switchContext  = 1 // makecontext/swapcontext: other glibc targets'
	switchNone     = 2 // musl off x86-64, other systems
)

// chooseStackSwitch makes the engine switch stacks with mode and returns
// the mode before; false where that choice is not offered. For tests.
func chooseStackSwitch(mode int) (int, bool) {
	r := int(C.cb_test_stack_switch(C.int(mode)))
	return r - 1, r != 0
}

// stackSwitches counts the entries that ran on a switched stack.
func stackSwitches() uint64 { return uint64(C.cb_stack_switch_count()) }

// stacksFreed counts the threads' own stacks unmapped as their threads
// ended.
func stacksFreed() uint64 { return uint64(C.cb_stacks_freed()) }

// Close releases the module's linker; the compiled module stays in the
// engine's cache until the engine closes.
func (m *module) Close(context.Context) error {
	m.linker.Close()
	return nil
}

// Instantiate implements engine.Module. The start function runs against
// deadline, like a call.
func (m *module) Instantiate(ctx context.Context, deadline time.Time) (engine.Instance, error) {
	inst := &instance{m: m, state: engine.NewGuestState(&m.cfg.Limits, m.cfg.Logger)}
	inst.SetDeadline(deadline)
	inst.store = wt.NewStoreWithData(m.eng, inst)
	lim := m.cfg.Limits
	memLimit := int64(-1)
	if lim.MaxMemory > 0 {
		memLimit = int64(lim.MaxMemory)
	}
	// Tables are bounded in the module itself (engine.Compile), as on
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
		inst.state.Fuel.Start(engine.LoadFuel, wasmtimeSlice, 0)
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
	state    *engine.GuestState
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
	results []engine.ValType
	service bool // an ABI service export: runs under engine.LoadFuel
}

// Export implements engine.Instance.
func (i *instance) Export(name string, params, results []engine.ValType) (engine.Function, error) {
	if len(params) > maxStack || len(results) > maxStack {
		return nil, fmt.Errorf("export %q: too many parameters", name)
	}
	ext := i.inst.GetExport(i.store, name)
	if ext == nil || ext.Func() == nil {
		return nil, engine.MissingExport(name)
	}
	f := ext.Func()
	ty := f.Type(i.store)
	got := engine.FuncType{Params: valTypes(ty.Params()), Results: valTypes(ty.Results())}
	if err := engine.CheckExport(name, got, engine.FuncType{Params: params, Results: results}); err != nil {
		return nil, err
	}
	// wasmtime-go's Func is a single wasmtime_func_t value.
	raw := *(*C.cb_wasmtime_func_t)(unsafe.Pointer(f))
	return &function{fn: raw, params: len(params), results: results, service: engine.IsServiceExport(name)}, nil
}

func valTypes(vs []*wt.ValType) []engine.ValType {
	out := make([]engine.ValType, len(vs))
	for i, v := range vs {
		switch v.Kind() {
		case wt.KindI32:
			out[i] = engine.I32
		case wt.KindI64:
			out[i] = engine.I64
		case wt.KindF32:
			out[i] = engine.F32
		case wt.KindF64:
			out[i] = engine.F64
		default:
			out[i] = engine.ValType(v.Kind())
		}
	}
	return out
}

// SetDeadline implements engine.Instance: the deadline is converted once
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
// export runs under engine.LoadFuel, not the callback's budget.
func (i *instance) begin(ctx context.Context, service bool) C.int32_t {
	i.callCtx = ctx
	i.state.Begin(ctx)
	if i.m.metered {
		i.fuelCounter = 0
		if i.budgetRaw != nil {
			fuel := i.m.cfg.Limits.Fuel
			if service {
				fuel = engine.LoadFuel
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
func (i *instance) end(err error, res *C.cb_call_result_t) *engine.Trap {
	if i.unwatch != nil {
		i.unwatch()
		i.unwatch = nil
	}
	i.state.End()
	ctx := i.callCtx
	i.callCtx = nil
	// The engine's own trap, read only when nothing before it in the
	// shared order decides.
	var trap *engine.Trap
	if i.guard.tripped == C.CB_TRIP_CPU {
		// Stopped at its CPU limit: that is the call's failure, whatever
		// else the interruption looks like.
		i.state.Fail(engine.CPULimitTrap(i.m.cfg.Limits.MaxCPU))
		i.guard.tripped = C.CB_TRIP_NONE
	}
	interrupted := i.guard.tripped != C.CB_TRIP_NONE
	failed := err != nil || res != nil && (res.trap != nil || res.error != nil || res.stack_room != 0)
	if failed && i.state.Abort == nil && !interrupted {
		switch {
		case res != nil && res.stack_room != 0:
			trap = engine.ThreadStackTrap(uint64(res.stack_room), uint64(i.m.nativeStack()), i.m.cfg.Limits.MaxStack)
		case res != nil && res.trap != nil:
			trap = classifyRawTrap(res.trap, &i.m.cfg.Limits)
		case res != nil && res.error != nil:
			trap = engine.EngineTrap(abi.OtherTrap, rawErrorMessage(res.error), nil, nil, &i.m.cfg.Limits)
		default:
			trap = classifyGoError(err, &i.m.cfg.Limits)
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
	var t *engine.Trap
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
	return t
}

// Call implements engine.Instance through wasmtime's unchecked call, which
// skips wasmtime-go's per-call type reflection, in one cgo crossing.
func (i *instance) Call(ctx context.Context, fn engine.Function, stack []uint64) error {
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
		if r == engine.I32 || r == engine.F32 {
			v = uint64(uint32(v))
		}
		stack[k] = v
	}
	return nil
}

// Memory implements engine.Instance: the view as of the last call, which
// is exact between calls (only the guest grows memory).
func (i *instance) Memory() []byte { return i.view }

// State implements engine.Instance.
func (i *instance) State() *engine.GuestState { return i.state }

// FuelConsumed implements engine.Instance.
func (i *instance) FuelConsumed() (uint64, bool) { return i.fuelUsed, i.fuelKnown }

// Close implements engine.Instance.
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

// MemoryFile implements engine.SharedMemory: the memfd behind the
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

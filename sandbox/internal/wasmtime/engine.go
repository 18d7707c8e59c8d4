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
	"sync"
	"time"
	"unsafe"

	wt "github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/core"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/meter"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/validate"
)

// Available reports whether this build includes the wasmtime engine (it
// needs cgo).
const Available = true

// engineKey selects a wasmtime engine: the stack limit is an engine-wide
// setting in wasmtime, so callbacks that differ in it compile with
// different engines. (Fuel is not wasmtime's: see Compile.)
type engineKey struct {
	maxStack uint64
	nanCanon bool // Cranelift's NaN canonicalization (deterministic mode)
}

// Engine is callbox's wasmtime engine.
type Engine struct {
	opts    Options
	mu      sync.Mutex
	engines map[engineKey]*wt.Engine
	ticker  *epochTicker
	// modules holds compiled modules, shared by callbacks (in memory, and
	// serialized on disk under CacheDir/wasmtime).
	modules *core.CompileCache[*wt.Module]
	// A Go time and the C guard's CLOCK_MONOTONIC reading taken together:
	// deadlines convert to the guard's clock by arithmetic alone (Go's
	// monotonic readings), with no clock read and no cgo crossing.
	anchorGo time.Time
	anchorNs int64
	// hostFuncs is every host function a module may import (the WASI
	// profile included: a linker defines the subset its module is
	// granted); the C trampoline names one by its index here.
	hostFuncs []core.HostFunc
	hostIndex map[string]int // "module.name" -> index in hostFuncs
	validator *validate.Validator
}

var _ sandbox.Engine = (*Engine)(nil)

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
	e.hostFuncs = append(append(append(core.HostFuncs(true), core.GrowDeniedFunc()), meterFuncs()...), core.ProfileFuncs()...)
	for i, hf := range e.hostFuncs {
		e.hostIndex[hf.Module+"."+hf.Name] = i
	}
	e.anchorGo, e.anchorNs = time.Now(), int64(C.cb_mono_ns())
	modules, err := core.NewCompileCache(opts.CacheDir, "wasmtime", func(m *wt.Module) ([]byte, bool) {
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

// Name implements core.Engine.
func (e *Engine) Name() string { return "wasmtime" }

// TickerThread is the operating system's id of the epoch ticker thread
// (0 where it has none). The ticker asks for SCHED_FIFO 1 itself, which a
// process without CAP_SYS_NICE or RLIMIT_RTPRIO is refused; a worker,
// which holds neither, names the thread to its host, which may.
func (e *Engine) TickerThread() int { return max(int(C.cb_ticker_tid(e.ticker.t)), 0) }

// Version implements core.Engine.
func (e *Engine) Version() string { return Version }

// Supports implements core.Engine: wasmtime meters fuel and bounds the
// stack, and on 64-bit hosts its default linear memories are static (a
// 4 GiB reservation, more than ABI v1's largest max_memory), so they never
// move.
func (e *Engine) Supports(f sandbox.Feature) bool {
	if f == sandbox.FeatureStableMemory {
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
	cfg.SetCraneliftNanCanonicalization(k.nanCanon)
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

// Compile implements core.Engine. Compiled modules are cached in
// memory and, with a CacheDir, on disk, under a key of the original
// module's sha256, the rewrite's version, the engine version and every
// setting that changes compiled code: a hit skips the rewrite and the
// compile.
//
// A callback with a fuel budget runs the metered module (sandbox/internal/meter),
// the one the wazero engine runs, so fuel means the same on both engines;
// wasmtime's own fuel counts differently (and charges nothing for bulk
// memory operations). Timeouts stay with epochs: the meter's refill import
// only accounts fuel here, once per wasmtimeSlice units.
func (e *Engine) Compile(_ context.Context, wasm []byte, cfg sandbox.ModuleConfig) (sandbox.Module, error) {
	ek := engineKey{maxStack: cfg.Limits.MaxStack, nanCanon: cfg.Deterministic}
	eng, err := e.engine(ek)
	if err != nil {
		return nil, err
	}
	// The guest profiler counts fuel through the meter, so a profiled
	// module is metered whatever its fuel.
	metered, profiled := cfg.Limits.Fuel > 0 || cfg.Profile != nil, cfg.Profile != nil
	original := wasm // the closure below replaces wasm with its rewrite
	key := core.CacheKey(sandbox.ModuleSum(wasm, cfg), fmt.Sprintf("meter%d", meter.Version), "wasmtime"+Version,
		fmt.Sprintf("fuel%v", metered), fmt.Sprintf("prof%v", profiled), fmt.Sprintf("stack%d", ek.maxStack), fmt.Sprintf("nan%v", ek.nanCanon), runtime.GOARCH)
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
		rewritten, err := meter.Instrument(wasm, meterOptions(metered, profiled))
		switch {
		case err != nil && profiled:
			return nil, fmt.Errorf("the guest profiler counts fuel by metering the module, and this one cannot be metered (%w)", err)
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
	hfs := append(core.HostFuncs(cfg.WASI), core.GrowDeniedFunc())
	if metered {
		hfs = append(hfs, meterFuncs()...)
	}
	if profiled {
		hfs = append(hfs, core.ProfileFuncs()...)
	}
	for _, hf := range hfs {
		if err := e.define(linker, hf); err != nil {
			linker.Close()
			return nil, err
		}
	}
	opts := meterOptions(metered, profiled)
	return &module{e: e, eng: eng, mod: mod, linker: linker, cfg: cfg, metered: metered, bt: core.NewBacktrace(original, &opts)}, nil
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

// meterOptions are MeterOptions with the guest profiler's reports where
// the module is profiled.
func meterOptions(fuel, profile bool) meter.Options {
	opts := MeterOptions(fuel)
	opts.Profile = profile
	return opts
}

// meterFuncs are the metered module's imports: the refill (fuel accounting
// only; epochs interrupt) and the stack overflow.
func meterFuncs() []core.HostFunc {
	return []core.HostFunc{core.RefillFunc(), core.OverflowFunc(meteredStack)}
}

// wasmtimeSlice is how many fuel units a metered guest runs between two
// refills (a crossing into Go each): 0.1-0.3 ms of plain compiled code.
// Fuel statistics after a timeout are at most this far short.
const wasmtimeSlice = 1 << 20

// Validate implements core.Engine.
func (e *Engine) Validate(ctx context.Context, wasm []byte, sum [32]byte) error {
	return e.validator.Validate(ctx, wasm, sum)
}

// Close implements core.Engine.
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

func funcType(hf core.HostFunc) *wt.FuncType {
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
// implemented by callboxHost through the C trampoline (guard.c).
func (e *Engine) define(linker *wt.Linker, hf core.HostFunc) error {
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
		if p == sandbox.I32 || p == sandbox.F32 {
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
		if r == sandbox.I32 || r == sandbox.F32 {
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
	cfg     sandbox.ModuleConfig
	metered bool // fuel is counted by the meter's budget global
	bt      *core.Backtrace
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
// when the calling thread has less room (stack.c).
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
// stack.c), else what the guest may use.
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

// Package wazero is callbox's default engine: github.com/tetratelabs/wazero,
// pure Go, no cgo.
//
// Timeouts, fuel and the stack limit are metered from inside the guest: at
// load time every module is instrumented (sandbox/internal/meter) with a
// budget counter checked at function entries and loop headers, which calls
// back into the host only when the budget runs out; the host then reads the
// clock, the caller's context and the fuel left, on the guest's own thread.
// This is far cheaper than wazero's WithCloseOnContextDone (a termination
// check that exits to Go at every loop iteration, plus a watchdog goroutine
// per call) and keeps working when guests occupy every Go thread. A module
// the instrumenter cannot rewrite is refused (use wasmtime for it).
//
// The memory limit is enforced by a per-instance allocator that refuses to
// grow past it and records the refusal, so MemoryLimit is classified
// precisely.
package wazero

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/cachefile"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/core"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/meter"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/validate"
)

// Version is the wazero release this engine is built against.
const Version = "v1.12.0"

// Options configure the engine.
type Options struct {
	// CacheDir, when set, keeps compiled code on disk under CacheDir/wazero.
	CacheDir string
	// CloseOnContextDone replaces metering with wazero's own
	// WithCloseOnContextDone interruption: no fuel, no stack limit, and
	// much slower loops. It exists so benchmarks can measure what metering
	// saves; do not use it to run untrusted guests.
	CloseOnContextDone bool
	// SharedMemory backs every instance's linear memory with a sealed
	// memfd (MAP_SHARED) instead of anonymous memory, so another process
	// handed the descriptor (core.SharedMemory) sees the guest's memory
	// itself: the process-isolation worker's zero-copy path. Linux only;
	// elsewhere, or when memfd_create fails, memory is anonymous and the
	// instance reports no file.
	SharedMemory bool
}

// Engine is one wazero runtime shared by every callback.
type Engine struct {
	cacheDir string // on-disk compilation cache, "" for none
	modCfg   wazero.ModuleConfig
	rt       wazero.Runtime
	metered  bool
	shared   bool // Options.SharedMemory
	cache    wazero.CompilationCache
	// rewrites holds metered modules (in memory, and on disk under
	// CacheDir/meter) keyed by the original module's sha256.
	rewrites  *core.CompileCache[[]byte]
	states    sync.Map // api.Module (guest instance) -> *instance
	validator *validate.Validator
}

var _ sandbox.Engine = (*Engine)(nil)

// New starts a wazero runtime with the callbox host modules instantiated.
func New(ctx context.Context, opts Options) (*Engine, error) {
	var cache wazero.CompilationCache
	var cacheDir string
	if opts.CacheDir != "" {
		// wazero reads its entries itself: the directory is checked
		// (cachefile.Trust) before wazero opens it and again after it
		// made its versioned directory inside, entries included.
		dir, err := cachefile.Prepare(opts.CacheDir, "wazero")
		if err != nil {
			return nil, err
		}
		cacheDir = dir
		c, err := wazero.NewCompilationCacheWithDir(cacheDir)
		if err != nil {
			return nil, fmt.Errorf("wazero compilation cache: %w", err)
		}
		if err := cachefile.Trust(opts.CacheDir, cacheDir); err != nil {
			_ = c.Close(ctx)
			return nil, err
		}
		cache = c
	} else {
		cache = wazero.NewCompilationCache()
	}
	cfg := wazero.NewRuntimeConfig().
		WithCompilationCache(cache).
		WithCoreFeatures(validate.WazeroFeatures)
	e := &Engine{
		// Instances are anonymous, run no _start, and get crypto/rand
		// for wazero's own system context: without it wazero builds a
		// math/rand source per instance (5 KB and ~15 µs). Guests never
		// reach it; WASI is ours (sandbox/internal/core/hostfuncs.go).
		modCfg:    wazero.NewModuleConfig().WithName("").WithStartFunctions().WithRandSource(rand.Reader),
		cacheDir:  cacheDir,
		rt:        wazero.NewRuntimeWithConfig(ctx, cfg.WithCloseOnContextDone(opts.CloseOnContextDone)),
		metered:   !opts.CloseOnContextDone,
		shared:    opts.SharedMemory,
		cache:     cache,
		validator: validate.New(),
	}
	rewrites, err := core.NewCompileCache(opts.CacheDir, "meter", func(b []byte) ([]byte, bool) { return b, true })
	if err != nil {
		return nil, err
	}
	e.rewrites = rewrites
	if err := e.instantiateHosts(ctx, e.rt); err != nil {
		_ = e.Close(ctx)
		return nil, err
	}
	if !e.metered {
		return e, nil
	}
	if _, err := e.rt.NewHostModuleBuilder(meter.RefillModule).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(e.refill), []api.ValueType{api.ValueTypeI64}, []api.ValueType{api.ValueTypeI64}).
		Export(meter.RefillName).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(e.overflow), nil, nil).
		Export(meter.OverflowName).
		NewFunctionBuilder().
		WithGoModuleFunction(e.adapt(core.GrowDeniedFunc()), []api.ValueType{api.ValueTypeI32}, nil).
		Export(meter.GrowDeniedName).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(e.profileEnter), []api.ValueType{api.ValueTypeI32, api.ValueTypeI64}, nil).
		Export(meter.ProfileEnterName).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(e.profileExit), []api.ValueType{api.ValueTypeI64}, nil).
		Export(meter.ProfileExitName).
		Instantiate(ctx); err != nil {
		_ = e.Close(ctx)
		return nil, fmt.Errorf("host module %s: %w", meter.RefillModule, err)
	}
	return e, nil
}

// instantiateHosts registers every host function, WASI included. Whether a
// module may import WASI is decided before it is compiled: the host refuses
// at load any module importing what its config does not grant.
func (e *Engine) instantiateHosts(ctx context.Context, rt wazero.Runtime) error {
	builders := map[string]wazero.HostModuleBuilder{}
	for _, hf := range core.HostFuncs(true) {
		b, ok := builders[hf.Module]
		if !ok {
			b = rt.NewHostModuleBuilder(hf.Module)
			builders[hf.Module] = b
		}
		b.NewFunctionBuilder().
			WithGoModuleFunction(e.adapt(hf), valueTypes(hf.Params), valueTypes(hf.Results)).
			Export(hf.Name)
	}
	for name, b := range builders {
		if _, err := b.Instantiate(ctx); err != nil {
			return fmt.Errorf("host module %s: %w", name, err)
		}
	}
	return nil
}

// abortSignal unwinds a guest from inside a host function after the host
// recorded why in GuestState.Abort.
type abortSignal struct{}

func (abortSignal) Error() string { return "callbox: call aborted by the host" }

// adapt wraps an engine-neutral host function for wazero
// (GuestState.CallHost); an abort stops the guest by panicking through
// wazero. The memory is the calling module's own, so host functions see it
// during the start function too, as on wasmtime.
func (e *Engine) adapt(hf core.HostFunc) api.GoModuleFunction {
	return api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
		inst := e.instanceOf(ctx, mod)
		if inst == nil {
			panic(abortSignal{}) // an instance we do not know: refuse to serve it
		}
		g := inst.state
		if inst.metered() && g.Counter == nil {
			// The start function's imports run before Instantiate
			// returns: reach the counter through the calling module.
			if b, ok := mod.ExportedGlobal(meter.BudgetExport).(api.MutableGlobal); ok {
				g.Counter = counter{b}
			}
		}
		var mem []byte
		if m := mod.Memory(); m != nil {
			mem, _ = m.Read(0, m.Size())
		}
		if g.CallHost(&hf, mem, stack) {
			panic(abortSignal{})
		}
	})
}

// instanceKey carries the instance being instantiated to host functions
// called by its start function, before the module is known.
type instanceKey struct{}

func (e *Engine) instanceOf(ctx context.Context, mod api.Module) *instance {
	if v, ok := e.states.Load(mod); ok {
		return v.(*instance)
	}
	inst, _ := ctx.Value(instanceKey{}).(*instance)
	return inst
}

func valueTypes(vs []sandbox.ValType) []api.ValueType {
	out := make([]api.ValueType, len(vs))
	for i, v := range vs {
		out[i] = api.ValueType(v)
	}
	return out
}

// Name implements core.Engine.
func (e *Engine) Name() string { return "wazero" }

// Version implements core.Engine.
func (e *Engine) Version() string { return Version }

// Supports implements core.Engine: fuel and the stack limit are both
// enforced by metering (see package meter); memory is stable where our
// allocator reserves it with mmap (every unix).
func (e *Engine) Supports(f sandbox.Feature) bool {
	if f == sandbox.FeatureStableMemory {
		return stableMemory
	}
	return e.metered
}

// MaxFunctionBlocks is the most blocks (block, loop, if, try, try_table)
// one function may have on this core. wazero's compile time grows with
// their square: 120 KB of functions at the limit compile in about 6-8 µs a
// byte (0.7-1 s), where 512-block functions take 0.9 µs a byte and
// wasmtime 0.4 µs whatever the shape (BenchmarkCompileBlocks in
// sandbox/internal/core); a single function of 60,000 took 14 s. Real compilers'
// largest functions have a few hundred (Go's, whose resume points nest one
// block each, 390 in the example guests; Rust's 340).
const MaxFunctionBlocks = 4096

// DefaultMaxStack is the stack limit of metered modules when the callback
// sets none: wasm frames are estimated at 8 bytes per parameter and local
// plus meter.FrameOverhead. wazero's own ceiling is 400 MB per instance.
const DefaultMaxStack = 1 << 20

// Compile implements core.Engine. Every module is metered; one the
// rewriter cannot handle is refused, since on wazero nothing else could
// stop it cheaply or bound its stack (wazero's own ceiling is 400 MB).
func (e *Engine) Compile(ctx context.Context, wasm []byte, cfg sandbox.ModuleConfig) (sandbox.Module, error) {
	m := &module{e: e, cfg: cfg, stackLimit: DefaultMaxStack, metered: e.metered}
	if cfg.Limits.MaxStack > 0 {
		m.stackLimit = int64(cfg.Limits.MaxStack)
	}
	if cfg.Profile != nil && !e.metered {
		return nil, errors.New("the guest profiler counts fuel through the meter, which this engine was built without")
	}
	switch {
	case e.metered:
		opts := meterOptions(m.stackLimit, cfg)
		m.bt = core.NewBacktrace(wasm, &opts)
	case cfg.Deterministic:
		opts := meter.Options{CanonicalNaN: true}
		m.bt = core.NewBacktrace(wasm, &opts)
	default:
		m.bt = core.NewBacktrace(wasm, nil)
	}
	if e.metered {
		metered, err := e.meter(wasm, cfg, meterOptions(m.stackLimit, cfg))
		if errors.Is(err, meter.ErrTooManyBlocks) {
			return nil, fmt.Errorf("%w: the wazero engine compiles a function in time that grows with the square of its blocks; use engine: wasmtime", err)
		}
		if err != nil {
			return nil, fmt.Errorf("the wazero engine meters every module, and this one cannot be metered (%w); use engine: wasmtime", err)
		}
		wasm = metered
	} else if cfg.Limits.Fuel != 0 || cfg.Limits.MaxStack != 0 || cfg.Limits.MaxCPU != 0 {
		return nil, errors.New("fuel, max_stack and max_cpu need metering, which this engine was built without")
	} else {
		if cfg.Deterministic { // canonical NaNs need the rewrite, metered or not
			canon, err := meter.Instrument(wasm, meter.Options{CanonicalNaN: true})
			if err != nil {
				return nil, fmt.Errorf("deterministic: true canonicalizes NaNs by rewriting the module, and this one cannot be rewritten (%w); use engine: wasmtime", err)
			}
			wasm = canon
		}
		wasm = withLineAnchors(wasm)
	}
	if cfg.Limits.MaxCPU != 0 && !core.ThreadCPUAvailable {
		return nil, errors.New("max_cpu needs a thread CPU clock, which this platform lacks")
	}
	cm, err := e.compile(ctx, wasm)
	if err != nil && e.cacheDir != "" && strings.Contains(err.Error(), "compilationcache:") {
		// wazero checks its cache entries (magic, version, checksum) but
		// fails the compile on a bad one instead of recompiling. Drop the
		// on-disk entries and compile again: a cache is never trusted over
		// the module.
		e.purgeCache()
		cm, err = e.compile(ctx, wasm)
	}
	if err != nil {
		return nil, fmt.Errorf("wazero: %w", err)
	}
	m.cm = cm
	return m, nil
}

// compile runs wazero's compile. Its validator has panicked on malformed
// modules it did not check before using (a function type index out of
// range: wasmbin.Parse refuses those before any engine sees them); a panic
// is a failed compile here, never the host's end.
func (e *Engine) compile(ctx context.Context, wasm []byte) (cm wazero.CompiledModule, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("wazero's compile panicked: %v", r)
		}
	}()
	return e.rt.CompileModule(ctx, wasm)
}

// meter returns the metered rewrite of a module, cached (in memory and,
// with a CacheDir, on disk) under the original module's sha256 and the
// rewrite's version and options, so loading a module again skips the
// rewrite.
func (e *Engine) meter(wasm []byte, cfg sandbox.ModuleConfig, opts meter.Options) ([]byte, error) {
	key := core.CacheKey(sandbox.ModuleSum(wasm, cfg), fmt.Sprintf("meter%d", meter.Version), fmt.Sprintf("stack%d", opts.StackLimit),
		fmt.Sprintf("nan%v", opts.CanonicalNaN), fmt.Sprintf("prof%v", opts.Profile), "anchors1")
	return e.rewrites.Get(key, readFile, func() ([]byte, error) {
		out, err := meter.Instrument(wasm, opts)
		if err != nil {
			return nil, err
		}
		return withLineAnchors(out), nil
	})
}

// MeterOptions are the meter's options for a module this engine compiles
// under stackLimit (the callback's max_stack, or DefaultMaxStack): the
// budget, the stack counter and the grow hook, with the block limit; and,
// for a deterministic callback, canonical NaNs.
func MeterOptions(stackLimit int64, deterministic bool) meter.Options {
	return meter.Options{Meter: true, StackLimit: stackLimit, GrowHook: true, MaxBlocks: MaxFunctionBlocks, CanonicalNaN: deterministic}
}

// meterOptions are MeterOptions for a module's config, with the guest
// profiler's reports where it asks for them.
func meterOptions(stackLimit int64, cfg sandbox.ModuleConfig) meter.Options {
	opts := MeterOptions(stackLimit, cfg.Deterministic)
	opts.Profile = cfg.Profile != nil
	return opts
}

func readFile(path string) ([]byte, bool) {
	b, err := os.ReadFile(path)
	return b, err == nil
}

// purgeCache removes wazero's on-disk cache entries (files under the
// engine's own directory; wazero keeps the directories).
func (e *Engine) purgeCache() {
	_ = filepath.WalkDir(e.cacheDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			_ = os.Remove(p)
		}
		return nil
	})
}

// Validate implements core.Engine.
func (e *Engine) Validate(ctx context.Context, wasm []byte, sum [32]byte) error {
	return e.validator.Validate(ctx, wasm, sum)
}

// Close implements core.Engine.
func (e *Engine) Close(ctx context.Context) error {
	e.rewrites.Close(nil)
	return errors.Join(e.rt.Close(ctx), e.cache.Close(ctx), e.validator.Close(ctx))
}

type module struct {
	e          *Engine
	cm         wazero.CompiledModule
	cfg        sandbox.ModuleConfig
	metered    bool
	stackLimit int64
	bt         *core.Backtrace
}

func (m *module) Close(ctx context.Context) error { return m.cm.Close(ctx) }

// Instantiate implements core.Module. The start function runs against
// deadline.
func (m *module) Instantiate(ctx context.Context, deadline time.Time) (sandbox.Instance, error) {
	inst := &instance{m: m, state: core.NewGuestState(&m.cfg.Limits, m.cfg.Logger)}
	if m.cfg.Profile != nil {
		inst.state.Profile = core.NewProfileRecorder(m.cfg.Profile)
	}
	inst.SetDeadline(deadline)
	alloc := &allocator{limit: m.cfg.Limits.MaxMemory, state: inst.state, shared: m.e.shared}
	inst.alloc = alloc
	ictx := experimental.WithMemoryAllocator(ctx, alloc)
	cancel := func() {}
	if !deadline.IsZero() && !m.metered {
		ictx, cancel = context.WithDeadline(ictx, deadline)
	}
	defer cancel()
	ictx = context.WithValue(ictx, instanceKey{}, inst)
	inst.begin(ctx, true)
	mod, err := m.instantiate(ictx)
	inst.end()
	if err != nil {
		t := inst.classify(ctx, err)
		return nil, fmt.Errorf("instantiate: %w", t)
	}
	inst.mod = mod
	inst.mem = mod.Memory()
	if m.metered {
		budget, ok1 := mod.ExportedGlobal(meter.BudgetExport).(api.MutableGlobal)
		stack, ok2 := mod.ExportedGlobal(meter.StackExport).(api.MutableGlobal)
		if !ok1 || !ok2 {
			_ = mod.Close(ctx)
			return nil, errors.New("instantiate: metered module lacks its meter globals")
		}
		inst.budget, inst.stack = budget, stack
		inst.state.Counter = counter{budget}
	}
	m.e.states.Store(mod, inst)
	return inst, nil
}

// instantiate runs wazero's instantiation. wazero panics instead of failing
// when the memory allocator refuses a module's initial memory (its minimum
// above the limit: the host's load check refuses such modules, but the
// engine does not rely on it); the panic is a failure here.
func (m *module) instantiate(ctx context.Context) (mod api.Module, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("wazero instantiation panicked: %v (at %s)", r, core.PanicSite())
		}
	}()
	return m.e.rt.InstantiateModule(ctx, m.cm, m.e.modCfg)
}

// yieldEvery is how long a metered guest runs before its refill yields the
// thread to other goroutines.
const yieldEvery = time.Millisecond

// meterSlice is how many instructions a guest runs between two host checks
// of its deadline and context: about 10-50µs of compiled code.
const meterSlice = 20_000

// counter is the metered guest's budget global.
type counter struct{ g api.MutableGlobal }

func (c counter) Get() int64  { return int64(c.g.Get()) }
func (c counter) Set(v int64) { c.g.Set(uint64(v)) }

func (i *instance) metered() bool { return i.m.metered }

// SetDeadline implements core.Instance. The meter's refill checks it.
func (i *instance) SetDeadline(deadline time.Time) {
	i.deadline = deadline
	i.state.SetDeadline(deadline)
}

// begin arms one call (or the instantiation, or a service export): its
// fuel. A service call runs under core.LoadFuel, not the callback's
// budget. The deadline is the one last set.
func (i *instance) begin(ctx context.Context, service bool) {
	i.state.Begin(ctx)
	i.callCtx = ctx
	i.interrupted = false
	i.lastYield = time.Time{} // set at the first refill: no clock read per call
	fuel := i.m.cfg.Limits.Fuel
	if service && fuel > 0 {
		fuel = core.LoadFuel
	}
	if i.budget != nil {
		i.budget.Set(uint64(i.state.Fuel.Begin(fuel, meterSlice)))
		i.stack.Set(uint64(-i.m.stackLimit))
	} else {
		// Instantiation: the counter starts at its initial value, 0.
		i.state.Fuel.Start(fuel, meterSlice, 0)
	}
}

// end disarms the call and records the fuel it used.
func (i *instance) end() {
	i.state.End()
	i.callCtx = nil
	if i.budget != nil {
		i.fuelUsed = i.state.Fuel.Used(int64(i.budget.Get()))
		i.state.ProfileEnd(i.fuelUsed)
	} else {
		i.state.ProfileEnd(0) // instantiation: its reports counted its fuel
	}
}

// profileEnter and profileExit are the guest profiler's imports
// (core.ProfileFuncs), called on every guest function call of a profiled
// module: direct, without adapt's general path (memory view, panic
// containment: they touch neither guest memory nor anything that panics).
func (e *Engine) profileEnter(ctx context.Context, mod api.Module, stack []uint64) {
	if inst := e.instanceOf(ctx, mod); inst != nil {
		inst.state.ProfileEnter(uint32(stack[0]), int64(stack[1]))
	}
}

func (e *Engine) profileExit(ctx context.Context, mod api.Module, stack []uint64) {
	if inst := e.instanceOf(ctx, mod); inst != nil {
		inst.state.ProfileExit(int64(stack[0]))
	}
}

// refill is the metered module's import: the guest's budget (now negative)
// ran out. It stops the guest if its deadline passed, its context is done
// or its fuel is spent, and otherwise grants another slice, carrying the
// overdraft so fuel accounting stays exact.
func (e *Engine) refill(ctx context.Context, mod api.Module, stack []uint64) {
	inst := e.instanceOf(ctx, mod)
	if inst == nil || inst.callCtx == nil {
		panic(abortSignal{})
	}
	budget := int64(stack[0])
	now := time.Now()
	if inst.callCtx.Err() != nil || !inst.deadline.IsZero() && !now.Before(inst.deadline) {
		inst.interrupted = true
		panic(abortSignal{})
	}
	// Compiled wasm cannot be preempted by the Go scheduler, so a guest
	// would otherwise keep its thread for a full scheduler slice (~10 ms)
	// while other goroutines — another guest past its deadline among them
	// — wait. Yield every yieldEvery of guest time instead.
	switch {
	case inst.lastYield.IsZero():
		inst.lastYield = now
	case now.Sub(inst.lastYield) >= yieldEvery:
		inst.lastYield = now
		runtime.Gosched()
	}
	if inst.cpuOn && now.Sub(inst.cpuChecked) >= cpuCheckEvery {
		inst.cpuChecked = now
		if limit := inst.m.cfg.Limits.MaxCPU; core.ThreadCPU()-inst.cpuStart >= int64(limit) {
			inst.state.Fail(core.CPULimitTrap(limit))
			panic(abortSignal{})
		}
	}
	next, t := inst.state.Fuel.Refill(budget)
	if t != nil {
		inst.state.Fail(t)
		panic(abortSignal{})
	}
	stack[0] = uint64(next)
}

// overflow is the metered module's import for a call stack past the limit.
func (e *Engine) overflow(ctx context.Context, mod api.Module, _ []uint64) {
	if inst := e.instanceOf(ctx, mod); inst != nil {
		// Worded as on wasmtime: the limit is named when the callback
		// set one.
		inst.state.Fail(core.StackOverflowTrap(inst.m.cfg.Limits.MaxStack))
	}
	panic(abortSignal{})
}

type instance struct {
	m     *module
	alloc *allocator
	mod   api.Module
	mem   api.Memory
	state *core.GuestState

	// Metering: the budget global, and per call the context, deadline
	// and fuel used (state.Fuel accounts it).
	budget   api.MutableGlobal
	stack    api.MutableGlobal
	callCtx  context.Context
	deadline time.Time
	// interrupted: the refill stopped the guest at its deadline or
	// context.
	interrupted bool
	fuelUsed    uint64
	lastYield   time.Time
	// max_cpu: the call's thread CPU clock at its start (the goroutine is
	// locked to its thread for the call), and when the refill last read it.
	cpuOn      bool
	cpuStart   int64
	cpuChecked time.Time
}

// cpuCheckEvery is how often, in guest wall time, the refill reads the
// thread CPU clock of a call with max_cpu (a system call of a few hundred
// ns; refills come every ~10-50 µs): a runaway is stopped within about
// this much CPU time past its limit.
const cpuCheckEvery = time.Millisecond

// Export implements core.Instance.
func (i *instance) Export(name string, params, results []sandbox.ValType) (sandbox.Function, error) {
	fn := i.mod.ExportedFunction(name)
	if fn == nil {
		return nil, sandbox.MissingExport(name)
	}
	def := fn.Definition()
	got := sandbox.FuncType{Params: valTypes(def.ParamTypes()), Results: valTypes(def.ResultTypes())}
	if err := sandbox.CheckExport(name, got, sandbox.FuncType{Params: params, Results: results}); err != nil {
		return nil, err
	}
	if core.IsServiceExport(name) {
		return serviceFunc{fn}, nil
	}
	return fn, nil
}

// serviceFunc is an ABI service export, run under core.LoadFuel.
type serviceFunc struct{ api.Function }

// valTypes views wazero's value types as the engine layer's: both are the
// binary type codes in a byte, so the view costs no allocation (Export
// runs for every new instance).
func valTypes(vs []api.ValueType) []sandbox.ValType {
	return unsafe.Slice((*sandbox.ValType)(unsafe.SliceData(vs)), len(vs))
}

// Call implements core.Instance.
func (i *instance) Call(ctx context.Context, fn sandbox.Function, stack []uint64) error {
	var f api.Function
	sf, service := fn.(serviceFunc) // before api.Function, which it embeds
	if service {
		f = sf.Function
	} else {
		f = fn.(api.Function)
	}
	cctx, cancel := ctx, context.CancelFunc(nil)
	if !i.deadline.IsZero() && !i.m.metered {
		cctx, cancel = context.WithDeadline(ctx, i.deadline)
	}
	var err error
	if !service && i.m.metered && i.m.cfg.Limits.MaxCPU > 0 {
		err = i.callCPU(ctx, cctx, f, stack)
	} else {
		i.begin(ctx, service)
		err = f.CallWithStack(cctx, stack)
		i.end()
	}
	if cancel != nil {
		cancel()
	}
	if err == nil && i.state.Abort == nil {
		return nil
	}
	return i.classify(ctx, err)
}

// callCPU is a guest call under max_cpu: the goroutine stays on its
// thread for the call (refills' Gosched included), so that the thread's
// CPU clock, which the refill reads, measures this call alone.
func (i *instance) callCPU(ctx, cctx context.Context, f api.Function, stack []uint64) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	i.cpuOn, i.cpuStart, i.cpuChecked = true, core.ThreadCPU(), time.Time{}
	defer func() { i.cpuOn = false }()
	i.begin(ctx, false)
	err := f.CallWithStack(cctx, stack)
	i.end()
	return err
}

// classify maps the end of a failed guest entry to a Trap, in the shared
// order (GuestState.Classify); only the reading of wazero's own errors is
// here.
func (i *instance) classify(ctx context.Context, err error) *sandbox.Trap {
	interrupted := i.interrupted
	i.interrupted = false
	var trap *sandbox.Trap
	var exit *sys.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && (exit.ExitCode() == sys.ExitCodeDeadlineExceeded || exit.ExitCode() == sys.ExitCodeContextCanceled):
		interrupted = true
	case errors.As(err, &exit):
		trap = &sandbox.Trap{Class: abi.GuestError, Message: fmt.Sprintf("guest exited with code %d", exit.ExitCode()), Cause: err}
	default:
		trap = classifyMessage(err, &i.m.cfg.Limits)
		trap.Frames = i.m.bt.Frames(parseFrames(err.Error()))
	}
	size := i.alloc.size
	if i.mem != nil {
		size = uint64(i.mem.Size())
	}
	t := i.state.Classify(ctx, interrupted, trap, size)
	if t == nil { // cannot happen: a failed entry always classifies
		t = core.EngineTrap(abi.OtherTrap, fmt.Sprint(err), nil, err, &i.m.cfg.Limits)
	}
	return t
}

// wasmErrors maps wazero's runtime error texts (wasmruntime.Err*) onto the
// taxonomy. They are matched by text because the package is internal.
var wasmErrors = []struct {
	text string
	kind abi.Kind
}{
	{"stack overflow", abi.StackOverflow},
	{"invalid conversion to integer", abi.InvalidConversion},
	{"integer overflow", abi.IntegerOverflow},
	{"integer divide by zero", abi.DivideByZero},
	{"unreachable", abi.Unreachable},
	{"out of bounds memory access", abi.MemoryOutOfBounds},
	{"invalid table access", abi.TableOutOfBounds},
	{"indirect call type mismatch", abi.IndirectCallMismatch},
	{"null reference", abi.IndirectCallMismatch},
}

func classifyMessage(err error, lim *config.Limits) *sandbox.Trap {
	head, _, _ := strings.Cut(err.Error(), "\n")
	text := head
	// A failed start function is wrapped: "start function[0] failed: wasm
	// error: unreachable"; instantiation prefixes a segment: "data[0]: out
	// of bounds memory access".
	if i := strings.LastIndex(text, "wasm error: "); i >= 0 {
		text = text[i+len("wasm error: "):]
	}
	for _, w := range wasmErrors {
		if text == w.text || strings.HasSuffix(text, "]: "+w.text) {
			return core.EngineTrap(w.kind, text, nil, err, lim)
		}
	}
	if strings.Contains(head, "(recovered by wazero)") {
		return &sandbox.Trap{Class: abi.HostPanic, Message: head, Cause: err}
	}
	return core.EngineTrap(abi.OtherTrap, text, nil, err, lim)
}

// parseFrames reads the "wasm stack trace:" block wazero appends to
// errors: a line per frame ("mod.f(i32) i32", "mod.$12(...)"), each
// guest frame followed by its line anchor ("0x2a: callbox-anchor:1",
// withLineAnchors), whose offset is the instruction's in the code wazero
// ran. A frame without one is an imported (host) function's.
func parseFrames(msg string) []core.RawFrame {
	_, trace, ok := strings.Cut(msg, "wasm stack trace:\n")
	if !ok {
		return nil
	}
	var frames []core.RawFrame
	for _, line := range strings.Split(trace, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
			return frames
		case strings.HasPrefix(line, "0x"):
			hex, _, _ := strings.Cut(line[2:], ":")
			off, err := strconv.ParseUint(hex, 16, 64)
			if err == nil && len(frames) > 0 && !frames[len(frames)-1].OffsetKnown {
				f := &frames[len(frames)-1]
				f.CodeOffset, f.OffsetKnown, f.Import = off, true, false
			}
		case strings.HasPrefix(line, "..."): // wazero's "maybe followed by omitted frames"
		default:
			if len(frames) == core.MaxFrames {
				return frames
			}
			name, _, _ := strings.Cut(line, "(")
			frames = append(frames, core.RawFrame{Name: name, Import: true})
		}
	}
	return frames
}

// Memory implements core.Instance.
func (i *instance) Memory() []byte {
	if i.mem == nil {
		return nil
	}
	b, _ := i.mem.Read(0, i.mem.Size())
	return b
}

// State implements core.Instance.
func (i *instance) LastCall() sandbox.CallReport { return i.state.Report() }

// GuestState is the whole import state (core.Stateful), for the
// process-isolation worker.
func (i *instance) GuestState() *core.GuestState { return i.state }

// MemoryStable implements core.StableMemory: the memory never moves
// when its reservation is mapped (a module without memory has none to
// move).
func (i *instance) MemoryStable() bool { return i.mem == nil || i.alloc.mem.stable() }

// MemoryFile implements core.SharedMemory: the memfd behind the
// instance's memory and the bytes it reserves, or -1 when the memory is
// not a shared file (Options.SharedMemory unset, or unavailable).
func (i *instance) MemoryFile() (fd int, reserved uint64) {
	if i.alloc == nil {
		return -1, 0
	}
	return i.alloc.mem.file()
}

// FuelConsumed implements core.Instance: metered modules count fuel in
// instrumented instructions (see package meter).
func (i *instance) FuelConsumed() (uint64, bool) { return i.fuelUsed, i.m.metered }

// Close implements core.Instance.
func (i *instance) Close(ctx context.Context) error {
	i.m.e.states.Delete(i.mod)
	return i.mod.Close(ctx)
}

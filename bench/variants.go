package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	extism "github.com/extism/go-sdk"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

// Variant is one column group of the table: a way of running a workload.
type Variant struct {
	ID     string // go test sub-benchmark name, e.g. "callbox-wazero:zero-copy"
	Name   string // as the report prints it
	Group  string // GroupFloor, GroupRaw, GroupExtism or GroupCallbox
	Engine string // wazero or wasmtime; "" for the floor
	// Mode, for callbox variants: ModeDefault (pooled, timeout, copying
	// API), ModeNoTimeout, ModeFresh, ModeZeroCopy, ModeCalls (the chain
	// workload as separate Invoke calls: the sum of the chain's calls) or
	// ModeChainInvoke (the chain made with the synchronous Chain.Invoke).
	Mode string
	// SIMD, for callbox variants: the simd128 build of the kernels
	// (guests/bench/kernels_simd.c), which has scale and matmul only.
	SIMD bool

	// only restricts the variant to the chain workload (ModeCalls,
	// ModeChainInvoke).
	chainOnly bool
	setup     func(ctx context.Context, env *Env, v Variant, d *data) (*runner, error)
}

// Variant groups.
const (
	GroupFloor   = "floor"
	GroupRaw     = "raw"
	GroupExtism  = "extism"
	GroupCallbox = "callbox"
)

// callbox variant modes.
const (
	ModeDefault   = "default"
	ModeNoTimeout = "no-timeout"
	ModeFresh     = "fresh"
	ModeZeroCopy  = "zero-copy"
	ModeCalls     = "calls"
	// ModeChainInvoke runs the chain with Chain.Invoke, which waits for
	// each call (as XLA runs ordered effects, one after another on its own
	// thread): on an idle chain the call runs on the caller's goroutine.
	ModeChainInvoke = "chain-invoke"
	// ModeMetered, for the raw wazero variant: the module as callbox's
	// wazero engine rewrites it (sandbox/internal/wazero), called by hand.
	ModeMetered = "metered"
)

// BenchTimeout is the timeout of the callbox variants that set one: long
// enough never to fire.
const BenchTimeout = 10 * time.Second

// Supports reports whether the variant runs the workload.
func (v Variant) Supports(w Workload) bool {
	return (!v.chainOnly || w.Chain()) && (!v.SIMD || simdSupports(w))
}

// runner is a case ready to run: op is one operation (one call, or a whole
// chain), output the last operation's result.
type runner struct {
	op     func() error
	output func() []float32
	close  func()
}

// Variants lists the suite's variants, in report order, for the engines
// this build has.
func Variants() []Variant {
	vs := []Variant{
		{ID: "go-copy", Name: "Go copy of the bytes (floor)", Group: GroupFloor, setup: copySetup},
		{ID: "go-native", Name: "Go native kernel (floor)", Group: GroupFloor, setup: nativeSetup},
		{ID: "raw-wazero", Name: "wazero, hand-written", Group: GroupRaw, Engine: config.EngineWazero, setup: rawSetup},
		{ID: "raw-wazero-metered", Name: "wazero, hand-written, metered module", Group: GroupRaw, Engine: config.EngineWazero, Mode: ModeMetered, setup: rawSetup},
	}
	if engines.WasmtimeAvailable() {
		vs = append(vs, Variant{ID: "raw-wasmtime", Name: "wasmtime, hand-written", Group: GroupRaw, Engine: config.EngineWasmtime, setup: rawSetup})
	}
	vs = append(vs, Variant{ID: "extism", Name: "Extism (wazero)", Group: GroupExtism, Engine: config.EngineWazero, setup: extismSetup})
	for _, e := range Engines() {
		vs = append(vs,
			Variant{ID: "callbox-" + e, Name: "callbox " + e + ": pooled, timeout, copy", Group: GroupCallbox, Engine: e, Mode: ModeDefault},
			Variant{ID: "callbox-" + e + ":no-timeout", Name: "callbox " + e + ": no timeout", Group: GroupCallbox, Engine: e, Mode: ModeNoTimeout},
			Variant{ID: "callbox-" + e + ":fresh", Name: "callbox " + e + ": fresh instance", Group: GroupCallbox, Engine: e, Mode: ModeFresh},
			Variant{ID: "callbox-" + e + ":zero-copy", Name: "callbox " + e + ": zero-copy session", Group: GroupCallbox, Engine: e, Mode: ModeZeroCopy},
			Variant{ID: "callbox-" + e + ":calls", Name: "callbox " + e + ": 100 x Invoke (sum of calls)", Group: GroupCallbox, Engine: e, Mode: ModeCalls, chainOnly: true},
			Variant{ID: "callbox-" + e + ":chain-invoke", Name: "callbox " + e + ": chain of 100 x Chain.Invoke (synchronous)", Group: GroupCallbox, Engine: e, Mode: ModeChainInvoke, chainOnly: true},
		)
	}
	vs = append(vs, simdVariants()...)
	for i := range vs {
		if vs[i].Group == GroupCallbox {
			vs[i].setup = callboxSetup
		}
	}
	return vs
}

// Engines are the engines this build has.
func Engines() []string {
	if engines.WasmtimeAvailable() {
		return []string{config.EngineWazero, config.EngineWasmtime}
	}
	return []string{config.EngineWazero}
}

// Env holds what the cases share: a compilation cache directory, the raw
// instances, the Extism plugin and one callbox host per callbox variant,
// each made on first use.
type Env struct {
	ctx      context.Context
	cacheDir string
	mu       sync.Mutex
	hosts    map[string]*host.Host
	raw      map[string]rawInstance
	plugin   *extism.Plugin
}

// NewEnv makes an environment with its own temporary compilation cache.
func NewEnv(ctx context.Context) (*Env, error) {
	dir, err := os.MkdirTemp("", "callbox-bench-")
	if err != nil {
		return nil, err
	}
	return &Env{ctx: ctx, cacheDir: dir, hosts: map[string]*host.Host{}, raw: map[string]rawInstance{}}, nil
}

// Close releases everything and removes the cache directory.
func (e *Env) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for _, h := range e.hosts {
		errs = append(errs, h.Close(e.ctx))
	}
	for _, r := range e.raw {
		errs = append(errs, r.close(e.ctx))
	}
	if e.plugin != nil {
		errs = append(errs, e.plugin.Close(e.ctx))
	}
	errs = append(errs, os.RemoveAll(e.cacheDir))
	return errors.Join(errs...)
}

// Setup prepares one case. The runner must be closed before another case
// of the same variant is set up.
func (e *Env) setup(v Variant, d *data) (*runner, error) {
	r, err := v.setup(e.ctx, e, v, d)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", d.w.ID, v.ID, err)
	}
	if r.close == nil {
		r.close = func() {}
	}
	return r, nil
}

func copySetup(_ context.Context, _ *Env, _ Variant, d *data) (*runner, error) {
	// The two copies a copying round trip makes: the inputs into a
	// stand-in for guest memory, the output back out.
	stage := make([][]float32, len(d.inputs))
	for i, in := range d.inputs {
		stage[i] = make([]float32, len(in))
	}
	stageOut := slices.Clone(d.want)
	out := make([]float32, len(d.want))
	one := func() error {
		for i, in := range d.inputs {
			copy(stage[i], in)
		}
		copy(out, stageOut)
		return nil
	}
	return &runner{op: repeat(d.w.Calls, one), output: func() []float32 { return out }}, nil
}

func nativeSetup(_ context.Context, _ *Env, _ Variant, d *data) (*runner, error) {
	out := make([]float32, d.outLen())
	one := func() error { d.native(out); return nil }
	return &runner{op: repeat(d.w.Calls, one), output: func() []float32 { return out }}, nil
}

func rawSetup(ctx context.Context, env *Env, v Variant, d *data) (*runner, error) {
	inst, err := env.rawInstance(v.ID)
	if err != nil {
		return nil, err
	}
	return rawRunner(ctx, inst, d)
}

// rawInstance returns a raw variant's instance of kernels.wasm, made on
// first use.
func (e *Env) rawInstance(id string) (rawInstance, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, ok := e.raw[id]; ok {
		return r, nil
	}
	wasm, err := KernelsModule()
	if err != nil {
		return nil, err
	}
	var r rawInstance
	switch id {
	case "raw-wasmtime":
		r, err = newRawSandbox(e.ctx, config.EngineWasmtime, wasm, e.cacheDir)
	case "raw-wazero-metered":
		r, err = newRawSandbox(e.ctx, config.EngineWazero, wasm, e.cacheDir)
	default:
		r, err = newRawWazero(e.ctx, wasm)
	}
	if err != nil {
		return nil, err
	}
	e.raw[id] = r
	return r, nil
}

func extismSetup(ctx context.Context, env *Env, _ Variant, d *data) (*runner, error) {
	env.mu.Lock()
	if env.plugin == nil {
		p, err := newExtismPlugin(ctx)
		if err != nil {
			env.mu.Unlock()
			return nil, err
		}
		env.plugin = p
	}
	p := env.plugin
	env.mu.Unlock()
	return extismRunner(ctx, p, d)
}

// Kernels are the callbacks every callbox host loads.
var Kernels = []string{"scale", "matmul", "softmax"}

// callboxConfig is a variant's callback configuration.
func callboxConfig(v Variant, name string) config.Callback {
	cb := config.DefaultCallback()
	cb.Name, cb.Export, cb.Module = name, name, "guests/prebuilt/bench-kernels.wasm"
	if v.SIMD {
		cb.Module = "guests/prebuilt/bench-kernels_simd.wasm"
	}
	cb.Engine = v.Engine
	cb.Limits.Timeout = BenchTimeout
	if v.Mode == ModeNoTimeout {
		cb.Limits.Timeout = 0
	}
	if v.Mode == ModeFresh {
		cb.Isolation = config.IsolationFresh
	}
	cb.Limits.MaxMemory = 256 << 20
	cb.MaxInstances = 1
	return cb
}

// newHost loads the kernels with one variant's configuration.
func newHost(ctx context.Context, cacheDir string, wasm []byte, configure func(name string) config.Callback, names ...string) (*host.Host, error) {
	h, err := host.New(ctx, nil, host.WithLogger(slog.New(slog.DiscardHandler)), host.WithCacheDir(cacheDir))
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if err := h.LoadModule(ctx, configure(name), wasm); err != nil {
			_ = h.Close(ctx)
			return nil, err
		}
	}
	return h, nil
}

// host returns the variant's host, loading it on first use.
func (e *Env) host(v Variant) (*host.Host, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if h, ok := e.hosts[v.ID]; ok {
		return h, nil
	}
	wasm, kernels, err := v.kernels()
	if err != nil {
		return nil, err
	}
	h, err := newHost(e.ctx, e.cacheDir, wasm, func(name string) config.Callback { return callboxConfig(v, name) }, kernels...)
	if err != nil {
		return nil, err
	}
	e.hosts[v.ID] = h
	return h, nil
}

// tensors are a workload's inputs as callbox tensors over the Go data.
func (d *data) tensors() []host.Tensor {
	ins := make([]host.Tensor, 0, len(d.inputs)+1)
	for i, in := range d.inputs {
		ins = append(ins, abi.From(in, d.shapes[i]...))
	}
	if d.w.Kernel == "scale" {
		ins = append(ins, abi.Scalar(d.factor))
	}
	return ins
}

func callboxSetup(ctx context.Context, env *Env, v Variant, d *data) (*runner, error) {
	h, err := env.host(v)
	if err != nil {
		return nil, err
	}
	kernel := d.w.Kernel
	ins := d.tensors()
	out := make([]float32, d.outLen())
	outs := []host.Tensor{abi.From(out, d.outShape...)}
	view := func(ts []host.Tensor) []float32 {
		if len(ts) == 0 {
			return nil
		}
		return floatsOf(ts[0].Data)
	}
	switch {
	case v.Mode == ModeZeroCopy:
		// The caller builds its inputs in guest memory once (Alloc) and
		// reads outputs in place: a call copies nothing.
		s, err := h.NewSession(ctx, kernel)
		if err != nil {
			return nil, err
		}
		gins := make([]host.Tensor, len(ins))
		for i, t := range ins {
			if gins[i], err = s.Alloc(ctx, t.DType, t.Shape...); err != nil {
				s.Release(ctx)
				return nil, err
			}
			copy(gins[i].Data, t.Data)
		}
		var last []host.Tensor
		one := func() error {
			o, _, err := s.Invoke(ctx, gins...)
			last = o
			return err
		}
		return &runner{op: repeat(d.w.Calls, one), output: func() []float32 { return view(last) }, close: func() { s.Release(ctx) }}, nil
	case v.Mode == ModeCalls:
		// The chain's calls one by one: Invoke, as a chain's Submit does.
		var last []host.Tensor
		one := func() error {
			o, err := h.Invoke(ctx, kernel, ins...)
			last = o
			return err
		}
		return &runner{op: repeat(d.w.Calls, one), output: func() []float32 { return view(last) }}, nil
	case v.Mode == ModeChainInvoke:
		var last []host.Tensor
		op := func() error {
			ch := h.NewChain("bench")
			for i := 0; i < d.w.Calls; i++ {
				o, err := ch.Invoke(ctx, kernel, ins...)
				if err != nil {
					return err
				}
				last = o
			}
			return nil
		}
		return &runner{op: op, output: func() []float32 { return view(last) }}, nil
	case d.w.Chain():
		var last *host.Future
		op := func() error {
			ch := h.NewChain("bench")
			for i := 0; i < d.w.Calls; i++ {
				last = ch.Submit(ctx, kernel, ins...)
			}
			return ch.Barrier(ctx)
		}
		output := func() []float32 {
			o, err := last.Wait(ctx)
			if err != nil {
				return nil
			}
			return view(o)
		}
		return &runner{op: op, output: output}, nil
	default:
		one := func() error {
			_, err := h.Do(ctx, &host.Request{Callback: kernel, Inputs: ins, Outputs: outs})
			return err
		}
		return &runner{op: one, output: func() []float32 { return out }}, nil
	}
}

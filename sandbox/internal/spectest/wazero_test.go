package spectest

import (
	"context"
	"fmt"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/meter"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/validate"
	wz "github.com/seed4b3e0ccb/callbox/sandbox/internal/wazero"
)

// wazeroConfigs: wazero as callbox runs it (every module metered, under
// the default stack limit), with deterministic mode's NaN
// canonicalization (the spec's nan:canonical and nan:arithmetic results
// both admit the canonical NaN), and plain.
func wazeroConfigs() []config {
	return []config{
		{name: "wazero", open: openWazero},
		{name: "wazero+meter", rewrite: rewriter(wz.MeterOptions(wz.DefaultMaxStack, false), false), open: openWazero},
		{name: "wazero+meter+nan", rewrite: rewriter(wz.MeterOptions(wz.DefaultMaxStack, true), false), open: openWazero, canonicalNaN: true},
		{name: "wazero+meter+profile", rewrite: rewriter(profiled(wz.MeterOptions(wz.DefaultMaxStack, false)), false), open: openWazero},
	}
}

// profiled adds the guest profiler's reports to a rewrite's options.
func profiled(opts meter.Options) meter.Options {
	opts.Profile = true
	return opts
}

type wazeroWorld struct {
	ctx     context.Context
	cfg     config
	rt      wazero.Runtime
	modules map[string]api.Module
	last    api.Module
	stacks  []api.MutableGlobal // the metered instances' stack counters
}

func openWazero(cfg config) world {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCoreFeatures(validate.WazeroFeatures))
	w := &wazeroWorld{ctx: ctx, cfg: cfg, rt: rt, modules: map[string]api.Module{}}
	if _, err := rt.NewHostModuleBuilder(meter.RefillModule).
		NewFunctionBuilder().WithFunc(func(_ context.Context, budget int64) int64 { return refill(budget) }).Export(meter.RefillName).
		NewFunctionBuilder().WithFunc(func(context.Context) { panic(errMeterOverflow) }).Export(meter.OverflowName).
		NewFunctionBuilder().WithFunc(func(context.Context, int32) {}).Export(meter.GrowDeniedName).
		NewFunctionBuilder().WithFunc(func(context.Context, int32, int64) {}).Export(meter.ProfileEnterName).
		NewFunctionBuilder().WithFunc(func(context.Context, int64) {}).Export(meter.ProfileExitName).
		Instantiate(ctx); err != nil {
		panic(err)
	}
	if _, err := rt.InstantiateWithConfig(ctx, wat.Must(spectestModule), wazero.NewModuleConfig().WithName("spectest")); err != nil {
		panic(err)
	}
	return w
}

func (w *wazeroWorld) prepare(wasm []byte) ([]byte, string) {
	if w.cfg.rewrite == nil {
		return wasm, ""
	}
	out, err := w.cfg.rewrite(wasm)
	if err != nil {
		return nil, outRewrite + ": " + err.Error()
	}
	return out, ""
}

func (w *wazeroWorld) compiles(wasm []byte) bool {
	wasm, failed := w.prepare(wasm)
	if failed != "" {
		return false
	}
	cm, err := w.compile(wasm)
	if err != nil {
		return false
	}
	_ = cm.Close(w.ctx)
	return true
}

// compile is wazero's compile; a panic in it is a refusal.
func (w *wazeroWorld) compile(wasm []byte) (cm wazero.CompiledModule, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return w.rt.CompileModule(w.ctx, wasm)
}

func (w *wazeroWorld) load(wasm []byte, name, as string) string {
	wasm, failed := w.prepare(wasm)
	if failed != "" {
		return failed
	}
	cm, err := w.compile(wasm)
	if err != nil {
		return outInvalid
	}
	mod, err := w.rt.InstantiateModule(w.ctx, cm, wazero.NewModuleConfig().WithName(as).WithStartFunctions())
	if err != nil {
		return wazeroOutcome(err, true)
	}
	if g, ok := mod.ExportedGlobal(meter.StackExport).(api.MutableGlobal); ok && w.cfg.rewrite != nil {
		w.stacks = append(w.stacks, g)
	}
	if name != "" {
		w.modules[name] = mod
	}
	w.last = mod
	return ""
}

func (w *wazeroWorld) module(name string) api.Module {
	if name == "" {
		return w.last
	}
	return w.modules[name]
}

func (w *wazeroWorld) invoke(module, field string, args []val) ([]val, string) {
	mod := w.module(module)
	if mod == nil {
		return nil, "no module " + module
	}
	fn := mod.ExportedFunction(field)
	if fn == nil {
		return nil, "no export " + field
	}
	// The host resets the stack counter at every call (frames a trap
	// unwound are never released); so does the suite.
	start := -int64(wz.DefaultMaxStack)
	for _, g := range w.stacks {
		g.Set(uint64(start))
	}
	var params []uint64
	for _, a := range args {
		switch a.kind {
		case "v128":
			params = append(params, a.lo, a.hi)
		case "externref":
			if a.null {
				params = append(params, 0)
			} else {
				params = append(params, a.ref+1)
			}
		case "funcref":
			params = append(params, 0) // scripts pass only null funcrefs
		default:
			params = append(params, a.lo)
		}
	}
	stack, err := fn.Call(w.ctx, params...)
	if err != nil {
		return nil, wazeroOutcome(err, false)
	}
	var out []val
	for _, t := range fn.Definition().ResultTypes() {
		v := val{kind: valueTypeName(t)}
		switch t {
		case 0x7b: // v128
			v.lo, v.hi, stack = stack[0], stack[1], stack[2:]
		case api.ValueTypeExternref:
			v.null, v.ref, stack = stack[0] == 0, stack[0]-1, stack[1:]
			if v.null {
				v.ref = 0
			}
		case 0x70: // funcref
			v.null, stack = stack[0] == 0, stack[1:]
		case api.ValueTypeI32, api.ValueTypeF32:
			v.lo, stack = uint64(uint32(stack[0])), stack[1:]
		default:
			v.lo, stack = stack[0], stack[1:]
		}
		out = append(out, v)
	}
	return out, ""
}

func (w *wazeroWorld) get(module, field string) (val, string) {
	mod := w.module(module)
	if mod == nil {
		return val{}, "no module " + module
	}
	g := mod.ExportedGlobal(field)
	if g == nil {
		return val{}, "no global " + field
	}
	v := val{kind: valueTypeName(g.Type()), lo: g.Get()}
	if v.kind == "i32" || v.kind == "f32" {
		v.lo = uint64(uint32(v.lo))
	}
	return v, ""
}

func (w *wazeroWorld) close() { _ = w.rt.Close(w.ctx) }

func valueTypeName(t api.ValueType) string {
	switch t {
	case api.ValueTypeI32:
		return "i32"
	case api.ValueTypeI64:
		return "i64"
	case api.ValueTypeF32:
		return "f32"
	case api.ValueTypeF64:
		return "f64"
	case 0x7b:
		return "v128"
	case api.ValueTypeExternref:
		return "externref"
	case 0x70:
		return "funcref"
	}
	return fmt.Sprintf("type%#x", t)
}

// wazeroOutcome names a failed instantiation or call by kind. At
// instantiation, a failure that is no trap is a link error.
func wazeroOutcome(err error, instantiating bool) string {
	msg := err.Error()
	if strings.Contains(msg, errMeterOverflow.Error()) {
		return outExhaustion
	}
	first, _, _ := strings.Cut(msg, "\n")
	switch {
	case strings.Contains(first, "stack overflow"):
		return outExhaustion
	case strings.Contains(first, "out of bounds memory access"):
		return outMemory
	case strings.Contains(first, "invalid table access"):
		return outTable
	case strings.Contains(first, "indirect call type mismatch"):
		return outSignature
	case strings.Contains(first, "wasm error: unreachable"):
		return outUnreachable
	case strings.Contains(first, "integer overflow"):
		return outOverflow
	case strings.Contains(first, "integer divide by zero"):
		return outDivide
	case strings.Contains(first, "invalid conversion to integer"):
		return outConversion
	case instantiating && !strings.Contains(first, "wasm error"):
		return outUnlinkable
	}
	return outOther + ": " + first
}

//go:build cgo

package spectest

import (
	"errors"
	"fmt"
	"math"
	"strings"

	wt "github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/meter"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/validate"
	wtengine "github.com/seed4b3e0ccb/callbox/sandbox/internal/wasmtime"
)

// wasmtimeConfigs: wasmtime plain, as callbox runs a callback without
// fuel (the grow hook only; a module the meter cannot rewrite runs as
// it is) and with fuel (the whole meter).
func wasmtimeConfigs() []config {
	return []config{
		{name: "wasmtime", open: openWasmtime},
		{name: "wasmtime+grow-hook", rewrite: rewriter(wtengine.MeterOptions(false), true), open: openWasmtime},
		{name: "wasmtime+fuel", rewrite: rewriter(wtengine.MeterOptions(true), false), open: openWasmtime},
	}
}

// externRef is a script's externref value, as the host hands it in.
type externRef uint64

type wasmtimeWorld struct {
	cfg      config
	engine   *wt.Engine
	store    *wt.Store
	linker   *wt.Linker
	modules  map[string]*wt.Instance
	last     *wt.Instance
	stacks   []*wt.Global
	wrappers map[string]*wt.Module // by signature
	wrapped  map[*wt.Func]*wt.Func
}

func openWasmtime(cfg config) world {
	c := wt.NewConfig()
	validate.ConfigureWasmtime(c)
	c.SetCraneliftOptLevel(wt.OptLevelSpeed)
	engine := wt.NewEngineWithConfig(c)
	w := &wasmtimeWorld{cfg: cfg, engine: engine, store: wt.NewStore(engine), linker: wt.NewLinker(engine),
		modules: map[string]*wt.Instance{}, wrappers: map[string]*wt.Module{}, wrapped: map[*wt.Func]*wt.Func{}}
	w.linker.AllowShadowing(true)
	must(w.linker.FuncWrap(meter.RefillModule, meter.RefillName, func(budget int64) int64 { return refill(budget) }))
	must(w.linker.FuncWrap(meter.RefillModule, meter.OverflowName, func() *wt.Trap { return wt.NewTrap(errMeterOverflow.Error()) }))
	must(w.linker.FuncWrap(meter.RefillModule, meter.GrowDeniedName, func(int32) {}))
	spec, err := wt.NewModule(engine, wat.Must(spectestModule))
	must(err)
	inst, err := w.linker.Instantiate(w.store, spec)
	must(err)
	must(w.linker.DefineInstance(w.store, "spectest", inst))
	return w
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func (w *wasmtimeWorld) prepare(wasm []byte) ([]byte, string) {
	if w.cfg.rewrite == nil {
		return wasm, ""
	}
	out, err := w.cfg.rewrite(wasm)
	if err != nil {
		return nil, outRewrite + ": " + err.Error()
	}
	return out, ""
}

func (w *wasmtimeWorld) compiles(wasm []byte) bool {
	wasm, failed := w.prepare(wasm)
	if failed != "" {
		return false
	}
	m, err := wt.NewModule(w.engine, wasm)
	if err != nil {
		return false
	}
	m.Close()
	return true
}

func (w *wasmtimeWorld) load(wasm []byte, name, as string) string {
	wasm, failed := w.prepare(wasm)
	if failed != "" {
		return failed
	}
	m, err := wt.NewModule(w.engine, wasm)
	if err != nil {
		return outInvalid
	}
	inst, err := w.linker.Instantiate(w.store, m)
	if err != nil {
		var trap *wt.Trap
		if errors.As(err, &trap) {
			return wasmtimeOutcome(err)
		}
		return outUnlinkable
	}
	if w.cfg.rewrite != nil {
		if ext := inst.GetExport(w.store, meter.StackExport); ext != nil && ext.Global() != nil {
			w.stacks = append(w.stacks, ext.Global())
		}
	}
	if as != "" {
		must(w.linker.DefineInstance(w.store, as, inst))
	}
	if name != "" {
		w.modules[name] = inst
	}
	w.last = inst
	return ""
}

func (w *wasmtimeWorld) instance(name string) *wt.Instance {
	if name == "" {
		return w.last
	}
	return w.modules[name]
}

// kindName names a wasmtime value kind; wasmtime-go has no constant for
// v128 (the C API's WASM_V128, 4).
func kindName(k wt.ValKind) string {
	switch k {
	case wt.KindI32:
		return "i32"
	case wt.KindI64:
		return "i64"
	case wt.KindF32:
		return "f32"
	case wt.KindF64:
		return "f64"
	case wt.KindExternref:
		return "externref"
	case wt.KindFuncref:
		return "funcref"
	case 4:
		return "v128"
	}
	return fmt.Sprintf("kind%d", k)
}

func (w *wasmtimeWorld) invoke(module, field string, args []val) ([]val, string) {
	inst := w.instance(module)
	if inst == nil {
		return nil, "no module " + module
	}
	fn := inst.GetFunc(w.store, field)
	if fn == nil {
		return nil, "no export " + field
	}
	for _, g := range w.stacks {
		must(g.Set(w.store, wt.ValI64(-(1 << 62))))
	}
	ft := fn.Type(w.store)
	var params, results []string
	for _, p := range ft.Params() {
		params = append(params, kindName(p.Kind()))
	}
	for _, r := range ft.Results() {
		results = append(results, kindName(r.Kind()))
	}
	call, flatResults := fn, results
	if hasV128(params) || hasV128(results) {
		call, flatResults = w.wrap(fn, params, results), flatten(results)
	}
	var in []any
	for _, a := range args {
		switch a.kind {
		case "i32":
			in = append(in, int32(uint32(a.lo)))
		case "i64":
			in = append(in, int64(a.lo))
		case "f32":
			in = append(in, math.Float32frombits(uint32(a.lo)))
		case "f64":
			in = append(in, math.Float64frombits(a.lo))
		case "v128":
			in = append(in, int64(a.lo), int64(a.hi))
		case "externref":
			if a.null {
				in = append(in, wt.ValExternref(nil))
			} else {
				in = append(in, externRef(a.ref))
			}
		case "funcref":
			in = append(in, (*wt.Func)(nil))
		}
	}
	ret, err := call.Call(w.store, in...)
	if err != nil {
		return nil, wasmtimeOutcome(err)
	}
	var raw []any
	switch r := ret.(type) {
	case nil:
		if len(flatResults) == 1 { // a null reference
			raw = []any{nil}
		}
	case []wt.Val:
		for _, v := range r {
			raw = append(raw, v.Get())
		}
	default:
		raw = []any{r}
	}
	var out []val
	for _, kind := range results {
		v := val{kind: kind}
		switch kind {
		case "v128":
			v.lo, v.hi, raw = uint64(raw[0].(int64)), uint64(raw[1].(int64)), raw[2:]
		case "i32":
			v.lo, raw = uint64(uint32(raw[0].(int32))), raw[1:]
		case "i64":
			v.lo, raw = uint64(raw[0].(int64)), raw[1:]
		case "f32":
			v.lo, raw = uint64(math.Float32bits(raw[0].(float32))), raw[1:]
		case "f64":
			v.lo, raw = math.Float64bits(raw[0].(float64)), raw[1:]
		case "externref":
			if r, ok := raw[0].(externRef); ok {
				v.ref = uint64(r)
			} else {
				v.null = true
			}
			raw = raw[1:]
		case "funcref":
			f, _ := raw[0].(*wt.Func)
			v.null, raw = f == nil, raw[1:]
		}
		out = append(out, v)
	}
	return out, ""
}

func hasV128(kinds []string) bool {
	for _, k := range kinds {
		if k == "v128" {
			return true
		}
	}
	return false
}

// flatten is a signature with every v128 as two i64s.
func flatten(kinds []string) []string {
	var out []string
	for _, k := range kinds {
		if k == "v128" {
			out = append(out, "i64", "i64")
		} else {
			out = append(out, k)
		}
	}
	return out
}

// wrap returns a function that calls fn with every v128 parameter and
// result passed as two i64s: wasmtime-go has no v128 values.
func (w *wasmtimeWorld) wrap(fn *wt.Func, params, results []string) *wt.Func {
	if f, ok := w.wrapped[fn]; ok {
		return f
	}
	sig := strings.Join(params, " ") + "->" + strings.Join(results, " ")
	mod, ok := w.wrappers[sig]
	if !ok {
		var b strings.Builder
		fmt.Fprintf(&b, "(module (import \"target\" \"f\" (func $f (param %s) (result %s)))\n", strings.Join(params, " "), strings.Join(results, " "))
		fmt.Fprintf(&b, "(func (export \"w\") (param %s) (result %s)\n", strings.Join(flatten(params), " "), strings.Join(flatten(results), " "))
		for i, r := range results {
			fmt.Fprintf(&b, "(local $r%d %s)\n", i, r)
		}
		p := 0
		for _, k := range params {
			if k == "v128" {
				fmt.Fprintf(&b, "(i64x2.replace_lane 1 (i64x2.splat (local.get %d)) (local.get %d))\n", p, p+1)
				p += 2
			} else {
				fmt.Fprintf(&b, "(local.get %d)\n", p)
				p++
			}
		}
		b.WriteString("(call $f)\n")
		for i := len(results) - 1; i >= 0; i-- {
			fmt.Fprintf(&b, "(local.set $r%d)\n", i)
		}
		for i, k := range results {
			if k == "v128" {
				fmt.Fprintf(&b, "(i64x2.extract_lane 0 (local.get $r%d)) (i64x2.extract_lane 1 (local.get $r%d))\n", i, i)
			} else {
				fmt.Fprintf(&b, "(local.get $r%d)\n", i)
			}
		}
		b.WriteString("))")
		var err error
		mod, err = wt.NewModule(w.engine, wat.Must(b.String()))
		must(err)
		w.wrappers[sig] = mod
	}
	must(w.linker.Define(w.store, "target", "f", fn))
	inst, err := w.linker.Instantiate(w.store, mod)
	must(err)
	f := inst.GetFunc(w.store, "w")
	w.wrapped[fn] = f
	return f
}

func (w *wasmtimeWorld) get(module, field string) (val, string) {
	inst := w.instance(module)
	if inst == nil {
		return val{}, "no module " + module
	}
	ext := inst.GetExport(w.store, field)
	if ext == nil || ext.Global() == nil {
		return val{}, "no global " + field
	}
	g := ext.Global()
	v := g.Get(w.store)
	out := val{kind: kindName(g.Type(w.store).Content().Kind())}
	switch out.kind {
	case "i32":
		out.lo = uint64(uint32(v.I32()))
	case "i64":
		out.lo = uint64(v.I64())
	case "f32":
		out.lo = uint64(math.Float32bits(v.F32()))
	case "f64":
		out.lo = math.Float64bits(v.F64())
	}
	return out, ""
}

func (w *wasmtimeWorld) close() {
	for _, m := range w.wrappers {
		m.Close()
	}
	w.linker.Close()
	w.store.Close()
	w.engine.Close()
}

// wasmtimeOutcome names a failed instantiation or call by kind, from
// wasmtime's raw trap codes (wasmtime-go's constants past 10 disagree
// with the C API's; none of those is used here).
func wasmtimeOutcome(err error) string {
	var trap *wt.Trap
	if !errors.As(err, &trap) {
		return outOther + ": " + err.Error()
	}
	if strings.Contains(trap.Message(), errMeterOverflow.Error()) {
		return outExhaustion
	}
	code := trap.Code()
	if code == nil {
		return outOther + ": " + trap.Message()
	}
	switch uint8(*code) {
	case 0:
		return outExhaustion
	case 1:
		return outMemory
	case 3, 4: // out of bounds table access, indirect call to null
		return outTable
	case 5: // bad signature
		return outSignature
	case 6:
		return outOverflow
	case 7:
		return outDivide
	case 8:
		return outConversion
	case 9:
		return outUnreachable
	}
	return fmt.Sprintf("%s: code %d", outOther, *code)
}

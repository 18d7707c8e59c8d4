package bench

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/guests/prebuilt"
	"github.com/seed4b3e0ccb/callbox/guests/reference"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

// The users' kernels: callbacks written with an SDK the way its users
// write code (not tuned for the benchmark), built by that SDK's own recipe
// (guests/bench/build.sh), each timed against the same algorithm as a
// plain Go loop on the same data (guests/reference), on every engine.
//
// Beside them, "where the time goes": the same loops written as raw entry
// points in C with no SDK and no frame (guests/bench/loops.c), run on a
// plain wazero runtime, on wazero with callbox's load-time metering, and
// on wasmtime with and without epoch interruption. With the SDK's call
// against the raw loop on the same engine, this separates what the SDK
// and its compiler add, what metering and epochs (the price of timeouts)
// add, and what the engine's own code costs against Go's compiler.

// UserKernel is one user-shaped kernel.
type UserKernel struct {
	Name   string // its export, and bench-<Name>.wasm in guests/prebuilt
	Lang   string // the SDK it is written with
	Source string // its source file
	What   string // what it computes, for the report
	// Raw is the export of guests/bench/loops.c with the same loop.
	Raw string
	// Tuned marks a kernel rewritten for speed as an SDK's README advises:
	// shown beside the users' kernels, not held to their target.
	Tuned bool

	inputs func() []host.Tensor
	output func() host.Tensor
	// native runs Go's loop on inputs into out (the data of output()).
	native func(ins []host.Tensor, out host.Tensor)
	// rawParams are the raw export's parameters, given where each input
	// and the output lie in guest memory.
	rawParams func(ins []uint32, out uint32) []uint64
}

// The users' kernels' sizes: 1 MiB of f32 input each.
const (
	userElems = 1 << 18
	userRows  = 256
	userCols  = userElems / userRows
	userEdges = 16
	userClipT = 3
)

// userData is the kernels' input: values in [-10, 10) spread over the
// range in a fixed, non-monotonic order (so digitize's branch is not
// predictable from the previous element).
func userData() []float32 {
	x := make([]float32, userElems)
	for i := range x {
		x[i] = float32((i*7919)%2000-1000) / 100
	}
	return x
}

// UserKernels are the kernels the benchmark runs.
var UserKernels = []UserKernel{
	{
		Name: "clip", Lang: "AssemblyScript", Source: "guests/assemblyscript/kernels/clip.ts", Raw: "clip_raw",
		What:   "clipped ReLU `min(max(x, 0), 3)` over f32[262144] (checked indexing, `Mathf.min`/`Mathf.max`)",
		inputs: clipInputs, output: clipOutput, native: clipNative, rawParams: clipRawParams,
	},
	{
		Name: "clip_unchecked", Lang: "AssemblyScript", Source: "guests/assemblyscript/kernels/clip_unchecked.ts", Raw: "clip_raw", Tuned: true,
		What:   "clip with the lengths checked once and `unchecked` indexing in the loop (the SDK README's advice for hot loops)",
		inputs: clipInputs, output: clipOutput, native: clipNative, rawParams: clipRawParams,
	},
	{
		Name: "normalize", Lang: "Rust", Source: "guests/rust/kernels/normalize.rs", Raw: "normalize_raw",
		What: "each row of f32[256,1024] to zero mean and unit variance (two f32 reductions and a map, with iterators)",
		inputs: func() []host.Tensor {
			return []host.Tensor{abi.From(userData(), userRows, userCols)}
		},
		output: func() host.Tensor { return abi.From(make([]float32, userElems), userRows, userCols) },
		native: func(ins []host.Tensor, out host.Tensor) {
			reference.NormalizeInto(mustView[float32](out), mustView[float32](ins[0]), userRows, userCols)
		},
		rawParams: func(ins []uint32, out uint32) []uint64 {
			return []uint64{uint64(ins[0]), uint64(out), userRows, userCols}
		},
	},
	{
		Name: "digitize", Lang: "C", Source: "guests/c/kernels/digitize.c", Raw: "digitize_raw",
		What: "the bucket of each of f32[262144] among 16 ascending edges (a linear scan with a data-dependent exit)",
		inputs: func() []host.Tensor {
			edges := make([]float32, userEdges)
			for i := range edges {
				edges[i] = float32(i-userEdges/2) * 1.25
			}
			return []host.Tensor{abi.From(userData(), userElems), abi.From(edges, userEdges)}
		},
		output: func() host.Tensor { return abi.From(make([]int32, userElems), userElems) },
		native: func(ins []host.Tensor, out host.Tensor) {
			reference.DigitizeInto(mustView[int32](out), mustView[float32](ins[0]), mustView[float32](ins[1]))
		},
		rawParams: func(ins []uint32, out uint32) []uint64 {
			return []uint64{uint64(ins[0]), userElems, uint64(ins[1]), userEdges, uint64(out)}
		},
	},
}

// The clip kernels' data, Go loop and raw parameters (clip and its tuned
// twin compute the same thing).
func clipInputs() []host.Tensor {
	return []host.Tensor{abi.From(userData(), userElems), abi.Scalar(float32(userClipT))}
}

func clipOutput() host.Tensor { return abi.From(make([]float32, userElems), userElems) }

func clipNative(ins []host.Tensor, out host.Tensor) {
	reference.ClipInto(mustView[float32](out), mustView[float32](ins[0]), userClipT)
}

func clipRawParams(ins []uint32, out uint32) []uint64 {
	return []uint64{uint64(ins[0]), uint64(out), userElems, api.EncodeF32(userClipT)}
}

func mustView[T abi.Element](t host.Tensor) []T {
	v, err := abi.View[T](t)
	if err != nil {
		panic(err)
	}
	return v
}

// The raw variants of "where the time goes".
const (
	RawWazero        = "wazero"
	RawWazeroMetered = "wazero, metered"
	RawWasmtimeEpoch = "wasmtime, epochs"
	RawWasmtimePlain = "wasmtime, no epochs"
)

// UserKernelResult is one kernel measured in interleaved repetitions:
// each repetition times Go's loop, the callback through InvokeInto on
// every engine, and the raw loop on every raw variant, moments apart.
// Times are process CPU ns per operation; ratios are the median over
// repetitions of the same repetition's ratio to Go's loop.
type UserKernelResult struct {
	Kernel UserKernel
	// Go is Go's loop, process CPU ns per operation; GoWall its wall time,
	// which the times read inside the engine are compared with.
	Go, GoWall []float64
	// Call is the whole InvokeInto (copies, frame and checks included)
	// per engine; Guest the time inside the callback's export (Stats.Guest,
	// wall time: the kernel alone).
	Call, Guest map[string][]float64
	// Raw is the raw loop per raw variant (RawWazero, ...), wall time of
	// the call alone (inputs written beforehand).
	Raw map[string][]float64
	Err error
}

// CallRatio is the whole call over Go's loop on engine, the median over
// repetitions; NaN when not measured.
func (r *UserKernelResult) CallRatio(engine string) float64 { return medianRatio(r.Call[engine], r.Go) }

// GuestRatio is the kernel alone (inside the export) over Go's loop.
func (r *UserKernelResult) GuestRatio(engine string) float64 {
	return medianRatio(r.Guest[engine], r.GoWall)
}

// RawRatio is a raw variant over Go's loop.
func (r *UserKernelResult) RawRatio(variant string) float64 {
	return medianRatio(r.Raw[variant], r.GoWall)
}

// medianRatio is the median of a[i]/b[i]; NaN when either is empty.
func medianRatio(a, b []float64) float64 {
	n := min(len(a), len(b))
	if n == 0 {
		return math.NaN()
	}
	rs := make([]float64, n)
	for i := range n {
		rs[i] = a[i] / b[i]
	}
	return median(rs)
}

// MeasureUserKernels measures every user kernel in reps interleaved
// repetitions, each measurement at least sampleTime long.
func MeasureUserKernels(ctx context.Context, reps int, sampleTime time.Duration) []UserKernelResult {
	out := make([]UserKernelResult, len(UserKernels))
	for i, k := range UserKernels {
		out[i] = measureUserKernel(ctx, k, reps, sampleTime)
	}
	return out
}

// userOp is one timed operation of a user-kernel measurement; guest, when
// set, is read after each timing and divided by the operations it ran.
type userOp struct {
	engine, raw string
	op          func() error
	guest       *time.Duration
	k           int
}

func measureUserKernel(ctx context.Context, k UserKernel, reps int, sampleTime time.Duration) UserKernelResult {
	res := UserKernelResult{Kernel: k, Call: map[string][]float64{}, Guest: map[string][]float64{}, Raw: map[string][]float64{}}
	fail := func(err error) UserKernelResult {
		res.Err = fmt.Errorf("%s: %w", k.Name, err)
		return res
	}
	wasm, err := prebuilt.Module("bench", k.Name)
	if err != nil {
		return fail(err)
	}
	ins := k.inputs()
	want := k.output()
	k.native(ins, want)

	var ops []*userOp
	goOut := k.output()
	ops = append(ops, &userOp{op: func() error { k.native(ins, goOut); return nil }})

	dir, err := os.MkdirTemp("", "callbox-bench-user-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	for _, e := range Engines() {
		h, err := newHost(ctx, dir, wasm, func(name string) config.Callback {
			cb := config.DefaultCallback()
			cb.Name, cb.Engine, cb.Module = name, e, "bench-"+name+".wasm"
			cb.Limits.Timeout, cb.Limits.MaxMemory = BenchTimeout, 256<<20
			cb.MaxInstances = 1
			return cb
		}, k.Name)
		if err != nil {
			return fail(err)
		}
		defer h.Close(ctx)
		cb, err := h.Lookup(k.Name)
		if err != nil {
			return fail(err)
		}
		o := &userOp{engine: e, guest: new(time.Duration)}
		outs := []host.Tensor{k.output()}
		o.op = func() error {
			st, err := cb.Do(ctx, &host.Request{Inputs: ins, Outputs: outs})
			*o.guest += st.Guest
			return err
		}
		if err := o.op(); err != nil {
			return fail(fmt.Errorf("%s: %w", e, err))
		}
		if !slices.Equal(outs[0].Data, want.Data) {
			return fail(fmt.Errorf("%s: the callback's result differs from Go's loop", e))
		}
		ops = append(ops, o)
	}
	raws, closeRaws, err := userRawOps(ctx, k, dir, ins, want)
	if err != nil {
		return fail(err)
	}
	defer closeRaws()
	ops = append(ops, raws...)

	n, err := calibrate(&runner{op: ops[0].op}, sampleTime)
	if err != nil {
		return fail(err)
	}
	for _, o := range ops {
		// Every variant runs about sampleTime: Go's loop n times, the
		// slower ones fewer, at least once.
		o.k = n
		if o != ops[0] {
			c, err := calibrate(&runner{op: o.op}, sampleTime)
			if err != nil {
				return fail(err)
			}
			o.k = c
		}
	}
	for rep := 0; rep < reps && ctx.Err() == nil; rep++ {
		for _, o := range ops {
			if o.guest != nil {
				*o.guest = 0
			}
			s, err := timeOps(&runner{op: o.op}, o.k)
			if err != nil {
				return fail(err)
			}
			cost := s.cpu
			if math.IsNaN(cost) {
				cost = s.ns
			}
			switch {
			case o.engine != "":
				res.Call[o.engine] = append(res.Call[o.engine], cost)
				res.Guest[o.engine] = append(res.Guest[o.engine], float64(o.guest.Nanoseconds())/float64(o.k))
			case o.raw != "":
				res.Raw[o.raw] = append(res.Raw[o.raw], s.ns)
			default:
				res.Go, res.GoWall = append(res.Go, cost), append(res.GoWall, s.ns)
			}
		}
	}
	return res
}

// userRawOps are the raw loop of k on every raw variant this build has,
// each checked against Go's result once.
func userRawOps(ctx context.Context, k UserKernel, cacheDir string, ins []host.Tensor, want host.Tensor) ([]*userOp, func(), error) {
	wasm, err := prebuilt.Module("bench", "loops")
	if err != nil {
		return nil, func() {}, err
	}
	var ops []*userOp
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	add := func(name string, inst rawLoopInstance) error {
		closers = append(closers, inst.close)
		call, out, err := rawLoopCall(ctx, inst, k, ins, len(want.Data))
		if err != nil {
			return fmt.Errorf("raw %s: %w", name, err)
		}
		if err := call(); err != nil {
			return fmt.Errorf("raw %s: %w", name, err)
		}
		if got := out(); !slices.Equal(got, want.Data) {
			return fmt.Errorf("raw %s: the loop's result differs from Go's", name)
		}
		ops = append(ops, &userOp{raw: name, op: call})
		return nil
	}
	plain, err := newRawLoopsWazero(ctx, wasm)
	if err == nil {
		err = add(RawWazero, plain)
	}
	if err != nil {
		closeAll()
		return nil, func() {}, err
	}
	raws := []struct{ name, engine string }{{RawWazeroMetered, config.EngineWazero}}
	if engines.WasmtimeAvailable() {
		raws = append(raws, struct{ name, engine string }{RawWasmtimeEpoch, config.EngineWasmtime})
	}
	for _, e := range raws {
		inst, err := newRawLoopsSandbox(ctx, e.engine, wasm, cacheDir)
		if err == nil {
			err = add(e.name, inst)
		}
		if err != nil {
			closeAll()
			return nil, func() {}, err
		}
	}
	if inst, err := newRawLoopsWasmtimePlain(wasm); err != nil {
		closeAll()
		return nil, func() {}, err
	} else if inst != nil {
		if err := add(RawWasmtimePlain, inst); err != nil {
			closeAll()
			return nil, func() {}, err
		}
	}
	return ops, closeAll, nil
}

// rawLoopInstance is loops.wasm instantiated on one raw variant.
type rawLoopInstance interface {
	// call runs export name with params (results, if any, overwrite it).
	call(ctx context.Context, name string, params []uint64) error
	memory() []byte
	close()
}

// rawLoopCall places k's inputs and an output region in the instance's
// memory (through its reserve export) and returns a call of the raw loop
// on them, and a reader of the output bytes. Inputs are written once: the
// calls time the loop alone.
func rawLoopCall(ctx context.Context, inst rawLoopInstance, k UserKernel, ins []host.Tensor, outBytes int) (func() error, func() []byte, error) {
	reserve := func(n int) (uint32, error) {
		p := []uint64{uint64(n)}
		if err := inst.call(ctx, "reserve", p); err != nil {
			return 0, err
		}
		if p[0] == 0 {
			return 0, fmt.Errorf("reserve(%d) failed", n)
		}
		return uint32(p[0]), nil
	}
	offs := make([]uint32, len(ins))
	for i, in := range ins {
		off, err := reserve(len(in.Data))
		if err != nil {
			return nil, nil, err
		}
		offs[i] = off
	}
	outOff, err := reserve(outBytes)
	if err != nil {
		return nil, nil, err
	}
	mem := inst.memory()
	for i, in := range ins {
		copy(mem[offs[i]:], in.Data)
	}
	params := k.rawParams(offs, outOff)
	stack := make([]uint64, len(params))
	call := func() error {
		copy(stack, params)
		return inst.call(ctx, k.Raw, stack)
	}
	out := func() []byte { return inst.memory()[outOff : int(outOff)+outBytes] }
	return call, out, nil
}

// rawLoopsWazero is loops.wasm on a plain wazero runtime: no metering.
type rawLoopsWazero struct {
	rt  wazero.Runtime
	mod api.Module
	fns map[string]api.Function
}

func newRawLoopsWazero(ctx context.Context, wasm []byte) (*rawLoopsWazero, error) {
	rt := wazero.NewRuntime(ctx)
	mod, err := rt.Instantiate(ctx, wasm)
	if err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("raw wazero: %w", err)
	}
	return &rawLoopsWazero{rt: rt, mod: mod, fns: map[string]api.Function{}}, nil
}

func (r *rawLoopsWazero) call(ctx context.Context, name string, params []uint64) error {
	f, ok := r.fns[name]
	if !ok {
		if f = r.mod.ExportedFunction(name); f == nil {
			return fmt.Errorf("export %s is missing", name)
		}
		r.fns[name] = f
	}
	return f.CallWithStack(ctx, params)
}

func (r *rawLoopsWazero) memory() []byte {
	b, _ := r.mod.Memory().Read(0, r.mod.Memory().Size())
	return b
}

func (r *rawLoopsWazero) close() { _ = r.rt.Close(context.Background()) }

// rawLoopsSandbox is loops.wasm on one of callbox's engines with no
// limits: wazero metered at load as every callbox module on it is, and
// wasmtime with epoch interruption as every callbox wasmtime engine has.
type rawLoopsSandbox struct {
	eng  sandbox.Engine
	mod  sandbox.Module
	inst sandbox.Instance
	fns  map[string]sandbox.Function
}

// rawLoopsSignatures are loops.wasm's exports' parameter types.
var rawLoopsSignatures = map[string][]sandbox.ValType{
	"reserve":       {sandbox.I32},
	"clip_raw":      {sandbox.I32, sandbox.I32, sandbox.I32, sandbox.F32},
	"digitize_raw":  {sandbox.I32, sandbox.I32, sandbox.I32, sandbox.I32, sandbox.I32},
	"normalize_raw": {sandbox.I32, sandbox.I32, sandbox.I32, sandbox.I32},
}

func newRawLoopsSandbox(ctx context.Context, engine string, wasm []byte, cacheDir string) (*rawLoopsSandbox, error) {
	eng, err := newEngine(ctx, engine, cacheDir)
	if err != nil {
		return nil, err
	}
	r := &rawLoopsSandbox{eng: eng, fns: map[string]sandbox.Function{}}
	if r.mod, err = sandbox.Compile(ctx, eng, wasm, sandbox.ModuleConfig{Name: "loops", Logger: slog.New(slog.DiscardHandler)}); err != nil {
		r.close()
		return nil, fmt.Errorf("raw %s: %w", engine, err)
	}
	if r.inst, err = r.mod.Instantiate(ctx, time.Time{}); err != nil {
		r.close()
		return nil, fmt.Errorf("raw %s: %w", engine, err)
	}
	for name, params := range rawLoopsSignatures {
		var results []sandbox.ValType
		if name == "reserve" {
			results = []sandbox.ValType{sandbox.I32}
		}
		if r.fns[name], err = r.inst.Export(name, params, results); err != nil {
			r.close()
			return nil, fmt.Errorf("raw %s: %w", engine, err)
		}
	}
	return r, nil
}

func (r *rawLoopsSandbox) call(ctx context.Context, name string, params []uint64) error {
	return r.inst.Call(ctx, r.fns[name], params)
}

func (r *rawLoopsSandbox) memory() []byte { return r.inst.Memory() }

func (r *rawLoopsSandbox) close() {
	ctx := context.Background()
	if r.inst != nil {
		_ = r.inst.Close(ctx)
	}
	if r.mod != nil {
		_ = r.mod.Close(ctx)
	}
	_ = r.eng.Close(ctx)
}

// userKernelsTarget is target 13: every user kernel within 2x of Go's loop
// on at least one engine, the kernel alone (time inside the export).
func (r *Report) userKernelsTarget() Target {
	t := Target{N: 13, Title: "users' kernels (AssemblyScript clip, Rust normalize, C digitize): each within 2x of the same loop in plain Go on at least one engine, the kernel alone (time inside the export)"}
	for i := range r.UserKernels {
		u := &r.UserKernels[i]
		if u.Kernel.Tuned {
			continue
		}
		c := Check{What: fmt.Sprintf("%s (%s): best engine's kernel / Go", u.Kernel.Name, u.Kernel.Lang), Limit: "<= 2x", Measured: u.Err == nil}
		if u.Err != nil {
			c.Value = "error: " + u.Err.Error()
			t.Checks = append(t.Checks, c)
			continue
		}
		best, bestEngine := math.Inf(1), ""
		var parts []string
		for _, e := range Engines() {
			g := u.GuestRatio(e)
			if g < best {
				best, bestEngine = g, e
			}
			parts = append(parts, fmt.Sprintf("%s %s (whole call %s)", e, fmtRatio(g), fmtRatio(u.CallRatio(e))))
		}
		c.Met = best <= 2
		c.Value = fmt.Sprintf("%s on %s (%s; Go's loop %s; median of %d interleaved reps)", fmtRatio(best), bestEngine, strings.Join(parts, ", "), formatNs(median(u.Go)), len(u.Go))
		t.Checks = append(t.Checks, c)
	}
	return t
}

// UserKernelRow is one row of the report's users' kernels table: a way of
// running one kernel and its time over Go's loop.
type UserKernelRow struct {
	Kernel, Variant, Time, Ratio string
}

// UserKernelRows are the users' kernels table: per kernel, Go's loop, the
// callback on every engine (the kernel alone and the whole call), and the
// raw loop on every raw variant.
func (r *Report) UserKernelRows() []UserKernelRow {
	var rows []UserKernelRow
	for i := range r.UserKernels {
		u := &r.UserKernels[i]
		name := fmt.Sprintf("`%s` (%s)", u.Kernel.Name, u.Kernel.Lang)
		if u.Kernel.Tuned {
			name += ", tuned"
		}
		if u.Err != nil {
			rows = append(rows, UserKernelRow{Kernel: name, Variant: "failed: " + strings.ReplaceAll(u.Err.Error(), "|", "/")})
			continue
		}
		rows = append(rows, UserKernelRow{name, "Go's loop", formatNs(median(u.GoWall)), "1x"})
		for _, e := range Engines() {
			rows = append(rows,
				UserKernelRow{"", "callbox " + e + ": the kernel (inside the export)", formatNs(median(u.Guest[e])), fmtRatio(u.GuestRatio(e))},
				UserKernelRow{"", "callbox " + e + ": the whole call (`InvokeInto`, cpu)", formatNs(median(u.Call[e])), fmtRatio(u.CallRatio(e))})
		}
		for _, v := range []string{RawWazero, RawWazeroMetered, RawWasmtimeEpoch, RawWasmtimePlain} {
			if len(u.Raw[v]) > 0 {
				rows = append(rows, UserKernelRow{"", "raw loop (loops.c), " + v, formatNs(median(u.Raw[v])), fmtRatio(u.RawRatio(v))})
			}
		}
	}
	return rows
}

// userKernelsReading is the report's paragraph on the users' kernels:
// for each, what the SDK, metering or epochs and the engine's code each
// cost, read from this run's ratios.
func (r *Report) userKernelsReading() []string {
	var out []string
	for i := range r.UserKernels {
		u := &r.UserKernels[i]
		if u.Err != nil {
			continue
		}
		var parts []string
		for _, e := range Engines() {
			raw := RawWazeroMetered
			if e == config.EngineWasmtime {
				raw = RawWasmtimeEpoch
			}
			parts = append(parts, fmt.Sprintf("on %s the callback's kernel takes %s Go's loop, the same loop raw in C, stoppable as callbox runs it, %s (so the SDK and its compiler's code cost %s)",
				e, fmtRatio(u.GuestRatio(e)), fmtRatio(u.RawRatio(raw)), fmtRatio(u.GuestRatio(e)/u.RawRatio(raw))))
		}
		s := fmt.Sprintf("**%s (%s, %s):** %s.", u.Kernel.Name, u.Kernel.Lang, u.Kernel.What, strings.Join(parts, "; "))
		s += fmt.Sprintf(" The price of being stoppable: metering makes wazero's raw loop %s of the unmetered one",
			fmtRatio(u.RawRatio(RawWazeroMetered)/u.RawRatio(RawWazero)))
		if len(u.Raw[RawWasmtimePlain]) > 0 {
			s += fmt.Sprintf(", epoch interruption makes wasmtime's %s of the same code without it", fmtRatio(u.RawRatio(RawWasmtimeEpoch)/u.RawRatio(RawWasmtimePlain)))
			s += fmt.Sprintf("; with neither, the engines' own code runs the loop at %s (wazero) and %s (wasmtime) of Go's", fmtRatio(u.RawRatio(RawWazero)), fmtRatio(u.RawRatio(RawWasmtimePlain)))
		}
		s += "."
		out = append(out, s)
	}
	return out
}

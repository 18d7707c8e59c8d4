package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/cmd/callbox/internal/termsafe"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/guests/prebuilt"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

// demoSource is the source file an embedded module was built from.
func (d demoCallback) source() string {
	switch d.lang {
	case "rust":
		return "guests/rust/examples/" + d.module + ".rs"
	case "assemblyscript":
		return "guests/assemblyscript/examples/" + d.module + ".ts"
	case "c-freestanding":
		return "guests/c/examples/" + d.module + ".c"
	case "go":
		return "guests/go/examples/" + d.module + "/main.go"
	}
	return "guests/wat/" + d.module + ".wat"
}

// demoCallback is one embedded module the demo loads.
type demoCallback struct {
	name, lang, module string
	export, signature  string // for modules without embedded signatures
	tweak              func(*config.Callback)
}

var demoCallbacks = []demoCallback{
	{name: "scale", lang: "rust", module: "scale"},
	{name: "softmax", lang: "assemblyscript", module: "softmax"},
	{name: "tap_print", lang: "assemblyscript", module: "tap_print"},
	{name: "matmul", lang: "c-freestanding", module: "matmul"},
	{name: "histogram", lang: "rust", module: "histogram"},
	{name: "checked", lang: "go", module: "checked", tweak: func(cb *config.Callback) {
		cb.WASI = config.WASIMinimal
		cb.Limits.MaxMemory = 256 << 20
	}},
	{name: "spin", lang: "wat", module: "hostile", export: "spin", signature: "(x: f32[n]) -> f32[n]",
		tweak: func(cb *config.Callback) { cb.Limits.Timeout = 50 * time.Millisecond }},
	{name: "hog", lang: "wat", module: "hostile", export: "hog", signature: "(x: f32[n]) -> f32[n]",
		tweak: func(cb *config.Callback) { cb.Limits.MaxMemory = 16 << 20 }},
	{name: "scribble", lang: "wat", module: "hostile", export: "scribble", signature: "(x: f32[n]) -> f32[n]"},
}

func newDemoCmd() *cobra.Command {
	var names []string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the shipped example callbacks in an ordered chain and contain hostile ones",
		Long: "demo loads example callbacks built from the Rust, AssemblyScript, C and Go SDKs (embedded\n" +
			"in this binary), runs them as an ordered chain on generated tensors, then calls hostile\n" +
			"callbacks and shows each one contained while the host keeps serving.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(names) == 0 {
				names = []string{config.EngineWazero}
				if engines.WasmtimeAvailable() {
					names = append(names, config.EngineWasmtime)
				}
			}
			w := cmd.OutOrStdout()
			fmt.Fprintln(w, "callbox demo: untrusted tensor callbacks in WebAssembly sandboxes")
			printDemoConfig(w)
			var failed []string
			for _, e := range names {
				if err := runDemo(cmd.Context(), w, e); err != nil {
					failed = append(failed, fmt.Sprintf("%s: %v", e, err))
				}
			}
			if len(failed) > 0 {
				return errors.New("demo failed: " + strings.Join(failed, "; "))
			}
			fmt.Fprint(w, demoNext)
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&names, "engine", nil, "engines to run on (default: every engine this build has)")
	return cmd
}

// logTap collects guest log lines so the report can show them.
type logTap struct {
	mu    sync.Mutex
	lines []string
}

// Enabled keeps guest log lines (info and above); the host's own debug
// records are not part of the report.
func (l *logTap) Enabled(_ context.Context, level slog.Level) bool { return level >= slog.LevelInfo }
func (l *logTap) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, termsafe.Text(r.Message)) // guest text
	return nil
}
func (l *logTap) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logTap) WithGroup(string) slog.Handler      { return l }
func (l *logTap) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.lines
	l.lines = nil
	return out
}

func runDemo(ctx context.Context, w io.Writer, engine string) error {
	logs := &logTap{}
	h, err := host.New(ctx, nil, host.WithLogger(slog.New(logs)))
	if err != nil {
		return err
	}
	defer h.Close(ctx)

	fmt.Fprintf(w, "\n== engine %s ==\n\nloaded callbacks:\n", engine)
	for _, d := range demoCallbacks {
		wasm, err := prebuilt.Module(d.lang, d.module)
		if err != nil {
			return err
		}
		cb := config.DefaultCallback()
		cb.Name, cb.Engine, cb.Export, cb.Signature = d.name, engine, d.export, d.signature
		cb.Module = fmt.Sprintf("guests/prebuilt/%s-%s.wasm", d.lang, d.module)
		if d.tweak != nil {
			d.tweak(&cb)
		}
		if err := h.LoadModule(ctx, cb, wasm); err != nil {
			return err
		}
		info, _ := h.Callback(d.name)
		fmt.Fprintf(w, "  %-10s %-15s %-40s %s…\n", d.name, d.lang, info.Signature, info.ID[:16])
	}

	// The ordered chain: 64 values through six callbacks written in four
	// languages.
	rng := rand.New(rand.NewPCG(7, 11))
	xs := make([]float32, 64)
	for i := range xs {
		xs[i] = rng.Float32()*8 - 4
	}
	x := abi.From(xs)
	ch := h.NewChain("demo")
	fmt.Fprintf(w, "\nordered chain %q on x = f32[64] drawn from [-4, 4):\n", ch.Name())
	start := time.Now()
	scaled := ch.Submit(ctx, "scale", x, abi.Scalar[float32](0.5))
	y, err := scaled.Wait(ctx)
	if err != nil {
		return err
	}
	step(w, scaled, "scale", "x * 0.5", y[0])
	// A host-side reshape is free: same bytes, new shape.
	grid := abi.Tensor{DType: abi.F32, Shape: abi.Shape{8, 8}, Data: y[0].Data}
	sm := ch.Submit(ctx, "softmax", grid)
	tap := ch.Submit(ctx, "tap_print", y[0])
	mm := ch.Submit(ctx, "matmul", grid, grid)
	hist := ch.Submit(ctx, "histogram", y[0], abi.From([]float32{-2, -1, 0, 1, 2}))
	probs, err := sm.Wait(ctx)
	if err != nil {
		return err
	}
	rows := abi.MustView[float32](probs[0])
	step(w, sm, "softmax", "over rows of y as f32[8,8]", probs[0], fmt.Sprintf("row 0 sums to %.6f", sum(rows[:8])))
	if _, err := tap.Wait(ctx); err != nil {
		return err
	}
	step(w, tap, "tap_print", "pass-through, logs a summary", y[0], "guest log: "+strings.Join(logs.take(), "; "))
	prod, err := mm.Wait(ctx)
	if err != nil {
		return err
	}
	step(w, mm, "matmul", "y·y as f32[8,8]", prod[0])
	counts, err := hist.Wait(ctx)
	if err != nil {
		return err
	}
	step(w, hist, "histogram", "y into bins at -2,-1,0,1,2", counts[0], fmt.Sprintf("counts %v", abi.MustView[int64](counts[0])))
	sq := ch.Submit(ctx, "checked", abi.From([]float32{0, 1, 2.25, 16}))
	roots, err := sq.Wait(ctx)
	if err != nil {
		return err
	}
	step(w, sq, "checked", "sqrt of [0 1 2.25 16]", roots[0], fmt.Sprintf("%v", abi.MustView[float32](roots[0])))
	if err := ch.Barrier(ctx); err != nil {
		return err
	}
	fmt.Fprintf(w, "  barrier: all 6 calls done in order, %v in total\n", time.Since(start).Round(time.Microsecond))

	// Hostile callbacks: each fails with a typed error; the host serves on.
	fmt.Fprintf(w, "\nhostile callbacks, each contained:\n")
	small := abi.From([]float32{1, 2, 3, 4})
	contained := 0
	hostile := []struct {
		name, what string
		kind       host.Kind
		inputs     []abi.Tensor
	}{
		{"spin", "infinite loop, timeout 50ms", host.Timeout, []abi.Tensor{small}},
		{"hog", "grows memory, max_memory 16MiB", host.MemoryLimit, []abi.Tensor{small}},
		{"scribble", "writes past its output buffer", host.ABIViolation, []abi.Tensor{small}},
		{"checked", "given a NaN", host.GuestError, []abi.Tensor{abi.From([]float32{1, float32(math.NaN())})}},
	}
	for _, c := range hostile {
		t0 := time.Now()
		_, err := h.Invoke(ctx, c.name, c.inputs...)
		took := time.Since(t0)
		var ce *host.CallbackError
		if !errors.As(err, &ce) || ce.Kind() != c.kind {
			return fmt.Errorf("%s: want a %s error, got %v", c.name, c.kind.Ident(), err)
		}
		contained++
		fmt.Fprintf(w, "  %-9s %-32s -> %-13s in %-9v %s\n", c.name, c.what, c.kind.Ident(), took.Round(time.Millisecond/10), termsafe.Text(err.Error()))
		// The same host keeps serving normal calls.
		if _, err := h.Invoke(ctx, "scale", small, abi.Scalar[float32](2)); err != nil {
			return fmt.Errorf("host stopped serving after %s: %w", c.name, err)
		}
	}
	fmt.Fprintf(w, "  after each failure the host served a normal scale call\n")

	// A chain with a failing call: later calls never run.
	bad := h.NewChain("doomed")
	f1 := bad.Submit(ctx, "scale", small, abi.Scalar[float32](2))
	f2 := bad.Submit(ctx, "spin", small)
	f3 := bad.Submit(ctx, "scale", small, abi.Scalar[float32](3))
	_, _ = f1.Wait(ctx)
	_, _ = f2.Wait(ctx)
	_, err3 := f3.Wait(ctx)
	if !errors.Is(err3, host.ErrChainFailed) {
		return fmt.Errorf("chain: call #3 should not have run, got %v", err3)
	}
	fmt.Fprintf(w, "\nchain %q with a hostile step:\n  #1 scale ok; #2 spin failed; #3 %v\n", bad.Name(), err3)
	fmt.Fprintf(w, "\nsummary (%s): 6 chained calls ok, %d hostile calls contained, host still serving\n", engine, contained)
	return nil
}

// printDemoConfig says where the demo's modules come from and prints the
// config it builds in code, as the YAML a user would write.
func printDemoConfig(w io.Writer) {
	fmt.Fprint(w, "\nThe modules are embedded in this binary (guests/prebuilt/*.wasm, built from the sources\n"+
		"named below by guests/build.sh). The config the demo uses, built in code, is this YAML\n"+
		"(run once per engine, with engine: set to it):\n\n  callbacks:\n")
	def := config.DefaultCallback()
	for _, d := range demoCallbacks {
		cb := def
		if d.tweak != nil {
			d.tweak(&cb)
		}
		fmt.Fprintf(w, "    %-12s # %s, from %s\n", d.name+":", d.lang, d.source())
		fmt.Fprintf(w, "      module: guests/prebuilt/%s-%s.wasm\n", d.lang, d.module)
		if d.export != "" {
			fmt.Fprintf(w, "      export: %s\n", d.export)
		}
		if d.signature != "" {
			fmt.Fprintf(w, "      signature: %q\n", d.signature)
		}
		if cb.Limits.Timeout != def.Limits.Timeout {
			fmt.Fprintf(w, "      timeout: %v\n", cb.Limits.Timeout)
		}
		if cb.Limits.MaxMemory != def.Limits.MaxMemory {
			fmt.Fprintf(w, "      max_memory: %s\n", config.FormatSize(cb.Limits.MaxMemory))
		}
		if cb.WASI != def.WASI {
			fmt.Fprintf(w, "      wasi: %s\n", cb.WASI)
		}
	}
	fmt.Fprintf(w, "\n  Everything else is the default: timeout %v, max_memory %s, isolation %s (callbox check -c\n"+
		"  config.yaml prints every effective limit).\n", def.Limits.Timeout, config.FormatSize(def.Limits.MaxMemory), def.Isolation)
}

// demoNext tells a user where to go after the demo.
const demoNext = `
Next: write your own callback. callbox new writes a project that builds and runs as it is:
  callbox new rust my_scale       (or assemblyscript, c, go; its README says how to build and run it)
The SDKs' READMEs go from a first callback to running it:
  guests/rust/README.md  guests/assemblyscript/README.md  guests/c/README.md  guests/go/README.md
then list it in a config file and try it from the shell:
  callbox check -c config.yaml
  callbox npy make x.npy 1 2 3
  callbox run -c config.yaml NAME --in x.npy
Pass-through signatures read "-> $x": the result is input x itself (abi/ABI.md).
`

func step(w io.Writer, f *host.Future, name, what string, out abi.Tensor, notes ...string) {
	st := f.Stats()
	line := fmt.Sprintf("  #%d %-10s %-30s -> %-10s %8v", f.Seq(), name, what, out.Type(), st.Wall.Round(time.Microsecond))
	if len(notes) > 0 {
		line += "  " + strings.Join(notes, "  ")
	}
	fmt.Fprintln(w, line)
}

func sum(v []float32) float64 {
	s := 0.0
	for _, x := range v {
		s += float64(x)
	}
	return s
}

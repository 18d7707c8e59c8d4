package lowering

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/config/configfile"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/tensorfile"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

const examplesDir = "../examples/programs"

var exampleNames = []string{"pipeline", "logging_loop", "cond_choose", "dead_calls", "trap_loop", "matmul_dot"}

func examplesConfig(t testing.TB) *config.Config {
	t.Helper()
	cfg, err := configfile.Load(filepath.Join(examplesDir, "callbacks.yaml"))
	require.NoError(t, err)
	return cfg
}

func engineNames() []string {
	if engines.WasmtimeAvailable() {
		return []string{config.EngineWazero, config.EngineWasmtime}
	}
	return []string{config.EngineWazero}
}

// newHost starts a host with the examples' callbacks on one engine.
func newHost(t testing.TB, engine string) *host.Host {
	t.Helper()
	cfg := examplesConfig(t)
	for i := range cfg.Callbacks {
		cfg.Callbacks[i].Engine = engine
	}
	ctx := context.Background()
	h, err := host.New(ctx, cfg, host.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close(ctx) })
	return h
}

func readExample(t testing.TB, name string) []byte {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(examplesDir, name+".cbir"))
	require.NoError(t, err)
	return src
}

func input(t testing.TB, file string) abi.Tensor {
	t.Helper()
	x, err := tensorfile.ReadFile(filepath.Join(examplesDir, "inputs", file))
	require.NoError(t, err)
	return x
}

func golden(t *testing.T, file, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", file)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./lowering -run TestGolden -update to create it")
	assert.Equal(t, string(want), got, "golden file %s differs (rerun with -update after checking the change)", path)
}

// TestGolden compares the IR after the passes and the emitted StableHLO of
// every example with the committed files, and checks that emission is
// deterministic and the IR text round-trips.
func TestGolden(t *testing.T) {
	cat, err := ConfigCatalog(examplesConfig(t))
	require.NoError(t, err)
	for _, name := range exampleNames {
		t.Run(name, func(t *testing.T) {
			src := readExample(t, name)
			p, err := Compile(name+".cbir", src, cat, Options{})
			require.NoError(t, err)
			ir := Print(p)
			golden(t, name+".ir", ir)
			mlir, err := Emit(p, cat)
			require.NoError(t, err)
			golden(t, name+".mlir", mlir)

			// Byte-identical from a fresh compile.
			p2, err := Compile(name+".cbir", src, cat, Options{})
			require.NoError(t, err)
			mlir2, err := Emit(p2, cat)
			require.NoError(t, err)
			assert.Equal(t, mlir, mlir2)

			// The IR after the passes is itself a valid program: it parses,
			// checks, prints identically, and lowering it again changes
			// nothing.
			q, err := Parse("after.ir", []byte(ir))
			require.NoError(t, err)
			require.NoError(t, Check(q, cat))
			assert.Equal(t, ir, Print(q))
			require.NoError(t, Lower(q, Options{}))
			assert.Equal(t, ir, Print(q))
			mlir3, err := Emit(q, cat)
			require.NoError(t, err)
			assert.Equal(t, mlir, mlir3)
		})
	}
}

// TestContentIDs checks that the ids the config catalog computes (used in
// the goldens) are the ids a running host gives its callbacks, and that a
// different module gives a different id in the emitted text.
func TestContentIDs(t *testing.T) {
	cat, err := ConfigCatalog(examplesConfig(t))
	require.NoError(t, err)
	h := newHost(t, config.EngineWazero)
	hc := HostCatalog(h)
	for _, n := range cat.Names() {
		a, _ := cat.Callee(n)
		b, ok := hc.Callee(n)
		require.True(t, ok, n)
		assert.Equal(t, b.ID, a.ID, n)
		assert.True(t, abi.IsCallbackID(a.ID), a.ID)
	}

	p, err := Compile("dead_calls.cbir", readExample(t, "dead_calls"), cat, Options{})
	require.NoError(t, err)
	before, err := Emit(p, cat)
	require.NoError(t, err)
	scale, _ := cat.Callee("scale")
	changed := StaticCatalog{}
	for _, n := range cat.Names() {
		changed[n], _ = cat.Callee(n)
	}
	var otherModule [32]byte
	otherModule[0] = 1
	changed["scale"] = Callee{Name: "scale", ID: abi.CallbackID(otherModule, "scale", scale.Signature), Signature: scale.Signature}
	after, err := Emit(p, changed)
	require.NoError(t, err)
	assert.NotEqual(t, before, after)
	assert.Contains(t, before, scale.ID)
	assert.NotContains(t, after, scale.ID)
}

type trace struct{ events []Event }

func (tr *trace) add(e Event) { tr.events = append(tr.events, e) }

func (tr *trace) names() []string {
	var out []string
	for _, e := range tr.events {
		out = append(out, e.Callback)
	}
	return out
}

func compileExample(t testing.TB, h *host.Host, name string, opts Options) *Program {
	t.Helper()
	p, err := Compile(name+".cbir", readExample(t, name), HostCatalog(h), opts)
	require.NoError(t, err)
	return p
}

func evalExample(t testing.TB, h *host.Host, name string, opts Options, inputs ...abi.Tensor) ([]abi.Tensor, *trace, error) {
	t.Helper()
	tr := &trace{}
	ev, err := NewEvaluator(h, compileExample(t, h, name, opts), EvalOptions{Trace: tr.add})
	require.NoError(t, err)
	out, err := ev.Run(context.Background(), inputs...)
	return out, tr, err
}

func softmaxRows(x []float32, cols int) []float64 {
	out := make([]float64, len(x))
	for r := 0; r < len(x)/cols; r++ {
		row := x[r*cols : (r+1)*cols]
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, float64(v))
		}
		s := 0.0
		for _, v := range row {
			s += math.Exp(float64(v) - m)
		}
		for i, v := range row {
			out[r*cols+i] = math.Exp(float64(v)-m) / s
		}
	}
	return out
}

func assertClose(t *testing.T, want []float64, got abi.Tensor, tol float64) {
	t.Helper()
	g := abi.MustView[float32](got)
	require.Len(t, g, len(want))
	for i := range want {
		assert.InDelta(t, want[i], float64(g[i]), tol, "element %d", i)
	}
}

// TestExamplesEval runs every example with the evaluator on every engine
// and checks results and effects against values computed here.
func TestExamplesEval(t *testing.T) {
	for _, engine := range engineNames() {
		t.Run(engine, func(t *testing.T) {
			h := newHost(t, engine)

			t.Run("pipeline", func(t *testing.T) {
				x := input(t, "pipeline.x.npy")
				out, tr, err := evalExample(t, h, "pipeline", Options{}, x, input(t, "pipeline.factor.npy"))
				require.NoError(t, err)
				xs := abi.MustView[float32](x)
				half := make([]float32, len(xs))
				for i, v := range xs {
					half[i] = v * 0.5
				}
				assertClose(t, softmaxRows(half, 8), out[0], 1e-6)
				assertClose(t, []float64{1, 1, 1, 1}, out[1], 1e-5)
				assert.Equal(t, []string{"tap_print", "tap_print"}, tr.names())
				assert.True(t, tr.events[0].Tap && !tr.events[0].Ordered)
			})

			t.Run("logging_loop", func(t *testing.T) {
				x := input(t, "logging_loop.x.npy")
				out, tr, err := evalExample(t, h, "logging_loop", Options{}, x)
				require.NoError(t, err)
				want := make([]float64, 8)
				for i, v := range abi.MustView[float32](x) {
					want[i] = float64(v) * 8
				}
				assertClose(t, want, out[0], 0)
				assert.Equal(t, []int32{3}, abi.MustView[int32](out[1]))
				require.Len(t, tr.events, 3)
				for i, e := range tr.events {
					assert.Equal(t, "log", e.Chain)
					assert.True(t, e.Ordered)
					// Iteration i logs x * 2^i: the order is the loop's.
					assert.InDelta(t, float64(abi.MustView[float32](x)[0])*math.Pow(2, float64(i)), float64(abi.MustView[float32](e.Inputs[0])[0]), 0)
				}
			})

			t.Run("cond_choose", func(t *testing.T) {
				x := input(t, "cond_choose.x.npy")
				out, tr, err := evalExample(t, h, "cond_choose", Options{}, x)
				require.NoError(t, err)
				assertClose(t, softmaxRows(abi.MustView[float32](x), 4), out[0], 1e-6)
				assert.Empty(t, tr.events, "the taken branch has no effect")

				neg := input(t, "cond_choose.neg.npy")
				out, tr, err = evalExample(t, h, "cond_choose", Options{}, neg)
				require.NoError(t, err)
				var want []float64
				for _, v := range abi.MustView[float32](neg) {
					want = append(want, -float64(v))
				}
				assertClose(t, want, out[0], 0)
				assert.Equal(t, []string{"tap_print"}, tr.names())
				assert.True(t, tr.events[0].Ordered)
			})

			t.Run("dead_calls", func(t *testing.T) {
				x := input(t, "dead_calls.x.npy")
				out, tr, err := evalExample(t, h, "dead_calls", Options{}, x)
				require.NoError(t, err)
				var want []float64
				for _, v := range abi.MustView[float32](x) {
					want = append(want, 4*float64(v))
				}
				assertClose(t, want, out[0], 1e-6)
				assert.Equal(t, []string{"tap_print"}, tr.names(), "the unused io_call still runs")

				// With a negative element checked would refuse; it is dead,
				// so the optimized program succeeds and the unoptimized one
				// fails in checked.
				bad := abi.From([]float32{-1, 1, 2, 3, 4, 5, 6, 7})
				_, _, err = evalExample(t, h, "dead_calls", Options{}, bad)
				require.NoError(t, err)
				_, _, err = evalExample(t, h, "dead_calls", Options{NoDCE: true}, bad)
				var ce *host.CallbackError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, "checked", ce.Callback)
			})

			t.Run("trap_loop", func(t *testing.T) {
				out, tr, err := evalExample(t, h, "trap_loop", Options{}, input(t, "trap_loop.x.npy"))
				require.Error(t, err)
				assert.Nil(t, out)
				var ce *host.CallbackError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, "checked", ce.Callback)
				assert.Equal(t, uint64(8), ce.Seq, "the 8th ordered call on the chain failed")
				assert.Contains(t, ce.GuestMessage, "-0.5 is negative")
				var ee *EvalError
				require.ErrorAs(t, err, &ee)
				assert.Equal(t, "trap_loop.cbir:16:13", ee.Pos.String())
				// Four iterations of (tap_print, checked); the last checked
				// failed and nothing ran after it.
				assert.Equal(t, strings.Repeat("tap_print checked ", 4), strings.Join(tr.names(), " ")+" ")
				for i, e := range tr.events {
					if i < len(tr.events)-1 {
						assert.NoError(t, e.Err)
					}
				}
				assert.Error(t, tr.events[len(tr.events)-1].Err)
			})

			t.Run("matmul_dot", func(t *testing.T) {
				a, b := input(t, "matmul_dot.a.npy"), input(t, "matmul_dot.b.npy")
				out, _, err := evalExample(t, h, "matmul_dot", Options{}, a, b)
				require.NoError(t, err)
				av, bv := abi.MustView[float32](a), abi.MustView[float32](b)
				var want []float64
				for i := 0; i < 2; i++ {
					for j := 0; j < 2; j++ {
						s := 0.0
						for k := 0; k < 3; k++ {
							s += float64(av[i*3+k]) * float64(bv[k*2+j])
						}
						want = append(want, s)
					}
				}
				assertClose(t, want, out[0], 1e-6)
				assertClose(t, []float64{0, 0, 0, 0}, out[1], 1e-6)
			})
		})
	}
}

// TestEvalStopsOrderedCallsAfterFailure checks the failure rule directly:
// with the failing call in the middle of a chain, the later ordered call
// does not run, and the error is the callback's typed error.
func TestEvalStopsOrderedCallsAfterFailure(t *testing.T) {
	h := newHost(t, config.EngineWazero)
	src := `func @f(%x: f32[2]) -> f32[2] {
  %a = io_call @tap_print(%x) ordered : f32[2]
  %b = io_call @checked(%x) ordered : f32[2]
  %c = io_call @tap_print(%b) ordered : f32[2]
  return %c
}
`
	p, err := Compile("f.cbir", []byte(src), HostCatalog(h), Options{})
	require.NoError(t, err)
	tr := &trace{}
	ev, err := NewEvaluator(h, p, EvalOptions{Trace: tr.add})
	require.NoError(t, err)
	_, err = ev.Run(context.Background(), abi.From([]float32{-1, 4}))
	var ce *host.CallbackError
	require.ErrorAs(t, err, &ce)
	assert.True(t, errors.Is(err, host.GuestError), "kind: %v", ce.Kind())
	assert.Equal(t, []string{"tap_print", "checked"}, tr.names())

	out, err := ev.Run(context.Background(), abi.From([]float32{9, 4}))
	require.NoError(t, err)
	assert.Equal(t, []float32{3, 2}, abi.MustView[float32](out[0]))
}

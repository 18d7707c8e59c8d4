package guests_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/guests/reference"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/tensorfile"
	"github.com/seed4b3e0ccb/callbox/internal/testknob"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

// The conformance suite: one set of vectors (testdata/conformance, written
// once by -update from the Go reference implementations) run against every
// example callback, in every guest language, on both engines, with buffers
// 64-byte aligned and again at the ABI's minimum 16-byte alignment.
//
// Tolerances: |got - want| <= atol + rtol*|want|, per example below.

var update = flag.Bool("update", false, "regenerate testdata/conformance from the Go reference implementations")

// langs are the guest builds under guests/build; "c" and "go" import WASI.
var langs = []struct {
	name string
	wasi bool
}{
	{"rust", false},
	{"assemblyscript", false},
	{"c", true},
	{"c-freestanding", false},
	{"go", true},
}

var examples = []string{"scale", "softmax", "matmul", "histogram", "histogram_s32", "tap_print", "checked"}

// simdExamples are the simd128 variants of scale and matmul (same
// signatures, same results), built by every SDK but Go: Go's wasip1 port
// emits no SIMD instructions.
var simdExamples = map[string]string{"scale_simd": "scale", "matmul_simd": "matmul"}

// examplesOf lists the examples a guest build has.
func examplesOf(lang string) []string {
	if lang == "go" {
		return examples
	}
	out := slices.Clone(examples)
	for ex := range simdExamples {
		out = append(out, ex)
	}
	slices.Sort(out)
	return out
}

type tolerance struct{ rtol, atol float64 }

var tolerances = map[string]tolerance{
	"scale":   {1e-5, 1e-6},
	"checked": {1e-5, 1e-6},
	"softmax": {1e-5, 1e-6},
	"matmul":  {1e-4, 1e-4},
	// The SIMD variants are held to their scalar examples' tolerances here;
	// TestSIMDMatchesScalar checks they are bit for bit equal besides.
	"scale_simd":  {1e-5, 1e-6},
	"matmul_simd": {1e-4, 1e-4},
}

// vector is one conformance case. Inputs live in testdata as in<i>.npy and
// expected outputs as out<i>.npy, except shapes .npy cannot hold (an empty
// leading dimension of a rank-2 array), which are built in code.
type vector struct {
	name    string // directory under testdata/conformance
	example string
	dir     string // the directory, when not name (a SIMD variant's copy of its scalar example's vector)
	// inline inputs and outputs for shapes npyio cannot write
	inline    []abi.Tensor
	inlineOut []abi.Tensor
	wantError string // substring of the guest message; outputs unused
	wantLog   string // substring of a guest log line
}

var vectors = []vector{
	{name: "scale_basic", example: "scale"},
	{name: "scale_empty", example: "scale"},
	{name: "scale_1000", example: "scale"},
	{name: "softmax_3x7", example: "softmax"},
	{name: "softmax_1x1", example: "softmax"},
	{name: "softmax_2x0", example: "softmax"},
	{name: "softmax_stable", example: "softmax"},
	{name: "softmax_0x4", example: "softmax",
		inline: []abi.Tensor{abi.From([]float32{}, 0, 4)}, inlineOut: []abi.Tensor{abi.From([]float32{}, 0, 4)}},
	{name: "matmul_3x5x2", example: "matmul"},
	{name: "matmul_1x1x1", example: "matmul"},
	{name: "matmul_64", example: "matmul"},
	{name: "matmul_k0", example: "matmul",
		inline:    []abi.Tensor{abi.From([]float32{}, 2, 0), abi.From([]float32{}, 0, 3)},
		inlineOut: []abi.Tensor{abi.From(make([]float32, 6), 2, 3)}},
	{name: "histogram_basic", example: "histogram"},
	{name: "histogram_empty", example: "histogram"},
	{name: "histogram_s32_basic", example: "histogram_s32"},
	{name: "tap_print_basic", example: "tap_print", wantLog: "tap_print: n=4"},
	{name: "tap_print_empty", example: "tap_print", wantLog: "tap_print: n=0"},
	{name: "checked_ok", example: "checked"},
	{name: "checked_nan", example: "checked", wantError: "x[1] is NaN"},
	{name: "checked_negative", example: "checked", wantError: " is negative; checked computes sqrt, which needs x >= 0"},
	// Lengths that are not a multiple of the SIMD variants' four lanes:
	// all tail (3), one vector and a tail (7), and n = 7 columns in matmul.
	{name: "scale_3", example: "scale"},
	{name: "scale_7", example: "scale"},
	{name: "scale_1003", example: "scale"},
	{name: "matmul_5x3x7", example: "matmul"},
	{name: "matmul_2x9x13", example: "matmul"},
}

// allVectors are the vectors plus, for each vector of an example with a
// SIMD variant, the same vector run against the variant.
func allVectors() []vector {
	out := slices.Clone(vectors)
	for _, v := range vectors {
		for simd, scalar := range simdExamples {
			if v.example == scalar {
				c := v
				c.dir, c.name, c.example = v.name, simd+"/"+v.name, simd
				out = append(out, c)
			}
		}
	}
	return out
}

// generate writes the vectors from the Go reference implementations. The
// random inputs come from a fixed seed, so regenerating is a no-op.
func generate(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	randf := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = rng.Float32()*2 - 1
		}
		return out
	}
	nan := float32(math.NaN())
	type io struct{ in, out []abi.Tensor }
	mat := func(m, k, n int) io {
		a, b := randf(m*k), randf(k*n)
		return io{[]abi.Tensor{abi.From(a, int64(m), int64(k)), abi.From(b, int64(k), int64(n))},
			[]abi.Tensor{abi.From(reference.Matmul(a, b, m, k, n), int64(m), int64(n))}}
	}
	soft := func(x []float32, b, n int) io {
		return io{[]abi.Tensor{abi.From(x, int64(b), int64(n))}, []abi.Tensor{abi.From(reference.Softmax(x, b, n), int64(b), int64(n))}}
	}
	scale := func(x []float32, f float32) io {
		return io{[]abi.Tensor{abi.From(x), abi.Scalar(f)}, []abi.Tensor{abi.From(reference.Scale(x, f))}}
	}
	hist := []float32{-5, 0, 0.5, 1, 1.5, nan, 2, 2.5, 3, 10, -0.1}
	edges := []float32{0, 1, 2, 3}
	histS := []int32{-5, 0, 1, 2, 2, 3, 9, 100, -1}
	edgesS := []int32{0, 2, 4, 8}
	ok, _ := reference.Checked([]float32{0, 1, 4, 9, 2})
	sets := map[string]io{
		"scale_basic":     scale([]float32{1, 2, 3, 4.5, -1}, 2.5),
		"scale_empty":     scale([]float32{}, 3),
		"scale_1000":      scale(randf(1000), -0.5),
		"softmax_3x7":     soft(randf(21), 3, 7),
		"softmax_1x1":     soft([]float32{42}, 1, 1),
		"softmax_2x0":     soft([]float32{}, 2, 0),
		"softmax_stable":  soft([]float32{1000, 1001, 1002, -1000, 0, 1000}, 2, 3),
		"matmul_3x5x2":    mat(3, 5, 2),
		"matmul_1x1x1":    mat(1, 1, 1),
		"matmul_64":       mat(64, 64, 64),
		"histogram_basic": {[]abi.Tensor{abi.From(hist), abi.From(edges)}, []abi.Tensor{abi.From(reference.Histogram(hist, edges))}},
		"histogram_empty": {[]abi.Tensor{abi.From([]float32{}), abi.From(edges)}, []abi.Tensor{abi.From(reference.Histogram([]float32{}, edges))}},
		"histogram_s32_basic": {[]abi.Tensor{abi.From(histS), abi.From(edgesS)},
			[]abi.Tensor{abi.From(reference.Histogram(histS, edgesS))}},
		"tap_print_basic":  {[]abi.Tensor{abi.From([]float32{1, 2, 3, 4})}, []abi.Tensor{abi.From([]float32{1, 2, 3, 4})}},
		"tap_print_empty":  {[]abi.Tensor{abi.From([]float32{})}, []abi.Tensor{abi.From([]float32{})}},
		"checked_ok":       {[]abi.Tensor{abi.From([]float32{0, 1, 4, 9, 2})}, []abi.Tensor{abi.From(ok)}},
		"checked_nan":      {[]abi.Tensor{abi.From([]float32{1, nan, -1})}, nil},
		"checked_negative": {[]abi.Tensor{abi.From([]float32{1, 4, -1})}, nil},
		// Drawn last, so the vectors above keep their random inputs.
		"scale_3":       scale(randf(3), 1.75),
		"scale_7":       scale(randf(7), -3),
		"scale_1003":    scale(randf(1003), 0.1),
		"matmul_5x3x7":  mat(5, 3, 7),
		"matmul_2x9x13": mat(2, 9, 13),
	}
	for name, set := range sets {
		dir := filepath.Join("testdata", "conformance", name)
		require.NoError(t, os.RemoveAll(dir))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		for i, in := range set.in {
			require.NoError(t, tensorfile.WriteFile(filepath.Join(dir, fmt.Sprintf("in%d.npy", i)), in))
		}
		for i, out := range set.out {
			require.NoError(t, tensorfile.WriteFile(filepath.Join(dir, fmt.Sprintf("out%d.npy", i)), out))
		}
	}
}

func load(t *testing.T, v vector) (ins, outs []abi.Tensor) {
	if v.inline != nil {
		return v.inline, v.inlineOut
	}
	name := v.name
	if v.dir != "" {
		name = v.dir
	}
	dir := filepath.Join("testdata", "conformance", name)
	for i := 0; ; i++ {
		p := filepath.Join(dir, fmt.Sprintf("in%d.npy", i))
		if _, err := os.Stat(p); err != nil {
			break
		}
		tn, err := tensorfile.ReadFile(p)
		require.NoError(t, err)
		ins = append(ins, tn)
	}
	for i := 0; ; i++ {
		p := filepath.Join(dir, fmt.Sprintf("out%d.npy", i))
		if _, err := os.Stat(p); err != nil {
			break
		}
		tn, err := tensorfile.ReadFile(p)
		require.NoError(t, err)
		outs = append(outs, tn)
	}
	require.NotEmpty(t, ins, "vector %s has no inputs; run go test ./guests -run TestConformance -update", v.name)
	return ins, outs
}

func selectedLangs(t *testing.T) []string {
	var out []string
	want := os.Getenv("CALLBOX_LANGS")
	for _, l := range langs {
		if want == "" || slices.Contains(strings.Split(want, ","), l.name) {
			out = append(out, l.name)
		}
	}
	return out
}

func engineNames() []string {
	if engines.WasmtimeAvailable() {
		return []string{config.EngineWazero, config.EngineWasmtime}
	}
	return []string{config.EngineWazero}
}

// invokeZeroCopy places every input in the guest's memory with the
// zero-copy API and copies the outputs (views) out before releasing.
func invokeZeroCopy(t *testing.T, h *host.Host, name string, ins []abi.Tensor) ([]abi.Tensor, error) {
	ctx := context.Background()
	s, err := h.NewSession(ctx, name)
	require.NoError(t, err)
	defer s.Release(ctx)
	placed := make([]abi.Tensor, len(ins))
	for i, in := range ins {
		placed[i], err = s.Alloc(ctx, in.DType, in.Shape...)
		require.NoError(t, err)
		copy(placed[i].Data, in.Data)
	}
	outs, _, err := s.Invoke(ctx, placed...)
	if err != nil {
		return nil, err
	}
	kept := make([]abi.Tensor, len(outs))
	for i, o := range outs {
		kept[i] = abi.Tensor{DType: o.DType, Shape: o.Shape, Data: slices.Clone(o.Data)}
	}
	return kept, nil
}

// logSink records guest log lines.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (s *logSink) Enabled(context.Context, slog.Level) bool { return true }
func (s *logSink) Handle(_ context.Context, r slog.Record) error {
	text, ok := host.GuestLogText(r)
	if !ok {
		return nil // the host's own lines
	}
	s.mu.Lock()
	s.lines = append(s.lines, text)
	s.mu.Unlock()
	return nil
}
func (s *logSink) WithAttrs([]slog.Attr) slog.Handler { return s }
func (s *logSink) WithGroup(string) slog.Handler      { return s }
func (s *logSink) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.lines
	s.lines = nil
	return out
}

func newHost(t *testing.T, lang, engine string, skewed bool, cacheDir string, sink *logSink) *host.Host {
	ctx := context.Background()
	if skewed {
		ctx = testknob.WithSkewedBuffers(ctx)
	}
	h, err := host.New(ctx, nil, host.WithLogger(slog.New(sink)), host.WithCacheDir(cacheDir))
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	wasi := false
	for _, l := range langs {
		if l.name == lang {
			wasi = l.wasi
		}
	}
	for _, ex := range examplesOf(lang) {
		path := filepath.Join("build", lang, ex+".wasm")
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("%s is missing: run `make guests` (or restrict CALLBOX_LANGS)", path)
		}
		cb := config.DefaultCallback()
		cb.Name, cb.Module, cb.Engine = ex, path, engine
		cb.Limits.MaxMemory = 256 << 20
		if wasi {
			cb.WASI = config.WASIMinimal
		}
		require.NoError(t, h.Load(context.Background(), cb), "%s/%s", lang, ex)
	}
	return h
}

func TestConformance(t *testing.T) {
	if *update {
		generate(t)
	}
	cacheDir := t.TempDir()
	for _, lang := range selectedLangs(t) {
		for _, engine := range engineNames() {
			// align64: the host's usual frame. align16: buffers at the
			// ABI's minimum alignment. zerocopy: inputs allocated in guest
			// memory outside the frame (host.Session), outputs read in place.
			for _, mode := range []string{"align64", "align16", "zerocopy"} {
				t.Run(fmt.Sprintf("%s/%s/%s", lang, engine, mode), func(t *testing.T) {
					sink := &logSink{}
					h := newHost(t, lang, engine, mode == "align16", cacheDir, sink)
					for _, v := range allVectors() {
						if !slices.Contains(examplesOf(lang), v.example) {
							continue // no SIMD variant in this language
						}
						t.Run(v.name, func(t *testing.T) { runVector(t, h, sink, v, mode == "zerocopy") })
					}
				})
			}
		}
	}
}

func runVector(t *testing.T, h *host.Host, sink *logSink, v vector, zeroCopy bool) {
	ins, want := load(t, v)
	sink.take()
	var got []abi.Tensor
	var err error
	if zeroCopy {
		got, err = invokeZeroCopy(t, h, v.example, ins)
	} else {
		got, err = h.Invoke(context.Background(), v.example, ins...)
	}
	logs := sink.take()
	if v.wantError != "" {
		var ce *host.CallbackError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, host.GuestError, ce.Kind())
		assert.Equal(t, abi.StatusInvalidArgument, ce.Status)
		assert.Contains(t, ce.GuestMessage, v.wantError)
		return
	}
	require.NoError(t, err)
	require.Len(t, got, len(want))
	for i := range want {
		assert.Equal(t, want[i].DType, got[i].DType, "output %d dtype", i)
		assert.Equal(t, want[i].Shape, got[i].Shape, "output %d shape", i)
		if want[i].DType == abi.F32 {
			tol := tolerances[v.example]
			w, g := abi.MustView[float32](want[i]), abi.MustView[float32](got[i])
			for j := range w {
				diff := math.Abs(float64(g[j]) - float64(w[j]))
				if diff > tol.atol+tol.rtol*math.Abs(float64(w[j])) {
					t.Fatalf("output %d element %d: got %g, want %g (rtol %g, atol %g)", i, j, g[j], w[j], tol.rtol, tol.atol)
				}
			}
		} else {
			assert.Equal(t, want[i].Data, got[i].Data, "output %d", i)
		}
	}
	if v.wantLog != "" {
		n := 0
		for _, l := range logs {
			if strings.Contains(l, v.wantLog) {
				n++
			}
		}
		assert.Equal(t, 1, n, "want exactly one log line containing %q, got %q", v.wantLog, logs)
	}
}

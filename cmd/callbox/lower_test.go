package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/internal/tensorfile"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

const programs = "../../examples/programs"

var programNames = []string{"pipeline", "logging_loop", "cond_choose", "dead_calls", "trap_loop", "matmul_dot"}

func prog(name string) string { return filepath.Join(programs, name+".cbir") }

// TestLowerExamples: callbox lower prints exactly the golden StableHLO and
// IR of every example.
func TestLowerExamples(t *testing.T) {
	cfg := filepath.Join(programs, "callbacks.yaml")
	for _, name := range programNames {
		for _, emit := range []string{"stablehlo", "ir"} {
			code, stdout, stderr := cli(t, "lower", prog(name), "-c", cfg, "--emit", emit)
			require.Equal(t, exitOK, code, stderr)
			ext := map[string]string{"stablehlo": ".mlir", "ir": ".ir"}[emit]
			want, err := os.ReadFile(filepath.Join("../../lowering/testdata/golden", name+ext))
			require.NoError(t, err)
			assert.Equal(t, string(want), stdout, "%s --emit %s", name, emit)
		}
	}
	out := filepath.Join(t.TempDir(), "p.mlir")
	code, stdout, stderr := cli(t, "lower", prog("pipeline"), "-c", cfg, "-o", out)
	require.Equal(t, exitOK, code, stderr)
	assert.Empty(t, stdout)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Contains(t, string(b), "stablehlo.custom_call @callbox(")
}

func TestLowerErrors(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(programs, "callbacks.yaml")
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
		return p
	}
	syntax := write("syntax.cbir", "func @f(%x: f32[4]) -> f32[4] {\n  %y = add %x %x : f32[4]\n  return %y\n}\n")
	typed := write("typed.cbir", "func @f(%x: f32[4]) -> f32[4] {\n  %y = call @scale(%x, %x) : f32[4]\n  return %y\n}\n")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"lower", syntax, "-c", cfg}, syntax + `:2:15: expected 2 operands, got 1`},
		{[]string{"lower", typed, "-c", cfg}, typed + `:2:8: call @scale: argument 1 (factor): expected f32[], got f32[4]`},
		{[]string{"lower", prog("pipeline")}, "lower: -c CONFIG is required"},
		{[]string{"lower", prog("pipeline"), "-c", cfg, "--emit", "hlo"}, `--emit "hlo": want stablehlo or ir`},
		{[]string{"lower", filepath.Join(dir, "missing.cbir"), "-c", cfg}, "no such file or directory"},
		{[]string{"exec", typed, "-c", cfg, "--in", "x.npy", "--out", "y.npy"}, "no such file"},
	}
	for _, c := range cases {
		code, _, stderr := cli(t, c.args...)
		assert.Equal(t, exitUsage, code, "%v: %s", c.args, stderr)
		assert.Contains(t, stderr, c.want, c.args)
	}
}

func TestExecExamples(t *testing.T) {
	cfg := filepath.Join(programs, "callbacks.yaml")
	in := func(name string) string { return filepath.Join(programs, "inputs", name) }
	engineNames := []string{"wazero"}
	if engines.WasmtimeAvailable() {
		engineNames = append(engineNames, "wasmtime")
	}
	for _, engine := range engineNames {
		t.Run(engine, func(t *testing.T) {
			dir := t.TempDir()
			out := func(name string) string { return filepath.Join(dir, name) }
			runs := map[string][]string{
				"pipeline":     {"--in", in("pipeline.x.npy"), "--in", in("pipeline.factor.npy"), "--out", out("probs.npy"), "--out", out("rowsum.npy")},
				"logging_loop": {"--in", in("logging_loop.x.npy"), "--out", out("y.npy"), "--out", out("n.npy")},
				"cond_choose":  {"--in", in("cond_choose.neg.npy"), "--out", out("c.npy")},
				"dead_calls":   {"--in", in("dead_calls.x.npy"), "--out", out("d.npy")},
				"matmul_dot":   {"--in", in("matmul_dot.a.npy"), "--in", in("matmul_dot.b.npy"), "--out", out("m.npy"), "--out", out("diff.npy")},
			}
			for name, args := range runs {
				code, _, stderr := cli(t, append([]string{"exec", prog(name), "-c", cfg, "--engine", engine}, args...)...)
				require.Equal(t, exitOK, code, "%s: %s", name, stderr)
			}
			read := func(name string) abi.Tensor {
				x, err := tensorfile.ReadFile(out(name))
				require.NoError(t, err)
				return x
			}
			for _, s := range abi.MustView[float32](read("rowsum.npy")) {
				assert.InDelta(t, 1, s, 1e-5)
			}
			assert.Equal(t, []int32{3}, abi.MustView[int32](read("n.npy")))
			assert.Equal(t, []float32{-28, -20, -12, -4, 4, 12, 20, 28}, abi.MustView[float32](read("y.npy")))
			assert.Equal(t, []float32{1, 2, 3, 4, -1, -0.5, 0, 2}, abi.MustView[float32](read("c.npy")))
			assert.Equal(t, []float32{0, 0, 0, 0}, abi.MustView[float32](read("diff.npy")))

			// The failing loop: exit 3, the op's position and the callback's
			// error on stderr, the effects up to the failure and none after,
			// and no output file.
			code, _, stderr := cli(t, "exec", prog("trap_loop"), "-c", cfg, "--engine", engine, "--in", in("trap_loop.x.npy"), "--out", out("t.npy"), "--trace")
			assert.Equal(t, exitCallback, code, stderr)
			assert.Contains(t, stderr, `trap_loop.cbir:16:13: io_call @checked: callback "checked" (chain "main" #8) failed: guest returned INVALID_ARGUMENT: x[0] = -0.5 is negative`)
			assert.Equal(t, 4, countLines(stderr, "io_call @checked (chain main)"))
			assert.Equal(t, 1, countLines(stderr, "io_call @checked (chain main): failed"))
			_, err := os.Stat(out("t.npy"))
			assert.True(t, os.IsNotExist(err))
		})
	}
}

func TestExecWrongInputs(t *testing.T) {
	cfg := filepath.Join(programs, "callbacks.yaml")
	dir := t.TempDir()
	x := filepath.Join(dir, "x.npy")
	require.NoError(t, tensorfile.WriteFile(x, abi.From([]float32{1, 2, 3})))
	code, _, stderr := cli(t, "exec", prog("dead_calls"), "-c", cfg, "--in", x, "--out", filepath.Join(dir, "y.npy"))
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "input 0 (%x): expected f32[8], got f32[3]")
	code, _, stderr = cli(t, "exec", prog("dead_calls"), "-c", cfg, "--in", x)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "@dead_calls has 1 results, 0 --out files were given")
}

func countLines(s, sub string) int {
	n := 0
	for _, l := range splitLines(s) {
		if len(l) >= len(sub) && contains(l, sub) {
			n++
		}
	}
	return n
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

package lowering

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// mlirOpt finds an MLIR parser (Debian's mlir-*-tools), or "".
func mlirOpt() string {
	for _, name := range []string{"mlir-opt", "mlir-opt-19", "mlir-opt-18", "mlir-opt-17", "mlir-opt-16", "mlir-opt-15"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

var (
	prettyConstant   = regexp.MustCompile(`^(\s*%\S+ = )stablehlo\.constant (dense<.*>) : (\S+)$`)
	prettyCustomCall = regexp.MustCompile(`^(\s*(?:%\S+ = )?)stablehlo\.custom_call @(\w+)\((.*?)\) \{(.*)\} : (\(.*\)) -> (.*)$`)
)

// toGeneric rewrites the two pretty-printed StableHLO forms the emitter
// uses (constant, custom_call) into MLIR's generic form, so that a plain
// mlir-opt without the StableHLO dialect can parse the whole module.
func toGeneric(text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if m := prettyConstant.FindStringSubmatch(l); m != nil {
			lines[i] = m[1] + `"stablehlo.constant"() {value = ` + m[2] + " : " + m[3] + "} : () -> " + m[3]
		} else if m := prettyCustomCall.FindStringSubmatch(l); m != nil {
			lines[i] = m[1] + `"stablehlo.custom_call"(` + m[3] + `) {call_target_name = "` + m[2] + `", ` + m[4] + "} : " + m[5] + " -> " + m[6]
		}
	}
	return strings.Join(lines, "\n")
}

// TestEmittedMLIRParses parses every golden module and the emission of
// generated programs with mlir-opt (--allow-unregistered-dialect): SSA
// names, regions, block arguments, types and attribute syntax must all be
// valid MLIR. It needs mlir-opt (apt-get install mlir-16-tools) and skips
// without it; the real-XLA check is scripts/xla_check_lowering.py.
func TestEmittedMLIRParses(t *testing.T) {
	opt := mlirOpt()
	if opt == "" {
		t.Skip("mlir-opt not installed (apt-get install mlir-16-tools); emitted text not parsed")
	}
	texts := map[string]string{}
	golden, err := filepath.Glob(filepath.Join("testdata", "golden", "*.mlir"))
	require.NoError(t, err)
	require.NotEmpty(t, golden)
	for _, g := range golden {
		b, err := os.ReadFile(g)
		require.NoError(t, err)
		texts[filepath.Base(g)] = string(b)
	}
	cat := StaticCatalog{}
	for k, v := range testCat {
		cat[k] = v
	}
	cat["softmax"] = Callee{Name: "softmax", ID: "cb1-" + strings.Repeat("e", 64), Signature: abi.MustParseSignature("(x: f32[b,n]) -> f32[b,n]")}
	for seed := uint64(1); seed <= 20; seed++ {
		p, err := generate(seed, cat, 14)
		require.NoError(t, err)
		require.NoError(t, Lower(p, Options{}))
		s, err := Emit(p, cat)
		require.NoError(t, err)
		texts[p.Name] = s
	}
	p := compileText(t, strings.Replace(everyOp, "  %tok = create_token : token\n", "", 1), Options{NoDCE: true})
	s, err := Emit(p, testCat)
	require.NoError(t, err)
	texts["every"] = s

	dir := t.TempDir()
	for name, text := range texts {
		path := filepath.Join(dir, name+".mlir")
		require.NoError(t, os.WriteFile(path, []byte(toGeneric(text)), 0o644))
		out, err := exec.Command(opt, "--allow-unregistered-dialect", path).CombinedOutput()
		require.NoError(t, err, "%s does not parse:\n%s\n%s", name, out, text)
	}

	// The check can fail: a redefined value is refused.
	bad := strings.Replace(texts["trap_loop.mlir"], "%1 = stablehlo.constant", "%0 = stablehlo.constant", 1)
	path := filepath.Join(dir, "bad.mlir")
	require.NoError(t, os.WriteFile(path, []byte(toGeneric(bad)), 0o644))
	_, err = exec.Command(opt, "--allow-unregistered-dialect", path).CombinedOutput()
	require.Error(t, err)
}

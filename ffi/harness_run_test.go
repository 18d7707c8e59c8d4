//go:build cgo

// Running the C harness: the kit guests' config (and the hostile suite's),
// a run of groups, the lines it prints parsed, and the assertions the
// harness tests make on them.

package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
)

// hostileCall is a hostile guest the harness runs on both engines, through
// the C API and the XLA handler: module (host/testdata/hostile), export,
// and the kind it must produce.
type hostileCall struct {
	module, export string
	kind           abi.Kind
	fuel           bool
}

var hostileCalls = []hostileCall{
	{"runaway", "spin", abi.Timeout, false},
	{"runaway", "spin", abi.FuelExhausted, true},
	{"runaway", "recurse", abi.StackOverflow, false},
	{"runaway", "grow_pages", abi.MemoryLimit, false},
	{"traps", "div_by_zero", abi.DivideByZero, false},
	{"traps", "int_overflow", abi.IntegerOverflow, false},
	{"traps", "unreachable", abi.Unreachable, false},
	{"traps", "trunc_nan", abi.InvalidConversion, false},
	{"traps", "indirect_mismatch", abi.IndirectCallMismatch, false},
	{"traps", "indirect_null", abi.TableOutOfBounds, false},
	{"traps", "load_oob", abi.MemoryOutOfBounds, false},
	{"frame", "overrun_1", abi.ABIViolation, false},
	{"frame", "status_cancelled", abi.ABIViolation, false},
	{"imports", "error_megabytes", abi.GuestError, false},
}

func (hc hostileCall) name(engine string) string {
	n := "hostile_" + hc.export + "_" + engine
	if hc.fuel {
		n = "hostile_" + hc.export + "_fuel_" + engine
	}
	return n
}

var kitDTypes = []string{"pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "f16", "f32", "f64", "c64", "bf16", "c128"}

// writeConfig compiles the guests into dir and writes dir/callbox.yaml.
func writeConfig(t *testing.T, dir string, hostile bool) string {
	t.Helper()
	compile := func(src, dst string) {
		text, err := os.ReadFile(src)
		require.NoError(t, err)
		bin, err := wat.Compile(string(text))
		require.NoError(t, err, src)
		require.NoError(t, os.WriteFile(filepath.Join(dir, dst), bin, 0o644))
	}
	compile("testdata/kit.wat", "kit.wasm")
	var b strings.Builder
	b.WriteString("callbacks:\n")
	cb := func(name, module, export, sig, extra string) {
		timeout := "    timeout: 250ms\n"
		if strings.Contains(extra, "timeout:") {
			timeout = ""
		}
		fmt.Fprintf(&b, "  %s:\n    module: %s\n    export: %s\n    signature: %q\n%s%s", name, module, export, sig, timeout, extra)
	}
	for _, d := range kitDTypes {
		cb("copy_"+d, "kit.wasm", "copy", fmt.Sprintf("(x: %s[n]) -> %s[n]", d, d), "")
	}
	cb("copy_scalar", "kit.wasm", "copy", "(x: f64[]) -> f64[]", "")
	cb("copy_mat", "kit.wasm", "copy", "(x: f32[a,b]) -> f32[a,b]", "    batching: expand_dims\n")
	cb("copy2", "kit.wasm", "copy2", "(x: s16[n], y: f32[m]) -> (s16[n], f32[m])", "")
	cb("fail", "kit.wasm", "fail", "(x: f32[n]) -> f32[n]", "")
	cb("bump", "kit.wasm", "bump", "(x: f32[n]) -> s32[]", "    max_instances: 1\n")
	cb("spin", "kit.wasm", "spin", "(x: f32[n]) -> f32[n]", "")
	cb("nonneg_par", "kit.wasm", "nonneg", "(x: f32[n]) -> f32[n]", "    batching: parallel\n    max_instances: 4\n")
	cb("nonneg_seq", "kit.wasm", "nonneg", "(x: f32[n]) -> f32[n]", "")
	cb("spin_long", "kit.wasm", "spin", "(x: f32[n]) -> f32[n]", "    timeout: 5s\n    max_cpu: 4s\n")
	cb("spin_wasmtime", "kit.wasm", "spin", "(v: f32[n]) -> f32[n]", "    timeout: 5s\n    engine: wasmtime\n")
	cb("say", "kit.wasm", "say", "(x: f32[n]) -> f32[n]", "")
	cb("copy_wasmtime", "kit.wasm", "copy", "(w: f32[m]) -> f32[m]", "    engine: wasmtime\n") // its own content id: another signature text
	if hostile {
		compiled := map[string]bool{}
		for _, hc := range hostileCalls {
			if !compiled[hc.module] {
				compile(filepath.Join("..", "host", "testdata", "hostile", hc.module+".wat"), hc.module+".wasm")
				compiled[hc.module] = true
			}
			for _, engine := range []string{"wazero", "wasmtime"} {
				extra := "    engine: " + engine + "\n    max_instances: 1\n    max_memory: 1MiB\n"
				if hc.module == "imports" {
					extra = "    engine: " + engine + "\n    max_instances: 1\n    max_memory: 8MiB\n"
				}
				if hc.fuel {
					extra += "    fuel: 1000000\n"
				}
				cb(hc.name(engine), hc.module+".wasm", hc.export, "(x: f32[n]) -> f32[n]", extra)
			}
		}
	}
	path := filepath.Join(dir, "callbox.yaml")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	return path
}

// harnessGroups builds the harness, writes the kit guests' config (with
// the hostile suite's when hostile is set) into a fresh directory, and
// runs groups there with env added to the environment.
func harnessGroups(t *testing.T, hostile bool, env []string, groups ...string) *harnessRun {
	t.Helper()
	bin := buildHarness(t)
	dir := t.TempDir()
	return runHarness(t, bin, writeConfig(t, dir, hostile), dir, env, groups...)
}

// harnessLine is one ERR or XLA line.
type harnessLine struct {
	kind     string // kind ident, "OK" for success (ERR lines)
	code     int
	callback string
	chain    string
	seq      uint64
	guest    string
	text     string
	// failed is the failed step of a refused chain step: "callback#seq".
	failed string
}

type harnessRun struct {
	errs   map[string]harnessLine
	xla    map[string]harnessLine
	vals   map[string]string
	failed []string
	done   string
	out    string
}

// runHarness runs groups of the harness and parses what it prints.
func runHarness(t *testing.T, bin, cfg, dir string, env []string, groups ...string) *harnessRun {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "harness"), append([]string{cfg, dir}, groups...)...)
	cmd.Env = append(os.Environ(), env...)
	outb, err := cmd.CombinedOutput()
	out := string(outb)
	r := &harnessRun{errs: map[string]harnessLine{}, xla: map[string]harnessLine{}, vals: map[string]string{}, out: out}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		switch f[0] {
		case "ERR":
			require.Len(t, f, 10, sc.Text())
			code, _ := strconv.Atoi(f[3])
			seq, _ := strconv.ParseUint(f[6], 10, 64)
			r.errs[f[1]] = harnessLine{kind: f[2], code: code, callback: f[4], chain: f[5], seq: seq, guest: f[7], text: f[8], failed: f[9]}
		case "XLA":
			require.Len(t, f, 4, sc.Text())
			code, _ := strconv.Atoi(f[2])
			r.xla[f[1]] = harnessLine{code: code, text: f[3]}
		case "VAL":
			r.vals[f[1]] = f[2]
		case "FAIL":
			r.failed = append(r.failed, sc.Text())
		case "DONE":
			r.done = sc.Text()
		}
	}
	require.NotEmpty(t, r.done, "the harness did not finish (crashed?): %v\n%s", err, out)
	assert.Empty(t, r.failed, "checks inside the harness failed")
	assert.NoError(t, err, "harness exit status")
	return r
}

// ok asserts that the ERR line label reports success.
func (r *harnessRun) ok(t *testing.T, labels ...string) {
	t.Helper()
	for _, l := range labels {
		line, found := r.errs[l]
		if assert.True(t, found, "no line %s", l) {
			assert.Equal(t, "OK", line.kind, "%s: %s", l, line.text)
		}
	}
}

// fails asserts that ERR line label is an error of kind whose text
// contains each of parts.
func (r *harnessRun) fails(t *testing.T, label string, kind abi.Kind, parts ...string) harnessLine {
	t.Helper()
	line, found := r.errs[label]
	if !assert.True(t, found, "no line %s", label) {
		return line
	}
	assert.Equal(t, kind.Ident(), line.kind, "%s: %s", label, line.text)
	assert.Equal(t, int(kind.Code(abi.StatusInvalidArgument)), line.code, label)
	for _, p := range parts {
		assert.Contains(t, line.text, p, label)
	}
	return line
}

// xok asserts that XLA line label succeeded.
func (r *harnessRun) xok(t *testing.T, labels ...string) {
	t.Helper()
	for _, l := range labels {
		line, found := r.xla[l]
		if assert.True(t, found, "no XLA line %s", l) {
			assert.Equal(t, 0, line.code, "%s: %s", l, line.text)
		}
	}
}

// xfails asserts that XLA line label failed with code and a message
// containing each of parts.
func (r *harnessRun) xfails(t *testing.T, label string, code abi.Code, parts ...string) {
	t.Helper()
	line, found := r.xla[label]
	if !assert.True(t, found, "no XLA line %s", label) {
		return
	}
	assert.Equal(t, int(code), line.code, "%s: %s", label, line.text)
	for _, p := range parts {
		assert.Contains(t, line.text, p, label)
	}
}

//go:build cgo

package main

import (
	"bufio"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/cuda"
	"github.com/seed4b3e0ccb/callbox/internal/wat"
)

// The C harness (testdata/harness.c) drives a freshly built libcallbox
// through its C API and its XLA FFI handler, from C threads the Go runtime
// did not create. These tests build the library and the harness, write a
// config, run harness groups and assert on every line they print.

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// buildHarness builds libcallbox.so, the harness and the bench program
// into a temporary directory shared by the tests of this run.
func buildHarness(t testing.TB) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler (cc) on PATH: the C harness needs one")
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "callbox-harness-")
		if buildErr != nil {
			return
		}
		goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
		lib := filepath.Join(buildDir, "libcallbox.so")
		// Linked as make lib links it, exporting the C API only, plus the
		// engine's stack-switch knob the small-stack group looks up.
		mapFile, err := filepath.Abs("libcallbox-test.map")
		if err != nil {
			buildErr = err
			return
		}
		args := []string{"build", "-buildmode=c-shared", "-ldflags=-extldflags=-Wl,--version-script=" + mapFile, "-o", lib}
		if dir := os.Getenv("CALLBOX_LIB_COVERDIR"); dir != "" {
			// scripts/cover-ffi.sh: the library counts its coverage and
			// writes it into GOCOVERDIR as each harness process exits.
			args = append(args, "-cover", "-covermode=atomic", "-tags=callbox_cover")
		}
		out, err := exec.Command(goTool, append(args, ".")...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("building libcallbox: %v\n%s", err, out)
			return
		}
		for _, prog := range []string{"harness", "bench"} {
			out, err = exec.Command(cc, "-O2", "-Wall", "-Wextra", "-Werror", "-std=gnu11", "-Iinclude",
				"-o", filepath.Join(buildDir, prog), "testdata/"+prog+".c",
				"-L"+buildDir, "-lcallbox", "-lpthread", "-ldl", "-Wl,-rpath,"+buildDir).CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("building %s: %v\n%s", prog, err, out)
				return
			}
		}
	})
	require.NoError(t, buildErr)
	return buildDir
}

// TestLibraryExportsOnlyTheCAPI: the library's dynamic symbols are the C
// API's (callbox_*) and, in the tests' build only, the engine's
// stack-switch knob: wasmtime's C API (about 1,100 functions), the Go
// runtime's and cgo's symbols and our glue's stay local, so a process
// that also loads another wasmtime, another Go c-shared library or a
// function of the same name never binds to ours, nor ours to its.
func TestLibraryExportsOnlyTheCAPI(t *testing.T) {
	f, err := elf.Open(filepath.Join(buildHarness(t), "libcallbox.so"))
	require.NoError(t, err)
	defer f.Close()
	syms, err := f.DynamicSymbols()
	require.NoError(t, err)
	var api []string
	for _, s := range syms {
		bind := elf.ST_BIND(s.Info)
		if s.Section == elf.SHN_UNDEF || (bind != elf.STB_GLOBAL && bind != elf.STB_WEAK) {
			continue
		}
		if s.Name == "cb_test_stack_switch" {
			continue
		}
		if assert.True(t, strings.HasPrefix(s.Name, "callbox_"), "the library exports %s", s.Name) {
			api = append(api, s.Name)
		}
	}
	header, err := os.ReadFile("include/callbox.h")
	require.NoError(t, err)
	declared := regexp.MustCompile(`(?m)\b(callbox_[a-z0-9_]+)\(`).FindAllStringSubmatch(string(header), -1)
	want := map[string]bool{}
	for _, m := range declared {
		want[m[1]] = true
	}
	for _, name := range api {
		delete(want, name)
	}
	assert.Empty(t, want, "functions callbox.h declares that the library does not export")
	assert.GreaterOrEqual(t, len(api), 40)
}

func TestMain(m *testing.M) {
	if dir := os.Getenv("CALLBOX_LIB_COVERDIR"); dir != "" {
		// Every process that loads the covered library writes there.
		_ = os.Setenv("GOCOVERDIR", dir)
	}
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

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

func TestHarnessCAPI(t *testing.T) {
	r := harnessGroups(t, false, nil, "version", "open", "list", "dtypes", "shapes", "bad", "chains", "batch", "close")

	assert.Equal(t, "1.11.0 11100", r.vals["version"])

	// Opening.
	r.fails(t, "open_null_path", abi.InvalidArgument, "config_path: NULL")
	r.fails(t, "open_null_out", abi.InvalidArgument, "out: NULL")
	r.fails(t, "open_missing", abi.InvalidArgument, "/nonexistent/callbox.yaml: cannot open")
	r.fails(t, "open_bad_format", abi.InvalidArgument, `unsupported config format "ini"`)
	r.fails(t, "open_bad_yaml", abi.InvalidArgument, "bad YAML")
	r.fails(t, "open_bad_key", abi.InvalidArgument, "callbacks.s.colour: unknown key")
	r.fails(t, "open_bad_module", abi.InvalidArgument, `callback "s"`, "missing.wasm")
	r.ok(t, "open_json", "json_count", "json_close", "json_close_again")
	r.fails(t, "json_after_close", abi.FailedPrecondition, "is closed")
	r.fails(t, "unknown_handle", abi.InvalidArgument, "unknown host handle 987654")
	r.fails(t, "handle_zero", abi.InvalidArgument, "handle 0 is not a host")

	// Listing and types.
	assert.Equal(t, "27", r.vals["count"])
	r.fails(t, "count_null", abi.InvalidArgument, "out: NULL")
	info := strings.Split(r.vals["info_copy_f32"], "|")
	require.Len(t, info, 6)
	assert.True(t, abi.IsCallbackID(info[0]), info[0])
	assert.Equal(t, []string{"(x: f32[n]) -> f32[n]", "wazero", "sequential", "1", "1"}, info[1:])
	r.fails(t, "at_out_of_range", abi.InvalidArgument, "index: 27 is out of range")
	r.ok(t, "find_name", "find_id")
	stale := r.fails(t, "find_stale_id", abi.UnknownCallback, "its module, export or signature changed since the id was taken, or it is not loaded")
	assert.Equal(t, "cb1-"+strings.Repeat("0", 64), stale.callback)
	r.fails(t, "find_unknown", abi.UnknownCallback, `callback "nope" (loaded: bump, copy2,`)
	r.fails(t, "find_null", abi.InvalidArgument, "name_or_id: NULL")
	r.ok(t, "types_mat")
	assert.Equal(t, "2/32/1 2 [3,5]", r.vals["types_mat"])
	r.fails(t, "types_wrong_rank", abi.InvalidArgument, "argument 0 (x): expected f32[n], got f32[3,5]")
	r.fails(t, "types_wrong_count", abi.InvalidArgument, `num_outputs: 2, but callback "copy_mat" has 1 results`)
	r.fails(t, "types_unknown_dtype", abi.InvalidArgument, "input 0: unknown dtype {code 2, bits 8, lanes 1}")

	// Every dtype, rank 0, empty tensors, strides.
	for _, d := range kitDTypes {
		r.ok(t, "dtype_"+d)
		r.xok(t, "xla_dtype_"+d)
	}
	r.ok(t, "rank0", "empty", "empty_2d", "strides_rowmajor", "strides_unit_dim", "two_outputs")
	r.xok(t, "xla_rank0", "xla_empty")
	r.fails(t, "strides_transposed", abi.InvalidArgument, "argument 0: strides [1 2] are not row-major for shape [2 3]")

	// Bad arguments, each named.
	r.fails(t, "null_callback", abi.InvalidArgument, "callback: NULL")
	r.fails(t, "unknown_callback", abi.UnknownCallback, `callback "nope" (loaded: bump`)
	r.fails(t, "stale_id", abi.UnknownCallback, "its module, export or signature changed since the id was taken, or it is not loaded")
	r.fails(t, "null_inputs", abi.InvalidArgument, "inputs: NULL with a count of 1")
	r.fails(t, "null_outputs", abi.InvalidArgument, "outputs: NULL with a count of 1")
	r.fails(t, "too_many_inputs", abi.InvalidArgument, "got 2 inputs, signature (x: f32[n]) -> f32[n] takes 1")
	r.fails(t, "too_few_outputs", abi.InvalidArgument, "got 0 output buffers")
	bad := r.fails(t, "unknown_dtype", abi.InvalidArgument, "argument 0: unknown dtype {code 2, bits 8, lanes 1}")
	assert.Equal(t, "copy_f32", bad.callback, "a refused tensor's error names the callback the call named")
	r.fails(t, "lanes", abi.InvalidArgument, "argument 0: unknown dtype {code 2, bits 32, lanes 4}")
	r.fails(t, "rank_33", abi.InvalidArgument, "argument 0: rank 33 exceeds the ABI maximum 32")
	r.fails(t, "rank_negative", abi.InvalidArgument, "argument 0: rank -1 is negative")
	r.fails(t, "dim_negative", abi.InvalidArgument, "argument 0: dimension 0 is negative (-1)")
	r.fails(t, "shape_null", abi.InvalidArgument, "argument 0: shape is NULL with rank 1")
	r.fails(t, "data_null", abi.InvalidArgument, "argument 0: data is NULL for f32[4]")
	r.fails(t, "data_null_page", abi.InvalidArgument, "argument 0: data 0x10 (+ byte_offset 0) is in the lowest 64 KiB")
	r.fails(t, "out_null_page", abi.InvalidArgument, "output 0: data 0xff00 (+ byte_offset 0) is in the lowest 64 KiB")
	r.fails(t, "device_gpu", abi.InvalidArgument, "argument 0: device type 2 is CUDA memory: call GPU tensors with callbox_cuda_call_dlpack")
	r.fails(t, "device_managed_out", abi.InvalidArgument, "output 0: device type 13 is CUDA memory", "callbox_cuda_call_dlpack")
	r.fails(t, "device_opencl", abi.InvalidArgument, "argument 0: device type 4 is not host memory")
	r.fails(t, "output_shape", abi.InvalidArgument, "output 0: buffer is f32[5], result is f32[4]")
	r.fails(t, "output_dtype", abi.InvalidArgument, "output 0: buffer is f64[4], result is f32[4]")
	r.fails(t, "input_dtype", abi.InvalidArgument, "argument 0 (x): expected f32[n], got s32[4]")
	g := r.fails(t, "guest_error", abi.GuestError, `callback "fail" failed`)
	assert.Equal(t, "bad input", g.guest)
	assert.Equal(t, "fail", g.callback)
	for _, label := range []string{"count_max_call", "count_max_batch", "count_max_within", "count_max_tap",
		"count_max_chain_call", "count_max_chain_tap", "count_max_output_types"} {
		r.fails(t, label, abi.InvalidArgument, "inputs: count 18446744073709551615 exceeds the maximum 1024")
	}
	for _, label := range []string{"count_max_call_out", "count_max_cancelable"} {
		r.fails(t, label, abi.InvalidArgument, "outputs: count 18446744073709551615 exceeds the maximum 1024")
	}
	for _, label := range []string{"pointer_kernel", "pointer_noncanonical", "pointer_kernel_out"} {
		r.fails(t, label, abi.InvalidArgument, "where user space ends: a kernel, non-canonical or wild pointer")
	}
	to := r.fails(t, "timeout", abi.Timeout, `callback "spin" failed: timeout after 250ms`)
	assert.Equal(t, int(abi.CodeDeadlineExceeded), to.code)
	r.ok(t, "ok_after")

	// Chains: order, the first failure, reset; taps and the barrier.
	r.ok(t, "chain_call", "chain_tap_1", "chain_tap_fail", "chain_tap_3", "chain_reset", "chain_call_after_reset", "chain_barrier_ok")
	assert.Equal(t, "1", r.vals["chain_count_1"])
	first := r.fails(t, "chain_barrier", abi.GuestError, `callback "fail" (chain "c1" #3) failed`)
	assert.Equal(t, "c1", first.chain)
	assert.EqualValues(t, 3, first.seq)
	skipped := r.fails(t, "chain_after_failure", abi.GuestError, `call #5 (bump) not run: chain failed at #3`)
	assert.Equal(t, "bump", skipped.callback)
	assert.EqualValues(t, 5, skipped.seq)
	assert.Equal(t, "fail#3 guest returned INVALID_ARGUMENT", skipped.failed, "the refused step names the step that failed")
	assert.Equal(t, "bad input", skipped.guest, "with the failed step's guest message")
	assert.Equal(t, "3", r.vals["chain_count_2"], "the tap after the failure must not have run")

	// Batched calls (callbox_call_batch, since 1.3).
	r.ok(t, "batch_ok", "batch_seq_ok", "batch_empty")
	assert.Equal(t, "1 1", r.vals["batch_results"], "every element's result in its slice, parallel and sequential")
	for _, label := range []string{"batch_fail", "batch_seq_fail", "batch_chain_fail"} {
		r.fails(t, label, abi.GuestError, "(batch element 5 of 8)", "bad input")
		assert.Equal(t, "5 of 8 untouched 1", r.vals[label], label)
	}
	assert.Equal(t, "bc", r.errs["batch_chain_fail"].chain)
	r.fails(t, "batch_refused", abi.InvalidArgument, "output 0: buffer is f32[7,4], result is f32[8,4]")
	assert.Equal(t, "0", r.vals["batch_refused"], "a refused batch names no element")
	assert.Equal(t, "0", r.vals["plain_batch_size"], "a call that is no batch has batch_size 0")
	r.fails(t, "batch_bad_cancel", abi.InvalidArgument, "unknown cancel token")
	r.fails(t, "chain_null", abi.InvalidArgument, "chain: NULL")
	r.fails(t, "chain_empty", abi.InvalidArgument, "chain: empty name")
	r.fails(t, "chain_output_shape", abi.InvalidArgument, "output 0: buffer is s32[3], result is s32[]")
	r.ok(t, "tap_copies_input", "tap_copies_input_barrier") // the tap read its own copy of the freed buffer
	r.ok(t, "tap_ok", "tap_fail", "barrier_again")
	r.fails(t, "barrier", abi.GuestError, `callback "fail" failed`)
	r.fails(t, "tap_unknown", abi.UnknownCallback, "unknown callback")
	r.xok(t, "xla_chain_token")
	r.xfails(t, "xla_chain_fail", abi.CodeInvalidArgument, `callbox GuestError: callback "fail" (chain "xc" #2)`)
	r.xfails(t, "xla_chain_after_failure", abi.CodeInvalidArgument, `chain "xc": call #3 (bump) not run`)

	// Closing.
	r.ok(t, "close", "close_again")
	assert.Equal(t, "1", r.vals["cuda_stats_before_close"])
	assert.Equal(t, "-1", r.vals["cuda_stats_after_close"], "closing the default host uninstalls the GPU path")
	r.fails(t, "call_after_close", abi.FailedPrecondition, "is closed")
	r.xfails(t, "xla_after_close", abi.CodeFailedPrecondition, "is closed")
}

func TestHarnessXLA(t *testing.T) {
	r := harnessGroups(t, false, nil, "xla")

	r.xok(t, "metadata", "stage_0", "stage_1", "stage_2", "by_name", "by_id")
	// Malformed frames and bad buffers: TestHarnessBothHandlers, through
	// both handlers.
	assert.Equal(t, xlaAPIVersion+" traits=0", r.vals["metadata"])
	r.xfails(t, "too_many_args", abi.CodeInvalidArgument, `callback "copy_f32" refused the call before running it: got 2 inputs`)
	r.xfails(t, "no_rets", abi.CodeInvalidArgument, "got 0 output buffers")
	r.xfails(t, "ret_shape", abi.CodeInvalidArgument, "output 0: buffer is f32[5], result is f32[4]")
	r.xfails(t, "guest_error", abi.CodeInvalidArgument, `callbox GuestError: callback "fail" failed: guest returned INVALID_ARGUMENT: bad input`)
	r.xfails(t, "timeout", abi.CodeDeadlineExceeded, `callbox Timeout: callback "spin" failed: timeout after 250ms`)
	r.xok(t, "batched")
	r.xfails(t, "batched_fail", abi.CodeInvalidArgument, `callbox GuestError: callback "nonneg_par" (batch element 1 of 2) failed: guest returned INVALID_ARGUMENT: bad input`)
	r.xfails(t, "batched_bad", abi.CodeInvalidArgument, `attribute batched is "yes", want "true" or "false"`)
	r.xfails(t, "batched_false", abi.CodeInvalidArgument, "argument 0 (x): expected f32[n], got f32[2,2]")
}

// TestHarnessCUDA drives the GPU entries the library exports (serving the
// default host through package cuda) from C on this machine, whatever its
// GPU: host pointers pose as device memory, so every GPU call must fail
// with a clear error (no CUDA runtime here, or memory that is not the
// device's where there is one), write no output, and leave the process
// working. The GPU path itself runs on the fake device in cuda/ and
// in gpu_test.go, and on a real GPU in scripts/device-check-cuda.sh.
func TestHarnessCUDA(t *testing.T) {
	r := harnessGroups(t, false, nil, "cuda")

	// Installed with the default host: the stats answer, and the handler
	// answers XLA's handshake.
	assert.Regexp(t, `^\d+ \{"mode":"auto","calls":0,`, r.vals["cuda_stats"])
	r.xok(t, "cuda_metadata")
	assert.Equal(t, xlaAPIVersion+" traits=0", r.vals["cuda_metadata"])
	r.xfails(t, "cuda_on_cpu_api", abi.CodeFailedPrecondition, "has no Stream_Get", "use callbox_xla_ffi on CPU")

	// GPU calls on host memory fail cleanly: without a CUDA runtime with
	// the one load error, else because the memory is not the device's.
	_, rtErr := cuda.OpenRuntime()
	noCUDA := errors.Is(rtErr, cuda.ErrNoRuntime)
	call := r.xla["cuda_call"]
	assert.NotZero(t, call.code, call.text)
	assert.Contains(t, call.text, `callback "copy_f32" failed on the GPU path: argument 0`)
	dl := r.vals["cuda_dlpack"]
	assert.NotRegexp(t, `^0 `, dl)
	assert.Contains(t, dl, `callback "copy_f32" failed on the GPU path`)
	if noCUDA {
		assert.Contains(t, call.text, "CUDA runtime not available")
		assert.Contains(t, dl, "CUDA runtime not available")
	}
	r.xfails(t, "cuda_unknown", abi.CodeNotFound, `callback "nope"`, "unknown callback")
	assert.Regexp(t, `^3 callbox InvalidArgument: callback: NULL \[callbox error [0-9a-f]{8}-\d+\]$`, r.vals["cuda_dlpack_null"])
	// Its message's token gives the whole failure back, as the XLA
	// handlers' do.
	dlFailure, found := r.errs["cuda_dlpack_failure"]
	if assert.True(t, found, "callbox_xla_failure gave no failure for %q", dl) {
		assert.Equal(t, "copy_f32", dlFailure.callback)
		assert.Contains(t, dl, "callbox "+dlFailure.text, "the failure's text is the message's")
	}
	assert.Equal(t, "3", r.vals["cuda_dlpack_no_msg"], "a NULL input list with no message buffer")

	// The plain C API refuses CUDA tensors and names the GPU entry.
	r.fails(t, "cuda_plain_call", abi.InvalidArgument, "argument 0: device type 2 is CUDA memory", "callbox_cuda_call_dlpack")

	// Clearing the default host uninstalls the GPU path; setting it again
	// reinstalls it.
	r.ok(t, "cuda_clear_default", "cuda_set_default", "cuda_cpu_after")
	r.xfails(t, "cuda_no_host", abi.CodeFailedPrecondition, "callbox FailedPrecondition", "no callbox host")
	assert.Equal(t, "-1", r.vals["cuda_stats_no_host"])
	assert.Equal(t, "1", r.vals["cuda_stats_again"])
}

// TestHarnessBothHandlers sends the same failing frames to the CPU and
// the CUDA XLA handler from C: one decoder and one error mapper, so every
// failure before bytes move gets the same code and message from both.
func TestHarnessBothHandlers(t *testing.T) {
	r := harnessGroups(t, false, []string{"CALLBOX_CONFIG="}, "both")
	r.ok(t, "both_clear_default", "both_open_other", "both_set_other", "both_close_other", "both_restore")
	for _, c := range []struct {
		label string
		code  abi.Code
		part  string
	}{
		{"unknown", abi.CodeNotFound, `callbox UnknownCallback: callback "nope" (loaded: bump`},
		{"stale_id", abi.CodeNotFound, "its module, export or signature changed since the id was taken, or it is not loaded"},
		{"empty_name", abi.CodeInvalidArgument, "attribute callback: empty"},
		{"no_attrs", abi.CodeInvalidArgument, "missing attribute callback"},
		{"attr_scalar", abi.CodeInvalidArgument, "attribute callback has type 3, want a string"},
		{"attr_unknown", abi.CodeInvalidArgument, "unknown attribute colour"},
		{"empty_chain", abi.CodeInvalidArgument, "attribute chain: empty name"},
		{"dtype_f8", abi.CodeInvalidArgument, "argument 0: XLA dtype 19 is not one callbox supports"},
		{"rank_40", abi.CodeInvalidArgument, "argument 0: rank 40 exceeds the ABI maximum 32"},
		{"dim_negative", abi.CodeInvalidArgument, "argument 0: dimension 0 is negative (-2)"},
		{"arg_not_buffer", abi.CodeInvalidArgument, "argument 0: type 2 is not a buffer"},
		{"data_null", abi.CodeInvalidArgument, "argument 0: data is NULL"},
		{"small_frame", abi.CodeInvalidArgument, "call frame of 100 bytes, want at least 168"},
		{"no_host", abi.CodeFailedPrecondition, "callbox FailedPrecondition: callback \"copy_f32\": no callbox host"},
		{"closed_host", abi.CodeFailedPrecondition, "is closed"},
	} {
		cpu, gpu := r.xla["both_"+c.label+"_cpu"], r.xla["both_"+c.label+"_cuda"]
		r.xfails(t, "both_"+c.label+"_cpu", c.code, c.part)
		r.xfails(t, "both_"+c.label+"_cuda", c.code, c.part)
		// Alike but for the failure's token: each failure has its own.
		cpu.text = strings.TrimSuffix(cpu.text, tokenOf(t, cpu.text))
		gpu.text = strings.TrimSuffix(gpu.text, tokenOf(t, gpu.text))
		assert.Equal(t, cpu, gpu, "%s: the two handlers answer alike", c.label)
	}
}

// TestHarnessThreads runs 8 C threads at once, half through the C API and
// half through the XLA handler, each checking every output.
func TestHarnessThreads(t *testing.T) {
	r := harnessGroups(t, false, nil, "threads")
	assert.Equal(t, "8 threads x 200 calls", r.vals["threads"])
}

// TestHarnessDefaultHost opens the XLA handler's default host lazily from
// CALLBOX_CONFIG, and reports a clear error without it.
func TestHarnessDefaultHost(t *testing.T) {
	bin := buildHarness(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, false)
	r := runHarness(t, bin, "-", dir, []string{"CALLBOX_CONFIG=" + cfg}, "lazy")
	r.xok(t, "lazy")
	assert.Equal(t, "3", r.vals["lazy"])
	r.ok(t, "default_host", "default_host_info")
	assert.Equal(t, "bump", r.vals["default_host_info"], "the first callback by name (it used to be a nil dereference)")
	assert.Equal(t, "-1", r.vals["lazy_cuda_before"], "no GPU path before the default host opens")
	assert.Equal(t, "1", r.vals["lazy_cuda_after"], "the lazily opened default host serves the GPU entries")

	// A bad copy mode fails the open, naming the variable.
	r = runHarness(t, bin, "-", dir, []string{"CALLBOX_CONFIG=" + cfg, "CALLBOX_CUDA_COPY=bogus"}, "lazy")
	r.xfails(t, "lazy", abi.CodeInvalidArgument, `CALLBOX_CUDA_COPY="bogus": want auto, staged or pageable`)

	r = runHarness(t, bin, "-", dir, []string{"CALLBOX_CONFIG="}, "lazy")
	r.xfails(t, "lazy", abi.CodeFailedPrecondition, "callbox FailedPrecondition", "no callbox host: set CALLBOX_CONFIG")
	r.fails(t, "default_host", abi.FailedPrecondition, "no callbox host")

	r = runHarness(t, bin, "-", dir, []string{"CALLBOX_CONFIG=" + filepath.Join(dir, "missing.yaml")}, "lazy")
	r.xfails(t, "lazy", abi.CodeInvalidArgument, "CALLBOX_CONFIG: ", "missing.yaml")
}

// TestHarnessHostile runs hostile guests on both engines through the C
// API and the XLA handler: each fails with its kind and code, the message
// names the callback and the kind, and the process survives to serve a
// normal call.
func TestHarnessHostile(t *testing.T) {
	r := harnessGroups(t, true, nil, "hostile")
	for _, hc := range hostileCalls {
		for _, engine := range []string{"wazero", "wasmtime"} {
			name := hc.name(engine)
			status := abi.StatusOK
			if hc.kind == abi.GuestError {
				status = abi.StatusInvalidArgument
			}
			code := hc.kind.Code(status)
			line, found := r.errs["capi_"+name]
			if assert.True(t, found, name) {
				assert.Equal(t, hc.kind.Ident(), line.kind, "%s: %s", name, line.text)
				assert.Equal(t, int(code), line.code, name)
				assert.Equal(t, name, line.callback)
			}
			r.xfails(t, "xla_"+name, code, fmt.Sprintf("callbox %s: callback %q", hc.kind.Ident(), name))
			// The XLA error's token gives back the failure the C API
			// gives for the same call: kind, code, callback, guest
			// message and text.
			failure, found := r.errs["xlaf_"+name]
			if assert.True(t, found, "%s: callbox_xla_failure gave no failure (%s)", name, r.vals["xlaf_"+name]) {
				assert.Equal(t, line.kind, failure.kind, name)
				assert.Equal(t, line.code, failure.code, name)
				assert.Equal(t, name, failure.callback, name)
				assert.Equal(t, line.guest, failure.guest, name)
				assert.Equal(t, line.text, failure.text, name)
			}
		}
	}
	r.ok(t, "hostile_survived")
}

// TestHarnessXLAHost: the XLA handler's attribute host runs a call on the
// host it names (callbox_xla_host_attr) instead of the default host, and
// refuses, naming the attribute and the callback, a malformed value, an
// unknown handle, another load's tag and a closed host; callbox_xla_failure
// finds a failure by its token in any surrounding text, as often as asked,
// and no failure for text without one of this library's tokens.
func TestHarnessXLAHost(t *testing.T) {
	r := harnessGroups(t, false, nil, "xlahost")
	r.ok(t, "xh_open", "xh_attr", "xh_attr_self", "xh_close", "xh_bump_capi")
	assert.Regexp(t, `^\d+@[0-9a-f]{8}$`, r.vals["xh_attr"])
	assert.Regexp(t, `^\d+@[0-9a-f]{8}$`, r.vals["xh_attr_self"])
	assert.NotEqual(t, r.vals["xh_attr"], r.vals["xh_attr_self"])
	r.fails(t, "xh_attr_small", abi.InvalidArgument, "cap: 4 bytes, the value needs", "CALLBOX_XLA_HOST_ATTR_SIZE is 64")
	r.fails(t, "xh_attr_null", abi.InvalidArgument, "buf: NULL")
	r.fails(t, "xh_attr_unknown", abi.InvalidArgument, "unknown host handle 987654")
	r.fails(t, "xh_attr_closed", abi.FailedPrecondition, "host is closed")

	// Three calls on the other host, one on the default host named, one
	// on the default host, then the C API on the other host: each host
	// counts its own.
	r.xok(t, "xh_bump_0", "xh_bump_1", "xh_bump_2", "xh_bump_3", "xh_bump_4")
	assert.Equal(t, "1 2 3 1 2 4", r.vals["xh_counts"])

	for _, c := range []struct {
		label string
		kind  abi.Kind
		part  string
	}{
		{"xh_garbage", abi.InvalidArgument, `attribute host: "garbage" is not a host (want HANDLE@TAG`},
		{"xh_zero", abi.InvalidArgument, `attribute host: "0@abc" is not a host`},
		{"xh_unknown", abi.InvalidArgument, "attribute host: unknown host handle 987654"},
		{"xh_other_tag", abi.FailedPrecondition, "names a host of another process"},
		{"xh_closed", abi.FailedPrecondition, `callback "bump": the host that attribute host names (handle `},
	} {
		r.xfails(t, c.label, c.kind.Code(abi.StatusOK), "callbox "+c.kind.Ident()+": ", c.part)
		failure := r.fails(t, c.label+"_failure", c.kind, c.part)
		assert.Equal(t, "bump", failure.callback, c.label)
		assert.Equal(t, r.xla[c.label].text, "callbox "+failure.text+" "+tokenOf(t, r.xla[c.label].text), c.label)
	}
	assert.Equal(t, "-1", r.vals["xh_closed_count"], "a refused call writes nothing")

	closed := r.errs["xh_closed_failure"]
	for _, label := range []string{"xh_failure_around", "xh_failure_again"} {
		assert.Equal(t, closed, r.errs[label], label)
	}
	for _, label := range []string{"xh_failure_plain", "xh_failure_foreign", "xh_failure_unterminated"} {
		assert.Equal(t, "none", r.vals[label], label)
	}
	r.fails(t, "xh_failure_null_message", abi.InvalidArgument, "xla_message: NULL")
	r.fails(t, "xh_failure_null_out", abi.InvalidArgument, "failure: NULL")
}

// tokenOf is the failure token that ends an XLA message.
func tokenOf(t *testing.T, msg string) string {
	t.Helper()
	m := regexp.MustCompile(`\[callbox error [0-9a-f]{8}-\d+\]$`).FindString(msg)
	assert.NotEmpty(t, m, "no token at the end of %q", msg)
	return m
}

// TestHarnessSmallStack calls wasmtime guests from a C thread whose
// 256 KiB stack is smaller than wasmtime's wasm stack: the calls succeed,
// a guest recursing without end fails with StackOverflow, traps (signals
// on the switched stack), a timeout and a guest calling the host fail with
// their kinds, and the process serves on; a host is opened, called,
// reloaded and closed from a 32 KiB thread. The library runs such entries
// on a stack of its own on Linux, on x86-64 or with glibc. Each switch
// runs: the x86-64 assembly, makecontext/swapcontext (the other glibc
// targets'), and none (musl off x86-64, other systems), where every
// wasmtime call from the small thread is refused as a StackOverflow that
// names the thread's room, and the process lives on.
func TestHarnessSmallStack(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the library switches stacks for wasmtime guests on Linux only")
	}
	for _, mode := range []struct {
		name string
		env  []string
	}{{"default", nil}, {"ucontext", []string{"CBX_HARNESS_SWITCH=1"}}, {"none", []string{"CBX_HARNESS_SWITCH=2"}}} {
		t.Run(mode.name, func(t *testing.T) {
			if mode.name == "ucontext" && runtime.GOARCH != "amd64" {
				t.Skip("off x86-64 the ucontext switch is the default: the default run covers it")
			}
			r := harnessGroups(t, true, mode.env, "smallstack")
			if mode.env != nil {
				require.Equal(t, "chosen", r.vals["smallstack_switch"], "the harness could not choose the switch")
			}
			r.ok(t, "smallstack_open", "smallstack_reload", "smallstack_close")
			if mode.name == "none" {
				for _, l := range []string{"smallstack_first", "smallstack_again", "smallstack_recurse", "smallstack_spin", "smallstack_after", "smallstack_open_call"} {
					r.fails(t, l, abi.StackOverflow, "the calling thread has ", "call from a thread with a bigger stack")
				}
				return
			}
			r.ok(t, "smallstack_first", "smallstack_again", "smallstack_after", "smallstack_open_call")
			r.fails(t, "smallstack_recurse", abi.StackOverflow, "hostile_recurse_wasmtime")
			r.fails(t, "smallstack_load_oob", abi.MemoryOutOfBounds, "hostile_load_oob_wasmtime")
			r.fails(t, "smallstack_div_by_zero", abi.DivideByZero, "hostile_div_by_zero_wasmtime")
			r.fails(t, "smallstack_unreachable", abi.Unreachable, "hostile_unreachable_wasmtime")
			r.fails(t, "smallstack_spin", abi.Timeout, "hostile_spin_wasmtime")
			r.fails(t, "smallstack_error_megabytes", abi.GuestError, "hostile_error_megabytes_wasmtime")
		})
	}
}

// TestReadmeCExample compiles and runs examples/c/scale.c, the program
// README.md's "C API" section shows whole, against a callbox.yaml with the
// Rust scale guest: its result, and a failure's line and exit status.
func TestReadmeCExample(t *testing.T) {
	bin := buildHarness(t)
	dir := t.TempDir()
	scale, err := filepath.Abs("../guests/prebuilt/rust-scale.wasm")
	require.NoError(t, err)
	// examples/c/callbox.yaml, but in process: this test's library has no
	// worker beside it (make install-test runs the example as installed,
	// worker and all).
	require.NoError(t, os.WriteFile(filepath.Join(dir, "callbox.yaml"), []byte("callbacks:\n  scale:\n    module: "+scale+"\n    export: scale\n"), 0o644))
	out, err := exec.Command("cc", "-std=gnu11", "-Wall", "-Werror", "-Iinclude", "-o", filepath.Join(dir, "example"),
		"../examples/c/scale.c", "-L"+bin, "-lcallbox", "-Wl,-rpath,"+bin).CombinedOutput()
	require.NoError(t, err, "%s", out)
	cmd := exec.Command(filepath.Join(dir, "example"))
	cmd.Dir = dir
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Equal(t, "2 4 6 8\n", string(out))

	// A failure: the program prints the error's one line and its code, and
	// exits 3.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "callbox.yaml"), []byte("callbacks:\n  scale:\n    module: "+scale+"\n    export: scale\n    max_output: 8B\n"), 0o644))
	cmd = exec.Command(filepath.Join(dir, "example"))
	cmd.Dir = dir
	out, err = cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, string(out))
	assert.Equal(t, 3, exit.ExitCode())
	assert.Contains(t, string(out), `callback "scale"`)
	assert.Contains(t, string(out), "(code ")
}

// TestHarnessHostileLoad opens hosts whose module attacks at load time,
// on both engines: callbox_open fails with the kind and code of the
// attack, naming the callback, and the harness process survives to print
// it.
func TestHarnessHostileLoad(t *testing.T) {
	bin := buildHarness(t)
	cases := []struct {
		module string
		kind   abi.Kind
		msg    string
	}{
		{"load_version_wrong", abi.ABIViolation, "guest reports ABI version 2"},
		{"load_start_loop", abi.Timeout, ""},
		{"load_memory_huge", abi.MemoryLimit, "above the callback's max_memory"},
		{"load_start_trap", abi.StackOverflow, ""},
	}
	for _, c := range cases {
		for _, engine := range []string{"wazero", "wasmtime"} {
			t.Run(c.module+"/"+engine, func(t *testing.T) {
				dir := t.TempDir()
				src, err := os.ReadFile(filepath.Join("..", "host", "testdata", "hostile", c.module+".wat"))
				require.NoError(t, err)
				wasm, err := wat.Compile(string(src))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(dir, "m.wasm"), wasm, 0o644))
				cfg := filepath.Join(dir, "callbox.yaml")
				require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(
					"callbacks:\n  evil:\n    module: m.wasm\n    export: run\n    signature: \"(x: f32[n]) -> f32[n]\"\n    engine: %s\n    timeout: 250ms\n    max_memory: 1MiB\n", engine)), 0o644))
				out, err := exec.Command(filepath.Join(bin, "harness"), cfg, dir, "version").CombinedOutput()
				var exit *exec.ExitError
				require.ErrorAs(t, err, &exit, "the open must fail: %s", out)
				assert.Equal(t, 1, exit.ExitCode(), "a clean failure, not a crash: %s", out)
				f := strings.Split(strings.TrimSpace(string(out)), "\t")
				require.Len(t, f, 9, string(out))
				assert.Equal(t, []string{"ERR", "open", c.kind.Ident(), strconv.Itoa(int(c.kind.Code(abi.StatusOK))), "evil"}, f[:5])
				assert.Contains(t, f[8], `callback "evil"`)
				assert.Contains(t, f[8], c.msg)
			})
		}
	}
}

// TestHarnessOpenCloseSoak opens and closes a host a thousand times from C
// (the config text, both engines' callbacks, a call on each engine on
// every tenth):
// a closed host releases everything, so the RSS after the first hundred
// rounds bounds it at the end. Before closed hosts were retired from the
// handle table, 300 rounds grew the RSS by over 100 MiB.
func TestHarnessOpenCloseSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("a thousand opens: not in -short")
	}
	r := harnessGroups(t, false, nil, "soak1000")
	var rounds int
	var first, half, last int64
	_, err := fmt.Sscanf(r.vals["soak"], "%d %d %d %d", &rounds, &first, &half, &last)
	require.NoError(t, err, "soak line %q", r.vals["soak"])
	t.Logf("RSS after %d rounds: %d MiB, after %d: %d MiB, after %d: %d MiB", rounds/10, first>>10, rounds/2, half>>10, rounds, last>>10)
	assert.Less(t, last-first, int64(soakGrowthKiB), "RSS grew from %d to %d KiB over %d open/close rounds", first, last, rounds-rounds/10)
}

// soakGrowthKiB bounds the RSS growth of 900 open/close rounds.
const soakGrowthKiB = 32 << 10

// TestHarnessSignalFlags: cancel_on_signal keeps the program's SA_RESTART
// choice and mask (issue: Ctrl-C no longer interrupted Python's os.read).
func TestHarnessSignalFlags(t *testing.T) {
	r := harnessGroups(t, false, nil, "sigflags")
	r.ok(t, "sigflags_token", "sigflags_install_plain", "sigflags_install_restart", "sigflags_install_ignored", "sigflags_free")
	assert.Equal(t, "restart=0 mask_term=1", r.vals["sigflags_plain"], "a handler without SA_RESTART stays without it, with its mask")
	assert.Equal(t, "restart=1", r.vals["sigflags_restart"])
	assert.Equal(t, "restart=1", r.vals["sigflags_ignored"], "an ignored signal interrupted nothing before")
}

// TestHarnessFork forks a child after the parent used the library: the
// child's every entry fails at once with FailedPrecondition naming spawn
// and forkserver (the Go runtime does not survive fork, and entering it
// would hang), and the parent keeps serving.
func TestHarnessFork(t *testing.T) {
	r := harnessGroups(t, false, nil, "fork")
	r.ok(t, "fork_parent_before", "fork_parent_after", "fork_signal_token")
	assert.Equal(t, "Timeout", r.vals["fork_signal_call"], "a signal to the fork child canceled the parent's call")
	assert.Equal(t, "0", r.vals["fork_child_exit"], "the child finished (a hang would end in SIGALRM)")
	for _, label := range []string{"fork_child_open", "fork_child_call"} {
		r.fails(t, label, abi.FailedPrecondition, "forked from one that had loaded libcallbox", `"spawn"`, "forkserver")
	}
	assert.Equal(t, "0", r.vals["fork_child_handle"], "a failed open leaves 0")
	r.xfails(t, "fork_child_xla", abi.CodeFailedPrecondition, "callbox_xla_ffi: this process was forked")
	assert.Equal(t, "0", r.vals["fork_child_dtypes"])
	// Every entry of the header that returns a callbox_error, read from
	// callbox.h so that a new entry cannot go untested: each refused at
	// once, naming itself. (Not from exports.c's guards: an entry whose
	// guard was removed would leave that list too.)
	hdr, err := os.ReadFile("include/callbox.h")
	require.NoError(t, err)
	entries := regexp.MustCompile(`(?m)^callbox_error \*(callbox_[a-z_]+)\(`).FindAllStringSubmatch(string(hdr), -1)
	require.Greater(t, len(entries), 20, "callbox.h's entries")
	for _, m := range entries {
		name := m[1]
		if name == "callbox_open" || name == "callbox_call" { // fork_child_open and fork_child_call above
			continue
		}
		r.fails(t, "fork_entry_"+name, abi.FailedPrecondition, name+": this process was forked")
	}
	assert.Equal(t, "0", r.vals["fork_child_cancel_token"], "no token made")
	assert.Equal(t, "0", r.vals["fork_child_default_host"], "no host reported")
	assert.Equal(t, "9", r.vals["fork_child_cuda_call"], "FAILED_PRECONDITION")
	assert.Equal(t, "-1", r.vals["fork_child_cuda_stats"])
	ms, err := strconv.Atoi(r.vals["fork_child_ms"])
	require.NoError(t, err)
	assert.Less(t, ms, 5000, "the child's errors come at once (a hang ends at its 10 s alarm)")
}

// TestHarnessCancel cancels a 5 s spinning call 100 ms in, three ways: a
// token fired from another thread, a signal bound to the token (the
// program's own handler still runs), and on a chain. Each call fails with
// Canceled long before its timeout and writes no output.
func TestHarnessCancel(t *testing.T) {
	r := harnessGroups(t, false, nil, "cancel")
	r.ok(t, "cancel_new", "cancel_fire", "cancel_on_signal", "cancel_later_call", "cancel_free")
	for round := 0; round < 3; round++ {
		label := fmt.Sprintf("cancel_call_%d", round)
		e := r.fails(t, label, abi.Canceled, `callback "spin_long"`)
		ms, err := strconv.Atoi(r.vals[fmt.Sprintf("cancel_ms_%d", round)])
		require.NoError(t, err)
		assert.Less(t, ms, 4000, "%s: canceled 100 ms in, not at its 5 s timeout", label)
		if round == 2 {
			assert.Equal(t, "canceled_chain", e.chain)
		}
	}
	assert.Equal(t, "1", r.vals["cancel_usr2_seen"], "the program's own handler ran")
	r.fails(t, "cancel_freed", abi.InvalidArgument, "unknown cancel token")
	r.fails(t, "cancel_bad_signal", abi.InvalidArgument, "signum: 11")
}

// TestHarnessLogCallback routes guest log lines to a C callback at the
// level it asks for, and back to stderr when it is cleared.
func TestHarnessLogCallback(t *testing.T) {
	r := harnessGroups(t, false, nil, "log")
	r.ok(t, "log_set", "log_call", "log_debug_only", "log_call_2", "log_clear", "log_call_3")
	assert.Equal(t, "1 user|0|say|hello from kit", r.vals["log_seen"])
	assert.Equal(t, "1", r.vals["log_lines_after_error_level"], "an info line is below the callback's error level")
	assert.Equal(t, "1", r.vals["log_lines_after_clear"])
}

// TestHarnessWithin drives callbox_call_within: a call within its budget
// runs; a 5 s spinner on either engine is given up 20 ms in, with no
// error, no output byte written, and the host serving the next call; the
// callback's own shorter timeout and a fired cancel token are errors as
// for callbox_call_cancelable, not budgets given up; bad arguments are
// refused naming them.
func TestHarnessWithin(t *testing.T) {
	r := harnessGroups(t, false, nil, "within")
	r.ok(t, "within_quick", "within_gave_up_spin_long", "within_gave_up_spin_wasmtime", "within_after",
		"within_cancel_new", "within_cancel_fire", "within_cancel_free")
	assert.Equal(t, "0 1 4", r.vals["within_quick"])
	for _, label := range []string{"within_gave_up_spin_long", "within_gave_up_spin_wasmtime"} {
		var expired, ms int
		_, err := fmt.Sscanf(r.vals[label], "%d %d", &expired, &ms)
		require.NoError(t, err, label)
		assert.Equal(t, 1, expired, label)
		assert.Less(t, ms, 4000, "%s: given up 20 ms in, not at its 5 s timeout", label)
	}
	assert.Equal(t, "0 4", r.vals["within_after"])
	r.fails(t, "within_timeout", abi.Timeout, "timeout after 250ms")
	assert.Equal(t, "0", r.vals["within_timeout"])
	r.fails(t, "within_cancel", abi.Canceled, `callback "spin_long"`)
	var expired, ms int
	_, err := fmt.Sscanf(r.vals["within_cancel"], "%d %d", &expired, &ms)
	require.NoError(t, err)
	assert.Equal(t, 0, expired, "a fired token is not a budget given up")
	assert.Less(t, ms, 2000, "canceled 100 ms in, not at its 3 s budget")
	r.fails(t, "within_zero_budget", abi.InvalidArgument, "budget_ns: 0")
	r.fails(t, "within_null_expired", abi.InvalidArgument, "expired: NULL")
	r.fails(t, "within_bad_token", abi.InvalidArgument, "unknown cancel token")
	r.fails(t, "within_unknown", abi.UnknownCallback, "no_such")
}

// TestHarnessParams: callbox_callback_params gives a callback's parameters
// as its signature declares them (names, dtypes as XLA numbers them,
// ranks), counted when out is NULL, the count whole when capacity is
// short; refusals name their argument.
func TestHarnessParams(t *testing.T) {
	r := harnessGroups(t, false, nil, "params")
	r.ok(t, "params_count", "params_copy2", "params_short", "params_mat")
	assert.Equal(t, "2", r.vals["params_count"])
	assert.Equal(t, fmt.Sprintf("2 x %d 1 y %d 1", int(abi.S16), int(abi.F32)), r.vals["params_copy2"])
	assert.Equal(t, "2 x", r.vals["params_short"])
	assert.Equal(t, fmt.Sprintf("1 x %d 2", int(abi.F32)), r.vals["params_mat"])
	r.fails(t, "params_unknown", abi.UnknownCallback, "no_such")
	r.fails(t, "params_null_count", abi.InvalidArgument, "count: NULL")
	r.fails(t, "params_null_out", abi.InvalidArgument, "out: NULL with a capacity of 4")
	// callbox_callback_refusal: a binding's refusal in the host's words
	// (Callback.Refuse), the callback named.
	r.fails(t, "refusal", abi.InvalidArgument, `callback "copy2" refused the call before running it: argument 1 (y): a cast this binding will not make`)
	assert.Equal(t, "copy2", r.errs["refusal"].callback)
	r.fails(t, "refusal_unknown", abi.UnknownCallback, "no_such")
	r.fails(t, "refusal_null", abi.InvalidArgument, "reason: NULL")
}

// TestHarnessKinds: callbox_kinds is abi's kind table, every kind with
// its code and name, for binding layers to read instead of keeping one.
func TestHarnessKinds(t *testing.T) {
	r := harnessGroups(t, false, nil, "kinds")
	assert.Equal(t, fmt.Sprint(len(abi.Kinds())), r.vals["kinds"])
	for _, k := range abi.Kinds() {
		assert.Equal(t, fmt.Sprintf("%d %s", k.Code(abi.StatusOK), k.Ident()), r.vals[fmt.Sprintf("kind_%d", int(k))], k.Ident())
	}
	assert.Empty(t, r.failed)
}

// TestHarnessRequest drives the 1.7 request entries from C: plain,
// chained, batched and asynchronous requests run; a budget that runs out
// fails as TIMEOUT with no output written; the host's own bounds refuse a
// budget past an hour (both as given and at UINT64_MAX) and a budget on a
// batch, with the Go API's messages; the sized struct refuses a short
// size, a non-zero field past what this library knows, the reserved field
// and unknown flags, and accepts a bigger caller's zero tail.
func TestHarnessRequest(t *testing.T) {
	r := harnessGroups(t, false, nil, "request")
	r.ok(t, "request_ok", "request_chain", "request_batch", "request_bigger_zero", "request_async_start", "request_async")
	assert.Equal(t, "1 4", r.vals["request_ok"])
	assert.Equal(t, "1 4", r.vals["request_chain"])
	assert.Equal(t, "1", r.vals["request_batch"])
	assert.Equal(t, "1 calls 0 wrong", r.vals["request_async"])
	r.fails(t, "request_budget", abi.Timeout, "the caller's deadline passed")
	var ms int
	var y0, y3 float64
	_, err := fmt.Sscanf(r.vals["request_budget"], "%d %g %g", &ms, &y0, &y3)
	require.NoError(t, err)
	assert.Less(t, ms, 4000, "stopped 20 ms in, not at its 5 s timeout")
	assert.Equal(t, []float64{9, 9}, []float64{y0, y3}, "no output byte written")
	r.fails(t, "request_budget_huge", abi.InvalidArgument, "budget 2h0m0s: give a budget from 1ns to 1h0m0s, or none")
	r.fails(t, "request_budget_max", abi.InvalidArgument, "give a budget from 1ns to 1h0m0s, or none")
	r.fails(t, "request_batch_budget", abi.InvalidArgument, "a batched call takes no budget")
	r.fails(t, "request_small", abi.InvalidArgument, "size is 8: set it to sizeof(callbox_request)")
	r.fails(t, "request_bigger_set", abi.InvalidArgument, "does not know; upgrade libcallbox")
	r.fails(t, "request_reserved", abi.InvalidArgument, "req.reserved")
	r.fails(t, "request_flags", abi.InvalidArgument, "unknown flags")
	r.fails(t, "request_null", abi.InvalidArgument, "req: NULL")
	r.fails(t, "request_async_null_done", abi.InvalidArgument, "done: NULL")
}

// TestHarnessReload drives callbox_reload_config from C on a host of its
// own: after a reload the changed callback has its new timeout, the added
// one runs, the removed one is unknown, the unchanged one ran before and
// after, and an info read before the reload is still readable; a
// configuration that fails to load (a missing module, a bad format, a
// missing file) is refused naming what failed, and the old one keeps
// serving with its limits; a closed or unknown host refuses.
func TestHarnessReload(t *testing.T) {
	r := harnessGroups(t, false, nil, "reload")
	r.ok(t, "reload_open", "reload_info_before", "reload_call_before", "reload", "reload_count", "reload_limits",
		"reload_call_keep", "reload_call_added", "reload_limits_kept", "reload_call_after_bad", "reload_close")
	assert.Equal(t, "3 300000000 gone", r.vals["reload_after"], "3 callbacks, change's new timeout, the old info readable")
	assert.Equal(t, "4", r.vals["reload_call_added"])
	r.fails(t, "reload_call_gone", abi.UnknownCallback, "gone")
	r.fails(t, "reload_bad", abi.InvalidArgument, "missing.wasm")
	r.fails(t, "reload_bad_format", abi.InvalidArgument, "ini")
	r.fails(t, "reload_null_text", abi.InvalidArgument, "text: NULL")
	r.fails(t, "reload_missing_file", abi.InvalidArgument, "/nonexistent/callbox.yaml")
	assert.Equal(t, "300000000", r.vals["reload_limits_kept"], "a refused reload changed nothing")
	r.fails(t, "reload_closed", abi.FailedPrecondition, "closed")
	r.fails(t, "reload_bad_host", abi.InvalidArgument, "987654")
}

// TestHarnessLimits reads callbacks' limits through
// callbox_callback_limits: as configured (timeouts) or defaulted, the
// caller's stack 0 on wazero and, for wasmtime, 0 where the library
// switches stacks and max_stack plus 1 MiB elsewhere; a later version's
// bigger struct filled only as far as 1.7's, a 1.5 or 1.6 caller's as far
// as its own; refusals.
func TestHarnessLimits(t *testing.T) {
	r := harnessGroups(t, false, nil, "limits")
	r.ok(t, "limits_copy_f32", "limits_spin_long", "limits_spin_wasmtime", "limits_bigger", "limits_15", "limits_16")
	d := config.DefaultCallback().Limits
	row := func(timeout time.Duration, callerStack uint64, maxCPU time.Duration) string {
		return fmt.Sprintf("72 %d %d %d %d %d %d %d %d", timeout.Nanoseconds(), d.MaxMemory, d.Fuel, d.MaxStack, d.MaxOutput, callerStack, d.MaxWait.Nanoseconds(), maxCPU.Nanoseconds())
	}
	assert.Equal(t, row(250*time.Millisecond, 0, 0), r.vals["limits_copy_f32"])
	assert.Equal(t, row(5*time.Second, 0, 4*time.Second), r.vals["limits_spin_long"])
	if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" {
		assert.Equal(t, row(5*time.Second, 0, 0), r.vals["limits_spin_wasmtime"])
	} else {
		// The engine's own figure (max_stack plus wasmtime's margin), not
		// restated here: more than the margin alone.
		var callerStack uint64
		_, err := fmt.Sscanf(r.vals["limits_spin_wasmtime"], "72 %d %d %d %d %d %d", new(uint64), new(uint64), new(uint64), new(uint64), new(uint64), &callerStack)
		require.NoError(t, err)
		assert.Greater(t, callerStack, uint64(1<<20))
	}
	assert.Equal(t, "72 1", r.vals["limits_bigger"], "1.7's size reported, the later field untouched")
	assert.Equal(t, "64 10000000000 1", r.vals["limits_16"], "a 1.6 struct: filled to its end (max_wait_ns written), max_cpu_ns past it untouched")
	assert.Equal(t, "56 1 1", r.vals["limits_15"], "a 1.5 struct: filled to its end (max_output written), max_wait_ns past it untouched")
	r.fails(t, "limits_small", abi.InvalidArgument, "struct_size is 8")
	r.fails(t, "limits_null", abi.InvalidArgument, "out")
	r.fails(t, "limits_unknown", abi.UnknownCallback, "no_such")
}

// TestHarnessAsync drives callbox_call_async from C threads: 400 calls on
// both engines, each reported once with its own right output although the
// caller freed its tensor structs and shapes when the call returned;
// refusals that never call done; a guest error and a cancel through done,
// with no output byte written; a host closed while a call is in flight
// (close waits for it); a done function that closes its own host.
func TestHarnessAsync(t *testing.T) {
	r := harnessGroups(t, false, nil, "async")
	r.ok(t, "async_many_err", "async_wrong_count_start", "async_fail_start", "async_cancel_new", "async_cancel_start",
		"async_cancel_fire", "async_cancel_free", "async_open_2", "async_close_start", "async_close", "async_open_3",
		"async_done_close_start", "async_close_in_done")
	assert.Equal(t, "400 calls 0 wrong", r.vals["async_many"])
	assert.NotContains(t, r.errs, "async_many_start")
	r.fails(t, "async_unknown_callback", abi.UnknownCallback, "no_such")
	r.fails(t, "async_bad_host", abi.InvalidArgument, "987654")
	r.fails(t, "async_bad_token", abi.InvalidArgument, "unknown cancel token")
	r.fails(t, "async_null_done", abi.InvalidArgument, "done")
	r.fails(t, "async_bad_tensor", abi.InvalidArgument, "argument 0: rank -1 is negative")
	r.fails(t, "async_wrong_count", abi.InvalidArgument, "")
	assert.Equal(t, "1", r.vals["async_refused_done_calls"], "done was called only for the call that started")
	r.fails(t, "async_fail", abi.GuestError, `callback "fail"`)
	r.fails(t, "async_cancel", abi.Canceled, `callback "spin_long"`)
	ms, err := strconv.Atoi(r.vals["async_cancel_ms"])
	require.NoError(t, err)
	assert.Less(t, ms, 4000, "canceled 100 ms in, not at its 5 s timeout")
	r.fails(t, "async_in_flight_at_close", abi.Timeout, `callback "spin"`)
	ms, err = strconv.Atoi(r.vals["async_close_ms"])
	require.NoError(t, err)
	assert.GreaterOrEqual(t, ms, 200, "close waited for the call in flight (spin's 250 ms timeout)")
	r.fails(t, "async_after_close", abi.FailedPrecondition, "closed")
	assert.Equal(t, "1 0", r.vals["async_done_close_calls"])
	r.fails(t, "async_after_done_close", abi.FailedPrecondition, "closed")
}

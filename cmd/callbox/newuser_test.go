package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/tensorfile"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
)

// textWorkspace writes testdata/text.wat as text.wasm and a config with one
// callback per export into a temporary directory.
func textWorkspace(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile("testdata/text.wat")
	require.NoError(t, err)
	wasm, err := wat.Compile(string(src))
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "text.wasm"), wasm, 0o644))
	cfg := `defaults:
  timeout: 1s
  wasi: minimal
callbacks:
  copy16:
    module: text.wasm
    export: copy
    signature: "(x: f16[n]) -> f16[n]"
  copybf16:
    module: text.wasm
    export: copy
    signature: "(x: f32[n]) -> bf16[n]"
  takebf16:
    module: text.wasm
    export: pass
    signature: "(x: bf16[n]) -> $x"
  pass:
    module: text.wasm
    signature: "(x: f32[n]) -> $x"
  evil_error:
    module: text.wasm
    signature: "(x: f32[n]) -> $x"
  evil_log:
    module: text.wasm
    signature: "(x: f32[n]) -> $x"
  evil_stdout:
    module: text.wasm
    signature: "(x: f32[n]) -> $x"
    wasi: minimal
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o644))
	return dir
}

// TestRunF16EndToEnd: an f16 tensor made by npy make goes through a
// callback and comes back as a float16 .npy file that npy show prints.
func TestRunF16EndToEnd(t *testing.T) {
	dir := textWorkspace(t)
	p := func(name string) string { return filepath.Join(dir, name) }
	code, _, stderr := cli(t, "npy", "make", p("h.npy"), "--dtype", "f16", "0.1", "-2.5", "65504", "inf", "-0")
	require.Equal(t, exitOK, code, stderr)
	code, _, stderr = cli(t, "run", "-c", p("config.yaml"), "copy16", "--in", p("h.npy"), "--out", p("y.npy"))
	require.Equal(t, exitOK, code, stderr)
	y, err := tensorfile.ReadFile(p("y.npy"))
	require.NoError(t, err)
	assert.Equal(t, "f16[5]", y.Type())
	assert.Equal(t, []uint16{0x2e66, 0xc100, 0x7bff, 0x7c00, 0x8000}, abi.MustView[uint16](y))
	code, stdout, stderr := cli(t, "npy", "show", p("y.npy"))
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, "f16[5] [0.1 -2.5 65500 inf -0]\n", stdout, "the shortest decimal that reads back as the same float16, as NumPy prints it")
}

// TestNumPyReadsCLIOutput: what npy make writes, NumPy reads as the same
// values, for every dtype npy make writes (when NumPy is installed).
func TestNumPyReadsCLIOutput(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import numpy").Run(); err != nil {
		t.Skipf("/usr/bin/python3 with numpy is not installed (scripts/install-toolchains.sh installs python3-numpy): %v", err)
	}
	dir := t.TempDir()
	cases := map[string][]string{
		"pred": {"true", "false", "1"}, "s8": {"-128", "127"}, "s16": {"-5", "300"}, "s32": {"-7"}, "s64": {"-9223372036854775808", "5"},
		"u8": {"255"}, "u16": {"65535"}, "u32": {"4294967295"}, "u64": {"18446744073709551615"},
		"f16": {"0.1", "-2.5", "65520"}, "f32": {"1.5", "-inf", "nan"}, "f64": {"1e300", "-0.25"}, "c64": {"1+2j", "-3.5j"}, "c128": {"-1-1j"},
	}
	want := map[string]string{
		"pred": "[True, False, True]", "s8": "[-128, 127]", "s16": "[-5, 300]", "s32": "[-7]", "s64": "[-9223372036854775808, 5]",
		"u8": "[255]", "u16": "[65535]", "u32": "[4294967295]", "u64": "[18446744073709551615]",
		"f16": "[0.0999755859375, -2.5, inf]", "f32": "[1.5, -inf, nan]", "f64": "[1e+300, -0.25]", "c64": "[(1+2j), -3.5j]", "c128": "[(-1-1j)]",
	}
	var script strings.Builder
	script.WriteString("import numpy as np\n")
	for d, vals := range cases {
		path := filepath.Join(dir, d+".npy")
		code, _, stderr := cli(t, append([]string{"npy", "make", path, "--dtype", d}, vals...)...)
		require.Equal(t, exitOK, code, stderr)
		script.WriteString("print('" + d + "', np.load('" + path + "').tolist())\n")
	}
	out, err := exec.Command("/usr/bin/python3", "-c", script.String()).CombinedOutput()
	require.NoError(t, err, string(out))
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		d, got, _ := strings.Cut(line, " ")
		assert.Equal(t, want[d], got, d)
	}
}

// TestNpyMakeShowEveryDType: npy make accepts negative numbers, npy show
// prints values (not a byte count) for every dtype .npy can hold.
func TestNpyMakeShowEveryDType(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ dtype, show string }{
		{"pred", "pred[3] [true false true]"},
		{"s8", "s8[3] [-1 2 -128]"},
		{"s16", "s16[3] [-1 2 -128]"},
		{"s32", "s32[3] [-1 2 -128]"},
		{"s64", "s64[3] [-1 2 -128]"},
		{"u8", "u8[3] [1 2 128]"},
		{"u16", "u16[3] [1 2 128]"},
		{"u32", "u32[3] [1 2 128]"},
		{"u64", "u64[3] [1 2 128]"},
		{"f16", "f16[3] [-1.5 2 -128]"},
		{"f32", "f32[3] [-1.5 2 -128]"},
		{"f64", "f64[3] [-1.5 2 -128]"},
		{"c64", "c64[3] [-1.5+0j 2-3j 0-128j]"},
		{"c128", "c128[3] [-1.5+0j 2-3j 0-128j]"},
	} {
		t.Run(tc.dtype, func(t *testing.T) {
			vals := map[string][]string{
				"pred": {"true", "0", "1"}, "c64": {"-1.5", "2-3j", "-128j"}, "c128": {"-1.5", "2-3j", "-128j"},
				"f16": {"-1.5", "2", "-128"}, "f32": {"-1.5", "2", "-128"}, "f64": {"-1.5", "2", "-128"},
				"u8": {"1", "2", "128"}, "u16": {"1", "2", "128"}, "u32": {"1", "2", "128"}, "u64": {"1", "2", "128"},
			}[tc.dtype]
			if vals == nil {
				vals = []string{"-1", "2", "-128"}
			}
			path := filepath.Join(dir, tc.dtype+".npy")
			// The flag after the values, and a negative number first:
			// "-1" must be a value, not a shorthand flag.
			code, _, stderr := cli(t, append(append([]string{"npy", "make", path}, vals...), "--dtype", tc.dtype)...)
			require.Equal(t, exitOK, code, stderr)
			code, stdout, stderr := cli(t, "npy", "show", path)
			require.Equal(t, exitOK, code, stderr)
			assert.Equal(t, tc.show+"\n", stdout)
		})
	}
	code, _, stderr := cli(t, "npy", "make", filepath.Join(dir, "x.npy"), "--dtype", "bf16", "1")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "NumPy has no bfloat16 dtype")
	code, _, stderr = cli(t, "npy", "make", filepath.Join(dir, "x.npy"), "-x", "1")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "unknown shorthand flag: 'x'")
}

// TestNpyShowSummarises: a 2048×2048 array prints as NumPy summarises it
// (three items each side of "..."), not 45 MB of values.
func TestNpyShowSummarises(t *testing.T) {
	dir := t.TempDir()
	n := 2048
	vals := make([]float32, n*n)
	for i := range vals {
		vals[i] = float32(i)
	}
	path := filepath.Join(dir, "big.npy")
	require.NoError(t, tensorfile.WriteFile(path, abi.From(vals, int64(n), int64(n))))
	code, stdout, stderr := cli(t, "npy", "show", path)
	require.Equal(t, exitOK, code, stderr)
	assert.Less(t, len(stdout), 1000)
	assert.Equal(t, `f32[2048,2048]
[[0 1 2 ... 2045 2046 2047]
 [2048 2049 2050 ... 4093 4094 4095]
 [4096 4097 4098 ... 6141 6142 6143]
 ...
 [4.18816e+06 4.188161e+06 4.188162e+06 ... 4.190205e+06 4.190206e+06 4.190207e+06]
 [4.190208e+06 4.190209e+06 4.19021e+06 ... 4.192253e+06 4.192254e+06 4.192255e+06]
 [4.192256e+06 4.192257e+06 4.192258e+06 ... 4.194301e+06 4.194302e+06 4.194303e+06]]
`, stdout)
	// Small arrays are printed in full.
	require.NoError(t, tensorfile.WriteFile(path, abi.From([]int8{1, 2, 3, 4, 5, 6}, 2, 1, 3)))
	_, stdout, _ = cli(t, "npy", "show", path)
	assert.Equal(t, "s8[2,1,3]\n[[[1 2 3]]\n\n [[4 5 6]]]\n", stdout)
}

// TestBoolNpyNonZeroIsTrue: the CLI reads a bool .npy whose bytes are not
// 0/1 as NumPy does (issue 12's silent misread), from a file NumPy wrote.
func TestBoolNpyNonZeroIsTrue(t *testing.T) {
	code, stdout, stderr := cli(t, "npy", "show", "../../internal/tensorfile/testdata/numpy/bool_bytes.npy")
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, "pred[6] [false true true true true false]\n", stdout)
}

// TestRunWithoutOut: a pass-through callback needs no --out; results are
// printed instead, and "--out -" prints one.
func TestRunWithoutOut(t *testing.T) {
	dir := textWorkspace(t)
	p := func(name string) string { return filepath.Join(dir, name) }
	require.NoError(t, tensorfile.WriteFile(p("x.npy"), abi.From([]float32{1, -2, 3})))
	code, stdout, stderr := cli(t, "run", "-c", p("config.yaml"), "pass", "--in", p("x.npy"))
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, "result 0: f32[3] [1 -2 3]\n", stdout)
	assert.True(t, strings.HasPrefix(stderr, "callbox: INFO saw input callback=pass "), stderr)
	code, stdout, stderr = cli(t, "run", "-c", p("config.yaml"), "pass", "--in", p("x.npy"), "--out", "-")
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, "result 0: f32[3] [1 -2 3]\n", stdout)
}

// TestExitStatuses: every exit status the README documents, each from a
// real failure.
func TestExitStatuses(t *testing.T) {
	dir := textWorkspace(t)
	p := func(name string) string { return filepath.Join(dir, name) }
	require.NoError(t, tensorfile.WriteFile(p("x.npy"), abi.From([]float32{1, 2})))
	run := func(args ...string) (int, string) {
		code, _, stderr := cli(t, append([]string{"run", "-c", p("config.yaml")}, args...)...)
		return code, stderr
	}
	code, stderr := run("copy16", "--in", p("x.npy"), "--out", p("y.npy"))
	assert.Equal(t, exitUsage, code, "a wrong input dtype is refused before running: %s", stderr)

	code, stderr = run("pass", "--in", p("x.npy"), "--out", p("missing/y.npy"))
	assert.Equal(t, exitUsage, code, "--out into a missing directory is refused before running: %s", stderr)
	assert.Contains(t, stderr, "missing")

	code, stderr = run("copybf16", "--in", p("x.npy"), "--out", p("y.npy"))
	assert.Equal(t, exitUsage, code, "a bf16 result cannot be written as .npy: refused before running: %s", stderr)
	assert.Contains(t, stderr, "NumPy has no bfloat16 dtype")

	code, stderr = run("takebf16", "--in", p("x.npy"))
	assert.Equal(t, exitUsage, code, "a bf16 parameter cannot come from a .npy file: refused before running: %s", stderr)
	assert.Contains(t, stderr, "parameter 0 (x) is bf16[n], which no --in file can hold")
	assert.Contains(t, stderr, "x.astype(np.float32)")

	code, stderr = run("evil_error", "--in", p("x.npy"))
	assert.Equal(t, exitCallback, code, stderr)

	// An output that cannot be written after the call succeeded: the
	// directory is made read-only after the check (root ignores modes,
	// so a file in the way of the temporary name's rename is used: a
	// directory named like the output).
	require.NoError(t, os.Mkdir(p("taken.npy"), 0o755))
	require.NoError(t, os.WriteFile(p("taken.npy/keep"), nil, 0o644))
	code, stderr = run("pass", "--in", p("x.npy"), "--out", p("taken.npy"))
	assert.Equal(t, exitOutput, code, stderr)
	leftovers, _ := filepath.Glob(p(".taken.npy.*"))
	assert.Empty(t, leftovers, "no temporary file is left behind")

	code, _, stderr = cli(t, "bogus-command")
	assert.Equal(t, exitUsage, code, stderr)
	assert.Equal(t, exitOK, func() int { c, _, _ := cli(t, "npy", "show", p("x.npy")); return c }())
}

// forged lists what the hostile text in testdata/text.wat tries to put on
// the terminal; none of it may reach the output raw.
func assertNoTerminalControl(t *testing.T, what, out string) {
	t.Helper()
	for _, r := range strings.TrimSuffix(out, "\n") {
		if r == '\n' {
			continue // the CLI's own line ends, checked per line below
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || !unicode.IsPrint(r) {
			t.Errorf("%s: raw %U reached the output: %q", what, r, out)
			return
		}
	}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		assert.False(t, strings.HasPrefix(line, "callbox: callback \"scale\" ok"), "%s: a forged line: %q", what, out)
		assert.False(t, strings.HasPrefix(line, "callbox: forged"), "%s: a forged line: %q", what, out)
	}
}

// TestGuestTextCannotForgeOutput (issue 13 item 2): guest text with
// terminal escapes, a newline and a fake "ok" line, carriage return,
// backspaces, a C1 CSI and bidi overrides, through callbox.error,
// callbox.log, WASI stdout and stderr and an export name, is printed
// escaped on the guest's own line; the raw text stays in the error.
func TestGuestTextCannotForgeOutput(t *testing.T) {
	dir := textWorkspace(t)
	p := func(name string) string { return filepath.Join(dir, name) }
	require.NoError(t, tensorfile.WriteFile(p("x.npy"), abi.From([]float32{1, 2})))
	const escaped = `\x1b[2J\x1b[31mPWNED\x1b[0m\ncallbox: callback "scale" ok\r\b\b\u009b31m\u202eevil\u202c\x1b]0;title\x07 end`

	code, _, stderr := cli(t, "run", "-c", p("config.yaml"), "evil_error", "--in", p("x.npy"))
	assert.Equal(t, exitCallback, code)
	assertNoTerminalControl(t, "error line", stderr)
	assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
	assert.Contains(t, stderr, escaped)

	code, _, stderr = cli(t, "run", "-c", p("config.yaml"), "evil_log", "--in", p("x.npy"))
	assert.Equal(t, exitOK, code, stderr)
	assertNoTerminalControl(t, "log line", stderr)
	assert.True(t, strings.HasPrefix(stderr, "callbox: INFO "+escaped+" callback=evil_log "), stderr)
	assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)

	code, _, stderr = cli(t, "run", "-c", p("config.yaml"), "evil_stdout", "--in", p("x.npy"))
	assert.Equal(t, exitOK, code, stderr)
	assertNoTerminalControl(t, "WASI output", stderr)
	// The guest's newline splits its stream into lines (each a record);
	// each is escaped and starts with the CLI's own prefix.
	for _, line := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
		assert.Regexp(t, `^callbox: (INFO|WARN) `, line)
	}
	assert.Contains(t, stderr, `\x1b[2J\x1b[31mPWNED\x1b[0m`)
	assert.Contains(t, stderr, `\u202eevil\u202c`)

	code, stdout, stderr := cli(t, "inspect", p("text.wasm"))
	assertNoTerminalControl(t, "inspect", stdout+stderr)
	assert.Contains(t, stdout, `name\x1b[2J\ncallbox: forged\u202e`)
	_ = code

	// Programs still get the raw text.
	h, err := host.New(t.Context(), nil)
	require.NoError(t, err)
	defer h.Close(t.Context())
	wasm, err := os.ReadFile(p("text.wasm"))
	require.NoError(t, err)
	cb := defaultCallback("evil_error", "(x: f32[n]) -> $x")
	require.NoError(t, h.LoadModule(t.Context(), cb, wasm))
	_, err = h.Invoke(t.Context(), "evil_error", abi.From([]float32{1}))
	var ce *host.CallbackError
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.Contains(t, ce.GuestMessage, "\x1b[2J\x1b[31mPWNED\x1b[0m\ncallbox: callback \"scale\" ok\r\b\b")
}

func defaultCallback(name, sig string) config.Callback {
	cb := config.DefaultCallback()
	cb.Name, cb.Signature, cb.Module = name, sig, "text.wasm"
	cb.WASI = config.WASIMinimal
	return cb
}

// TestReadmeCommandLines parses every callbox command line in the shell
// blocks of the Markdown files against the real command tree: the
// subcommand exists, its flags exist and take the values given, and the
// positional arguments are accepted. (Running them needs files the
// examples only name.)
func TestReadmeCommandLines(t *testing.T) {
	out, err := exec.Command("git", "-C", "../..", "ls-files", "*.md").Output()
	require.NoError(t, err)
	checked := 0
	for _, file := range strings.Fields(string(out)) {
		data, err := os.ReadFile(filepath.Join("../..", file))
		require.NoError(t, err)
		inBlock, inSh := false, false
		pending := "" // a command continued with a trailing backslash
		for n, line := range strings.Split(string(data), "\n") {
			if inSh && strings.HasSuffix(strings.TrimRight(line, " "), "\\") {
				pending += strings.TrimSuffix(strings.TrimRight(line, " "), "\\") + " "
				continue
			}
			line, pending = pending+line, ""
			if strings.HasPrefix(line, "```") {
				lang := strings.TrimSpace(line[3:])
				inBlock = !inBlock
				inSh = inBlock && (lang == "sh" || lang == "")
				continue
			}
			if !inSh {
				continue
			}
			line, _, _ = strings.Cut(line, "#")
			fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "$ "))
			if len(fields) < 2 || !strings.HasSuffix(fields[0], "callbox") || strings.Contains(fields[0], ".") && fields[0] != "./callbox" {
				continue
			}
			args := fields[1:]
			t.Run(fmt.Sprintf("%s:%d", file, n+1), func(t *testing.T) {
				root := newRoot()
				cmd, rest, err := root.Find(args)
				require.NoError(t, err, "%q", line)
				require.NotEqual(t, root, cmd, "%q names no subcommand", line)
				if cmd.DisableFlagParsing {
					_, _, err = parseValueArgs(cmd, rest)
					require.NoError(t, err, "%q", line)
					return
				}
				require.NoError(t, cmd.ParseFlags(rest), "%q", line)
				require.NoError(t, cmd.ValidateArgs(cmd.Flags().Args()), "%q", line)
			})
			checked++
		}
	}
	assert.Greater(t, checked, 10)
}

// TestInspectWithoutAbortHook: a module that imports env.abort (an
// AssemblyScript build without the SDK's abort hook) is reported with its
// ABI version and signatures, and the problem says how to fix it.
func TestInspectWithoutAbortHook(t *testing.T) {
	src, err := os.ReadFile("testdata/noabort.wat")
	require.NoError(t, err)
	wasm, err := wat.Compile(string(src))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "noabort.wasm")
	require.NoError(t, os.WriteFile(path, wasm, 0o644))
	code, stdout, stderr := cli(t, "inspect", path)
	assert.Equal(t, exitUsage, code, stderr)
	assert.NotContains(t, stdout, "abi version  unknown")
	assert.Contains(t, stdout, "abi version  1 (read with the imports the host does not provide stubbed out")
	assert.Regexp(t, `scale +\(x: f32\[n\], factor: f32\[\]\) -> f32\[n\]`, stdout)
	assert.Contains(t, stdout, "imports env.abort, which the host does not provide: an AssemblyScript module built without the SDK's abort hook")
	assert.Contains(t, stdout, "asconfig.callbox.json")
}

// TestInspectStubbedProbeIsBounded: the stubbed probe runs guest code (a
// start function) under the callback defaults' timeout: an endless start
// function in a module with an unprovided import ends, and reports.
func TestInspectStubbedProbeIsBounded(t *testing.T) {
	wasm, err := wat.Compile(`(module
  (import "env" "x" (func $x))
  (memory (export "memory") 1)
  (func $s (loop $l (br $l)))
  (start $s)
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 0)))`)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "loop.wasm")
	require.NoError(t, os.WriteFile(path, wasm, 0o644))
	code, stdout, _ := cli(t, "inspect", path)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stdout, "abi version  unknown")
	assert.Contains(t, stdout, "imports env.x, which the host does not provide")
}

// TestCheckShowsEveryLimit: check prints every effective limit, fuel
// included, so a user can confirm the budget they set, and where each
// value that is not a built-in default came from: a key of the file or an
// environment variable.
func TestCheckShowsEveryLimit(t *testing.T) {
	t.Setenv("CALLBOX_CALLBACKS_SCALE_MAX_ERROR", "4KiB")
	dir := workspace(t, "    fuel: 123456\n    max_log: 8KiB\n    max_instances: 2\n    max_wait: 750ms\n    max_cpu: 20ms\n")
	code, stdout, stderr := cli(t, "check", "-c", filepath.Join(dir, "config.yaml"))
	require.Equal(t, exitOK, code, stderr)
	lines := strings.Split(stdout, "\n")
	assert.Regexp(t, `^CALLBACK +ENGINE +TIMEOUT +CPU +MEMORY +FUEL +STACK +OUTPUT +ERROR +LOG +ISOLATION +INSTANCES +WAIT +WASI +SIGNATURE`, lines[0])
	assert.Regexp(t, `^scale +wazero +50ms +none +64MiB +unlimited +default +1GiB +4KiB +64KiB +pooled +4 +10s +none +\(x: f32\[n\]`, lines[1])
	assert.Regexp(t, `^spin +wazero +50ms +20ms +64MiB +123456 +default +1GiB +4KiB +8KiB +pooled +2 +750ms +none `, lines[2])
	assert.Regexp(t, `(?m)^CALLBACK +KEY +FROM$`, stdout)
	for _, want := range []string{`spin +fuel +callbacks\.spin\.fuel`, `spin +max_cpu +callbacks\.spin\.max_cpu`, `spin +max_wait +callbacks\.spin\.max_wait`,
		`scale +max_error +CALLBOX_CALLBACKS_SCALE_MAX_ERROR \(environment\)`} {
		assert.Regexp(t, "(?m)^"+want+"$", stdout)
	}
	assert.NotRegexp(t, `(?m)^scale +max_wait `, stdout, "a built-in default is not listed")
	assert.Contains(t, stdout, "(every value not listed is the built-in default)")
}

// TestDemoSaysWhereThingsComeFrom: the demo names each module's source,
// prints the config it uses as YAML that loads (check accepts it, pointed
// at the embedded modules), shows pass-through signatures as "$x", and
// ends with where to go next.
func TestDemoSaysWhereThingsComeFrom(t *testing.T) {
	code, stdout, stderr := cli(t, "demo", "--engine", "wazero")
	require.Equal(t, exitOK, code, stderr)
	for _, want := range []string{"guests/rust/examples/scale.rs", "guests/assemblyscript/examples/tap_print.ts",
		"guests/assemblyscript/README.md", "callbox run -c config.yaml NAME --in x.npy"} {
		assert.Contains(t, stdout, want)
	}
	assert.Regexp(t, `tap_print +assemblyscript +\(x: f32\[n\]\) -> \$x `, stdout)
	// The YAML block: from "  callbacks:" to the blank line after it.
	_, rest, ok := strings.Cut(stdout, "\n  callbacks:\n")
	require.True(t, ok)
	block, _, _ := strings.Cut(rest, "\n\n")
	prebuilt, err := filepath.Abs("../../guests/prebuilt")
	require.NoError(t, err)
	yaml := "callbacks:\n" + strings.ReplaceAll(block, "guests/prebuilt", prebuilt) + "\n"
	path := filepath.Join(t.TempDir(), "demo.yaml")
	require.NoError(t, os.WriteFile(path, []byte(yaml), 0o644))
	code, out, stderr := cli(t, "check", "-c", path)
	require.Equal(t, exitOK, code, "%s\n%s", stderr, yaml)
	assert.Contains(t, out, "ok, 9 callback(s) loaded")
	assert.Regexp(t, `spin +wazero +50ms `, out)
}

// TestNpyFileKinds: a version-3.0 .npy file (NumPy writes one when the
// header needs UTF-8) reads; an .npz archive is named as such, with what
// to do; both files written by NumPy.
func TestNpyFileKinds(t *testing.T) {
	vec := "../../internal/tensorfile/testdata/numpy/"
	code, stdout, stderr := cli(t, "npy", "show", vec+"float32_v3.npy")
	require.Equal(t, exitOK, code, stderr)
	assert.True(t, strings.HasPrefix(stdout, "f32[12] [0 -0 1 -2.5 inf -inf nan "), stdout)
	code, _, stderr = cli(t, "npy", "show", vec+"archive.npz")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "this is a zip archive (an .npz file from numpy.savez?), not a .npy file: extract the array you want")
}

// TestInspectEscapesSignatureText: signature text from the module's
// callbox_signatures export that tries terminal escapes, a newline with a
// forged line and a bidi override reaches inspect's output escaped.
func TestInspectEscapesSignatureText(t *testing.T) {
	table := "ok = (x: f32[n]) -> $x\nevil\x1b[2J = (x: f32[n]) -> $x\ncallbox: forged \u202e\r\b"
	data := ""
	for _, c := range []byte(fmt.Sprintf("%c%c%c%c%s", len(table), 0, 0, 0, table)) {
		data += fmt.Sprintf(`\%02x`, c)
	}
	wasm, err := wat.Compile(`(module
  (memory (export "memory") 1)
  (data (i32.const 64) "` + data + `")
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 0))
  (func (export "callbox_signatures") (result i32) (i32.const 64))
  (func (export "ok") (param i32) (result i32) (i32.const 0)))`)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "sigs.wasm")
	require.NoError(t, os.WriteFile(path, wasm, 0o644))
	_, stdout, stderr := cli(t, "inspect", path)
	assertNoTerminalControl(t, "inspect", stdout+stderr)
	assert.Contains(t, stdout, `callbox: forged \u202e\r\b`, "the bad line is quoted, escaped, inside a problem")
}

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/guests/prebuilt"
	"github.com/seed4b3e0ccb/callbox/internal/tensorfile"
	"github.com/seed4b3e0ccb/callbox/internal/testing/workerbin"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

// cli runs the command in-process and returns its exit status and output.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// workspace writes the prebuilt scale and hostile modules and a config
// naming them into a temporary directory.
func workspace(t *testing.T, extra string) string {
	t.Helper()
	dir := t.TempDir()
	for _, m := range [][2]string{{"rust", "scale"}, {"wat", "hostile"}} {
		b, err := prebuilt.Module(m[0], m[1])
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, m[1]+".wasm"), b, 0o644))
	}
	cfg := `defaults:
  timeout: 50ms
callbacks:
  scale:
    module: scale.wasm
  spin:
    module: hostile.wasm
    signature: "(x: f32[n]) -> f32[n]"
` + extra
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o644))
	require.NoError(t, tensorfile.WriteFile(filepath.Join(dir, "x.npy"), abi.From([]float32{1, 2, 3}, 3)))
	require.NoError(t, tensorfile.WriteFile(filepath.Join(dir, "f.npy"), abi.Scalar[float32](2)))
	return dir
}

func TestRun(t *testing.T) {
	dir := workspace(t, "")
	p := func(name string) string { return filepath.Join(dir, name) }
	code, stdout, stderr := cli(t, "run", "-c", p("config.yaml"), "scale", "--in", p("x.npy"), "--in", p("f.npy"), "--out", p("y.npy"), "--stats")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "bytes in")
	assert.Contains(t, stdout, "new instance")
	y, err := tensorfile.ReadFile(p("y.npy"))
	require.NoError(t, err)
	assert.Equal(t, []float32{2, 4, 6}, abi.MustView[float32](y))
}

func TestRunCallbackFailure(t *testing.T) {
	dir := workspace(t, "")
	p := func(name string) string { return filepath.Join(dir, name) }
	code, _, stderr := cli(t, "run", "-c", p("config.yaml"), "spin", "--in", p("x.npy"), "--out", p("y.npy"))
	assert.Equal(t, exitCallback, code)
	assert.Equal(t, "callbox: callback \"spin\" failed: timeout after 50ms (at func[2] @0xcb) (kind Timeout)\n", stderr)
	_, err := os.Stat(p("y.npy"))
	assert.True(t, os.IsNotExist(err), "a failed call writes no output file")
}

func TestRunUsageErrors(t *testing.T) {
	dir := workspace(t, "")
	p := func(name string) string { return filepath.Join(dir, name) }
	cases := map[string]struct {
		args []string
		want string
	}{
		"no config":    {[]string{"run", "scale"}, "-c CONFIG is required"},
		"no name":      {[]string{"run", "-c", p("config.yaml")}, "accepts 1 arg"},
		"unknown":      {[]string{"run", "-c", p("config.yaml"), "nope"}, `no callback "nope" (have: scale, spin)`},
		"bad flag":     {[]string{"run", "--bogus"}, "unknown flag: --bogus"},
		"missing file": {[]string{"run", "-c", p("config.yaml"), "scale", "--in", p("none.npy"), "--out", p("y.npy")}, "none.npy"},
		"wrong shape":  {[]string{"run", "-c", p("config.yaml"), "scale", "--in", p("x.npy"), "--in", p("x.npy"), "--out", p("y.npy")}, "argument 1 (factor): expected f32[], got f32[3]"},
		"outs count":   {[]string{"run", "-c", p("config.yaml"), "scale", "--in", p("x.npy"), "--in", p("f.npy"), "--out", p("y.npy"), "--out", p("z.npy")}, "1 results ((x: f32[n], factor: f32[]) -> f32[n]) but 2 --out files were given"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, _, stderr := cli(t, tc.args...)
			assert.Equal(t, exitUsage, code, stderr)
			assert.Contains(t, stderr, tc.want)
			assert.True(t, strings.HasPrefix(stderr, "callbox: "))
		})
	}
}

func TestConfigErrorNamesFileAndKey(t *testing.T) {
	dir := workspace(t, "    timout: 1s\n")
	code, _, stderr := cli(t, "check", "-c", filepath.Join(dir, "config.yaml"))
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "config.yaml")
	assert.Contains(t, stderr, "callbacks.spin.timout")
}

func TestCheck(t *testing.T) {
	dir := workspace(t, "")
	code, stdout, stderr := cli(t, "check", "-c", filepath.Join(dir, "config.yaml"))
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "(x: f32[n], factor: f32[]) -> f32[n]")
	assert.Contains(t, stdout, "ok, 2 callback(s) loaded")
}

// TestCheckProcess: check reports a callback under isolation: process,
// its worker and every lockdown step, applied or not.
func TestCheckProcess(t *testing.T) {
	if !engines.ProcessIsolationAvailable() {
		t.Skip("isolation: process needs Linux")
	}
	worker, err := workerbin.Path(false)
	require.NoError(t, err)
	dir := workspace(t, "  walled:\n    module: scale.wasm\n    export: scale\n    isolation: process\nworker: "+worker+"\n")
	code, stdout, stderr := cli(t, "check", "-c", filepath.Join(dir, "config.yaml"))
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, `(?m)^walled .* process `, stdout)
	assert.Contains(t, stdout, "isolation: process, each callback's worker and its lockdown:")
	for _, step := range []string{"seccomp", "no_new_privs", "rlimit_as", "rlimit_nofile", "rlimit_core", "descriptors", "environment"} {
		assert.Regexp(t, `(?m)^walled +\d+ +`+step+` +applied `, stdout)
	}
	assert.Regexp(t, `(?m)^walled +\d+ +landlock +(applied|NOT applied) `, stdout, "landlock is reported either way")
	assert.Contains(t, stdout, "ok, 3 callback(s) loaded")
}

func TestInspect(t *testing.T) {
	dir := workspace(t, "")
	code, stdout, stderr := cli(t, "inspect", filepath.Join(dir, "scale.wasm"))
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "abi version  1")
	assert.Contains(t, stdout, "signatures   from custom section")
	assert.Regexp(t, `scale +\(x: f32\[n\], factor: f32\[\]\) -> f32\[n\]`, stdout)

	// A module that is not a callback module: problems listed, exit 2.
	bad := filepath.Join(dir, "bad.wasm")
	require.NoError(t, os.WriteFile(bad, []byte("\x00asm\x01\x00\x00\x00"), 0o644))
	code, stdout, stderr = cli(t, "inspect", bad)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stdout, "missing required export callbox_abi_version")
	assert.Contains(t, stderr, "would not load")
}

func TestDemo(t *testing.T) {
	code, stdout, stderr := cli(t, "demo", "--engine", "wazero")
	require.Equal(t, exitOK, code, stderr)
	for _, want := range []string{"barrier: all 6 calls done in order", "-> Timeout", "-> MemoryLimit", "-> ABIViolation", "-> GuestError",
		"summary (wazero): 6 chained calls ok, 4 hostile calls contained, host still serving"} {
		assert.Contains(t, stdout, want)
	}
}

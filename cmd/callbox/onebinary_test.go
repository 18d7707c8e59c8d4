package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/guests/prebuilt"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

// goTool is the go command of the toolchain running the tests.
func goTool() string { return filepath.Join(runtime.GOROOT(), "bin", "go") }

// TestOneBinary builds the CLI alone into an empty directory, as `go
// build ./cmd/callbox` does for an operator, and runs process-isolated
// callbacks on both engines with it: the CLI serves as its own worker, so
// no callbox-worker file exists anywhere it looks and none is named.
func TestOneBinary(t *testing.T) {
	if !engines.ProcessIsolationAvailable() {
		t.Skip("isolation: process runs on Linux only")
	}
	bin := t.TempDir()
	cli := filepath.Join(bin, "callbox")
	build := exec.Command(goTool(), "build", "-o", cli, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/callbox:\n%s", out)

	dir := t.TempDir()
	wasm, err := prebuilt.Module("rust", "scale")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "scale.wasm"), wasm, 0o644))
	cfg := `callbacks:
  scale_wazero:
    module: scale.wasm
    export: scale
    engine: wazero
    isolation: process
  scale_wasmtime:
    module: scale.wasm
    export: scale
    engine: wasmtime
    isolation: process
    max_stack: 1MiB
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "callbox.yaml"), []byte(cfg), 0o644))
	// Nothing names a worker: no CALLBOX_WORKER, a bare PATH.
	sh := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(cli, args...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir}
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "callbox %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}
	sh("npy", "make", "x.npy", "1", "-2", "3.5")
	sh("npy", "make", "f.npy", "--shape", "scalar", "2")
	for _, name := range []string{"scale_wazero", "scale_wasmtime"} {
		assert.Equal(t, "result 0: f32[3] [2 -4 7]\n", sh("run", "-c", "callbox.yaml", name, "--in", "x.npy", "--in", "f.npy"), name)
	}
	report := sh("check", "-c", "callbox.yaml")
	for _, name := range []string{"scale_wazero", "scale_wasmtime"} {
		assert.Regexp(t, name+` +[0-9]+ +seccomp +applied`, report, "%s runs in a locked-down worker", name)
	}
	entries, err := os.ReadDir(bin)
	require.NoError(t, err)
	require.Len(t, entries, 1, "the CLI is the only file it needs")
	_, err = os.Stat(filepath.Join(dir, engines.WorkerName))
	require.True(t, os.IsNotExist(err))
}

// TestWorkerNameServes: run under the worker's name by hand, the CLI is
// the worker, which says it is started by a host and exits 2 (its usage
// status), instead of running the CLI.
func TestWorkerNameServes(t *testing.T) {
	if !engines.ProcessIsolationAvailable() {
		t.Skip("isolation: process runs on Linux only")
	}
	bin := t.TempDir()
	cli := filepath.Join(bin, engines.WorkerName)
	out, err := exec.Command(goTool(), "build", "-o", cli, ".").CombinedOutput()
	require.NoError(t, err, "go build ./cmd/callbox:\n%s", out)
	out, err = exec.Command(cli, "version").CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	assert.Equal(t, 2, exit.ExitCode())
	assert.Contains(t, string(out), "started by a callbox host")
}

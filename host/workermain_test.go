package host_test

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

// serviceMain is an operator's program: its own module, outside the
// repository, embedding the host, with the one documented line that
// makes it its own worker.
const serviceMain = `package main

import (
	"context"
	"fmt"
	"os"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
)

func main() {
	host.WorkerMain()

	ctx := context.Background()
	wasm, err := os.ReadFile(os.Args[1])
	if err != nil {
		panic(err)
	}
	h, err := host.New(ctx, nil)
	if err != nil {
		panic(err)
	}
	defer h.Close(ctx)
	for _, engine := range []string{config.EngineWazero, config.EngineWasmtime} {
		cb := config.DefaultCallback()
		cb.Name, cb.Export, cb.Engine, cb.Isolation = "scale_"+engine, "scale", engine, config.IsolationProcess
		if err := h.LoadModule(ctx, cb, wasm); err != nil {
			panic(err)
		}
		out, err := h.Invoke(ctx, cb.Name, abi.From([]float32{1, 2, 3}), abi.Scalar[float32](2))
		if err != nil {
			panic(err)
		}
		c, err := h.Lookup(cb.Name)
		if err != nil {
			panic(err)
		}
		w, walled := c.Worker()
		fmt.Println(cb.Name, abi.MustView[float32](out[0]), walled && w.PID > 0 && w.PID != os.Getpid())
	}
}
`

// TestServiceOutsideTheRepository builds a service from a Go module of
// its own outside the repository (callbox required through a replace
// directive, as a fork or a vendored checkout would be), offline, and
// runs process-isolated callbacks on both engines with no callbox-worker
// anywhere: host.WorkerMain makes the service its own worker.
func TestServiceOutsideTheRepository(t *testing.T) {
	if !engines.ProcessIsolationAvailable() {
		t.Skip("isolation: process runs on Linux only")
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	dir := t.TempDir()
	mod := "module example.com/service\n\ngo 1.26.0\n\nrequire github.com/seed4b3e0ccb/callbox v1.4.0\n\nreplace github.com/seed4b3e0ccb/callbox => " + root + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(serviceMain), 0o644))
	wasm, err := prebuilt.Module("rust", "scale")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "scale.wasm"), wasm, 0o644))

	gocmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	build := exec.Command(gocmd, "build", "-mod=mod", "-o", "service", ".")
	build.Dir = dir
	// Offline: every module comes from the module cache the repository's
	// own build filled.
	build.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=", "GOWORK=off")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "building the service:\n%s", out)

	run := exec.Command(filepath.Join(dir, "service"), "scale.wasm")
	run.Dir = dir
	run.Env = []string{"PATH=/usr/bin:/bin"}
	out, err = run.CombinedOutput()
	require.NoError(t, err, "the service:\n%s", out)
	assert.Equal(t, "scale_wazero [2 4 6] true\nscale_wasmtime [2 4 6] true\n", string(out))
	assert.False(t, strings.Contains(string(out), engines.WorkerName))
}

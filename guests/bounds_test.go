package guests_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
)

// TestAssemblyScriptIndexBounds: the AssemblyScript SDK's x[i] and
// x[i] = v are inlined into the caller's loop (frame.ts), and still
// bounds-checked: an index past the end, or negative, aborts the call with
// the SDK's message and the call writes no output; an index in range
// works. Built from guests/assemblyscript/testdata/bounds.ts with the
// SDK's release settings.
func TestAssemblyScriptIndexBounds(t *testing.T) {
	asc, err := filepath.Abs("assemblyscript/node_modules/.bin/asc")
	require.NoError(t, err)
	if _, err := os.Stat(asc); err != nil {
		t.Skipf("the AssemblyScript compiler is not installed in guests/assemblyscript (npm ci; scripts/install-toolchains.sh): %v", err)
	}
	out := filepath.Join(t.TempDir(), "bounds.wasm")
	cmd := exec.Command(asc, "testdata/bounds.ts", "--config", "asconfig.json", "--target", "release", "--outFile", out)
	cmd.Dir = "assemblyscript"
	msg, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", msg)
	wasm, err := os.ReadFile(out)
	require.NoError(t, err)

	ctx := context.Background()
	for _, engine := range engineNames() {
		t.Run(engine, func(t *testing.T) {
			h, err := host.New(ctx, nil)
			require.NoError(t, err)
			defer h.Close(ctx)
			for _, name := range []string{"read", "write"} {
				cb := config.DefaultCallback()
				cb.Name, cb.Export, cb.Module, cb.Engine = name, name, "bounds.wasm", engine
				require.NoError(t, h.LoadModule(ctx, cb, wasm))
			}
			x := abi.From([]float32{1, 2, 3, 4})
			got, err := h.Invoke(ctx, "read", x, abi.Scalar[int32](3))
			require.NoError(t, err)
			assert.Equal(t, []float32{4}, abi.MustView[float32](got[0]))

			for _, at := range []int32{4, -1, 1 << 30} {
				_, err := h.Invoke(ctx, "read", x, abi.Scalar(at))
				require.Error(t, err, "read x[%d]", at)
				assert.ErrorIs(t, err, abi.GuestError, "read x[%d]", at)
				assert.ErrorContains(t, err, "is out of range for a tensor of 4 elements")

				y := []float32{9, 9, 9, 9}
				_, err = h.Do(ctx, &host.Request{Callback: "write", Inputs: []abi.Tensor{x, abi.Scalar(at)}, Outputs: []abi.Tensor{abi.From(y)}})
				require.Error(t, err, "write y[%d]", at)
				assert.ErrorContains(t, err, "is out of range for a tensor of 4 elements")
				assert.Equal(t, []float32{9, 9, 9, 9}, y, "a failed call writes no output")
			}
			y := make([]float32, 4)
			_, err = h.Do(ctx, &host.Request{Callback: "write", Inputs: []abi.Tensor{x, abi.Scalar[int32](2)}, Outputs: []abi.Tensor{abi.From(y)}})
			require.NoError(t, err)
			assert.Equal(t, []float32{1, 2, 1, 4}, y)
		})
	}
}

package guests_test

import (
	"context"
	"log/slog"
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

// TestProfileSlowC: the slow C callback of the authors' guide
// (testdata/profile/smooth.c), built as a debug build, profiles to what
// the guide says: median holds most of the fuel, one call per value,
// named with its source file and line; the fuel is the same on both
// engines, to the unit.
func TestProfileSlowC(t *testing.T) {
	out := t.TempDir()
	cmd := exec.Command("guests/c/build.sh", "guests/testdata/profile/smooth.c")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "DEBUG=1", "OUT="+out)
	msg, err := cmd.CombinedOutput()
	require.NoError(t, err, "building smooth.c: %s", msg)
	wasm, err := os.ReadFile(filepath.Join(out, "c-freestanding", "smooth.wasm"))
	require.NoError(t, err)

	ctx := context.Background()
	h, err := host.New(ctx, nil, host.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	defer h.Close(ctx)
	x := make([]float32, 5000)
	for i := range x {
		x[i] = float32((i * 7919) % 1000)
	}
	fuel := map[string]uint64{}
	for _, engine := range engineNames() {
		cb := config.DefaultCallback()
		cb.Name, cb.Export, cb.Engine = "smooth_"+engine, "smooth", engine
		require.NoError(t, h.LoadModule(ctx, cb, wasm))
		p, err := h.Profile(ctx, cb.Name, 2, abi.From(x))
		require.NoError(t, err)
		require.NotEmpty(t, p.Functions)
		top := p.Functions[0]
		assert.Equal(t, "median", top.Frame.Func, "%s: %+v", engine, p.Functions[:3])
		assert.Equal(t, uint64(2*len(x)), top.Self.Calls, engine)
		assert.Equal(t, "guests/testdata/profile/smooth.c", top.Frame.File, engine)
		assert.Positive(t, top.Frame.Line, engine)
		var all uint64
		for _, f := range p.Functions {
			all += f.Self.Fuel
		}
		assert.Greater(t, float64(top.Self.Fuel)/float64(all), 0.8, "%s: median's share of the fuel", engine)
		fuel[engine] = all
	}
	if len(fuel) == 2 {
		assert.Equal(t, fuel["wazero"], fuel["wasmtime"], "the same fuel on both engines")
	}
}

package host_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

// Fuel is one counter on both engines, and loading does not spend it: the
// scale example of every SDK loads with a budget of 1 on both engines
// (loading used to need a budget that differed by engine: an
// AssemblyScript module loaded with 30,000 on wasmtime but not on wazero),
// the same call uses exactly the same fuel on both, and a budget one unit
// short of that fails on both while that budget succeeds on both (for the
// guests that import no WASI: Go's runtime reads clocks and random bytes,
// and takes a different path on every call).
func TestFuelSameOnBothEngines(t *testing.T) {
	if !engines.WasmtimeAvailable() {
		t.Skip("this build has no wasmtime engine (cgo disabled)")
	}
	paths, _ := filepath.Glob("../guests/build/*/scale.wasm")
	if len(paths) == 0 {
		t.Skip("no built guests: run make guests")
	}
	ctx := context.Background()
	x := abi.From([]float32{1, 2, 3, 4, 5, 6, 7, 8})
	f := abi.Scalar[float32](2)
	for _, path := range paths {
		lang := filepath.Base(filepath.Dir(path))
		t.Run(lang, func(t *testing.T) {
			wasm, err := os.ReadFile(path)
			require.NoError(t, err)
			m, err := sandbox.ParseModule(wasm)
			require.NoError(t, err)
			wasi := m.ImportsWASI()
			if wasi && testing.Short() {
				t.Skip("the Go guest is 1.9 MB: compiled twice per engine, seconds")
			}
			h, err := host.New(ctx, nil, host.WithLogger(slog.New(slog.DiscardHandler)))
			require.NoError(t, err)
			defer h.Close(ctx)
			load := func(engine string, fuel uint64) string {
				cb := config.DefaultCallback()
				cb.Name = fmt.Sprintf("%s_%s_%d", engine, lang, len(h.Callbacks()))
				cb.Module, cb.Export, cb.Engine = path, "scale", engine
				cb.Limits.MaxMemory = 256 << 20
				cb.Limits.Fuel = fuel
				if wasi {
					cb.WASI = config.WASIMinimal
				}
				require.NoError(t, h.LoadModule(ctx, cb, wasm), "%s on %s with fuel %d", path, engine, fuel)
				return cb.Name
			}
			used := map[string]uint64{}
			for _, e := range []string{config.EngineWazero, config.EngineWasmtime} {
				load(e, 1) // loading spends none of the budget
				name := load(e, 1<<40)
				out := abi.From(make([]float32, 8))
				st, err := h.Do(ctx, &host.Request{Callback: name, Inputs: []host.Tensor{x, f}, Outputs: []host.Tensor{out}})
				require.NoError(t, err)
				require.True(t, st.FuelKnown)
				assert.Equal(t, []float32{2, 4, 6, 8, 10, 12, 14, 16}, abi.MustView[float32](out))
				used[e] = st.Fuel
			}
			if wasi {
				// A guest that reads clocks or random bytes (Go's runtime
				// does) may take a different path on every call, whatever
				// the engine: only deterministic guests must agree exactly.
				t.Logf("fuel used by a WASI guest: wazero %d, wasmtime %d", used[config.EngineWazero], used[config.EngineWasmtime])
				return
			}
			require.Equal(t, used[config.EngineWazero], used[config.EngineWasmtime], "the same call must use the same fuel on both engines")
			need := used[config.EngineWazero]
			require.Greater(t, need, uint64(1))
			for _, e := range []string{config.EngineWazero, config.EngineWasmtime} {
				out := abi.From(make([]float32, 8))
				_, err := h.Do(ctx, &host.Request{Callback: load(e, need-1), Inputs: []host.Tensor{x, f}, Outputs: []host.Tensor{out}})
				require.ErrorIs(t, err, host.FuelExhausted, "%s with one unit short", e)
				_, err = h.Do(ctx, &host.Request{Callback: load(e, need), Inputs: []host.Tensor{x, f}, Outputs: []host.Tensor{out}})
				require.NoError(t, err, "%s with exactly the fuel it needs", e)
			}
		})
	}
}

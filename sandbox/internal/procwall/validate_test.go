//go:build linux

package procwall_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/internal/testing/hostile"
	"github.com/seed4b3e0ccb/callbox/internal/testing/workerbin"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/procwall"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/wasmtime"
)

// TestWorkerValidatesWhatItCompiles: the worker does not trust the host
// to have validated a module. Handed an invalid one directly (the
// engine's Compile method, which the host reaches only after its own
// validation), it refuses it before its engine rewrites it, and the
// refusal crosses the wire as the same typed error, with the validator's
// reason, on both engines, with and without fuel.
func TestWorkerValidatesWhatItCompiles(t *testing.T) {
	worker, err := workerbin.Path(false)
	require.NoError(t, err)
	engines := []string{config.EngineWazero}
	if wasmtime.Available {
		engines = append(engines, config.EngineWasmtime)
	}
	ctx := context.Background()
	for _, name := range engines {
		e, err := procwall.New(ctx, procwall.Options{Engine: name, Worker: worker})
		require.NoError(t, err)
		for _, fuel := range []uint64{0, 1_000_000} {
			for _, c := range hostile.PastEndCases() {
				if c.Kind != abi.InvalidArgument {
					continue
				}
				m, err := e.Compile(ctx, c.Wasm, sandbox.ModuleConfig{Name: c.Name, Limits: config.Limits{Timeout: time.Second, Fuel: fuel}})
				if m != nil {
					_ = m.Close(ctx)
				}
				var inv *sandbox.InvalidModuleError
				require.ErrorAs(t, err, &inv, "%s on %s, fuel %d", c.Name, name, fuel)
				assert.Equal(t, "wazero's validator", inv.Validator)
				assert.Contains(t, err.Error(), c.Msg)
			}
		}
		require.NoError(t, e.Close(ctx))
	}
}

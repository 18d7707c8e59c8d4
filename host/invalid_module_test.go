package host_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/testing/hostile"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wasmspec"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

// loadWays are the ways a module can be loaded that change what the host
// does with it before an engine compiles it: each engine, with and
// without fuel (the metered rewrite on wasmtime), in each isolation.
type loadWay struct {
	name      string
	engine    string
	fuel      uint64
	isolation string
}

func loadWays() []loadWay {
	var ways []loadWay
	isolations := []string{config.IsolationPooled, config.IsolationFresh}
	if engines.ProcessIsolationAvailable() {
		isolations = append(isolations, config.IsolationProcess)
	}
	for _, e := range engineNames() {
		for _, fuel := range []uint64{0, 1_000_000} {
			for _, iso := range isolations {
				ways = append(ways, loadWay{name: fmt.Sprintf("%s/fuel=%d/%s", e, fuel, iso), engine: e, fuel: fuel, isolation: iso})
			}
		}
	}
	return ways
}

func invalidHost(t *testing.T) *host.Host {
	t.Helper()
	opts := []host.Option{host.WithLogger(slog.New(slog.DiscardHandler))}
	if engines.ProcessIsolationAvailable() {
		opts = append(opts, host.WithWorker(workerPath(t, false)))
	}
	h, err := host.New(context.Background(), nil, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	return h
}

func (w loadWay) callback(name string) config.Callback {
	cb := config.DefaultCallback()
	cb.Name, cb.Export, cb.Signature = name, "run", "(x: f32[n]) -> f32[n]"
	cb.Engine, cb.Isolation = w.engine, w.isolation
	cb.Limits.Fuel = w.fuel
	cb.Limits.Timeout = time.Second
	return cb
}

// TestPastEndModulesAreRefusedAtLoad: a module that names the global,
// label, type, function or local one past its own (what the meter's
// rewrite adds to every metered module), or imports the meter's own
// refill, is refused at load on every engine, with and without fuel, in
// every isolation, with the validator's reason; the host serves on.
func TestPastEndModulesAreRefusedAtLoad(t *testing.T) {
	h := invalidHost(t)
	ctx := context.Background()
	for _, w := range loadWays() {
		for _, c := range hostile.PastEndCases() {
			t.Run(w.name+"/"+c.Name, func(t *testing.T) {
				err := h.LoadModule(ctx, w.callback("past_"+c.Name), c.Wasm)
				require.ErrorIs(t, err, c.Kind, c.What)
				assert.Contains(t, err.Error(), c.Msg)
				if c.Kind == host.InvalidArgument {
					assert.Contains(t, err.Error(), "not a valid WebAssembly module")
				}
			})
		}
	}
	assert.Empty(t, h.Callbacks(), "nothing loaded")
}

// TestSpecInvalidModulesAreRefusedAtLoad: every binary module the
// WebAssembly spec suite calls invalid or malformed (the suites callbox
// enables) is refused at load as InvalidArgument on every engine and
// under isolation: process, where the host refuses it before a worker
// starts.
func TestSpecInvalidModulesAreRefusedAtLoad(t *testing.T) {
	invalid, err := wasmspec.Invalids(wasmspec.Enabled...)
	require.NoError(t, err)
	require.Greater(t, len(invalid), 2500, "the suites' invalid and malformed binary modules")
	if raceEnabled {
		// The race detector has nothing concurrent to watch here; every
		// fifth module keeps the run short.
		var some []wasmspec.Invalid
		for i := 0; i < len(invalid); i += 5 {
			some = append(some, invalid[i])
		}
		invalid = some
	}
	h := invalidHost(t)
	ctx := context.Background()
	var ways []loadWay
	for _, w := range loadWays() {
		if w.fuel == 0 && w.isolation != config.IsolationFresh {
			ways = append(ways, w) // pooled and process, on each engine
		}
	}
	for _, w := range ways {
		t.Run(w.name, func(t *testing.T) {
			for _, m := range invalid {
				err := h.LoadModule(ctx, w.callback("spec"), m.Wasm)
				if !assert.ErrorIs(t, err, host.InvalidArgument, "%s (%s)", m.Where, m.Text) {
					continue
				}
				assert.Contains(t, err.Error(), "not a valid WebAssembly module", m.Where)
			}
		})
	}
	assert.Empty(t, h.Callbacks(), "nothing loaded")
}

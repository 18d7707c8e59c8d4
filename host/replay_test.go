package host_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
)

// flakyWat fails its third call with INVALID_ARGUMENT: the failure
// depends on the instance's history.
const flakyWat = `(module
  (memory (export "memory") 1)
  (global $n (mut i32) (i32.const 0))
  (func (export "callbox_abi_version") (result i32) i32.const 1)
  (func (export "callbox_alloc") (param i32 i32) (result i32) i32.const 1024)
  (func (export "flaky") (param i32) (result i32)
    (global.set $n (i32.add (global.get $n) (i32.const 1)))
    (if (result i32) (i32.eq (global.get $n) (i32.const 3)) (then (i32.const 3)) (else (i32.const 0)))))`

// TestRecordFailures: a callback with record_failures leaves a bundle per
// failed call and none per successful one: the module, the inputs as
// .npy, the settings, how many calls the instance had served, and the
// outcome; the newest MaxBundles are kept; no path inside is absolute;
// a bundle whose module changed is refused.
func TestRecordFailures(t *testing.T) {
	ctx := context.Background()
	for _, engine := range engineNames() {
		dir := t.TempDir()
		h := newHost(t, engine, func(cb *config.Callback) { cb.RecordFailures = dir })
		x := abi.From([]float32{1, 2, 3})
		_, err := h.Invoke(ctx, "scale", x, abi.Scalar[float32](2))
		require.NoError(t, err)
		_, err = h.Invoke(ctx, "half_then_trap", x)
		require.Error(t, err)
		_, err = os.Stat(filepath.Join(dir, "scale"))
		assert.True(t, os.IsNotExist(err), "%s: a successful call records nothing", engine)

		bundles, err := filepath.Glob(filepath.Join(dir, "half_then_trap", "*"))
		require.NoError(t, err)
		require.Len(t, bundles, 1, engine)
		b, wasm, inputs, err := host.ReadBundle(bundles[0])
		require.NoError(t, err, engine)
		assert.Equal(t, testkitWasm(t), wasm)
		require.Len(t, inputs, 1)
		assert.Equal(t, []float32{1, 2, 3}, abi.MustView[float32](inputs[0]))
		assert.Equal(t, "half_then_trap", b.Export)
		assert.Equal(t, engine, b.Engine)
		assert.Equal(t, "Unreachable", b.Outcome.Kind, engine)
		assert.NotEmpty(t, b.Outcome.Frames, engine)
		data, err := os.ReadFile(filepath.Join(bundles[0], "bundle.json"))
		require.NoError(t, err)
		assert.NotContains(t, string(data), `": "/`, "%s: no absolute path in the bundle", engine)

		for range host.MaxBundles + 2 {
			_, err = h.Invoke(ctx, "half_then_trap", x)
			require.Error(t, err)
		}
		bundles, err = filepath.Glob(filepath.Join(dir, "half_then_trap", "*"))
		require.NoError(t, err)
		assert.Len(t, bundles, host.MaxBundles, "%s: the oldest go first", engine)

		require.NoError(t, os.WriteFile(filepath.Join(bundles[0], "module.wasm"), append(wasm, 0), 0o600))
		_, _, _, err = host.ReadBundle(bundles[0])
		require.Error(t, err)
		assert.Contains(t, err.Error(), "the module was changed after the call was recorded")
	}
}

// TestRecordFailuresHistory: a failure that depends on the instance's
// earlier calls says how many there were.
func TestRecordFailuresHistory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	h, err := host.New(ctx, nil)
	require.NoError(t, err)
	defer h.Close(ctx)
	cb := config.DefaultCallback()
	cb.Name, cb.Signature, cb.RecordFailures, cb.MaxInstances = "flaky", "() -> ()", dir, 1
	require.NoError(t, h.LoadModule(ctx, cb, wat.Must(flakyWat)))
	for i := range 3 {
		_, err := h.Invoke(ctx, "flaky")
		if i < 2 {
			require.NoError(t, err)
		} else {
			require.ErrorIs(t, err, host.GuestError)
		}
	}
	bundles, err := filepath.Glob(filepath.Join(dir, "flaky", "*"))
	require.NoError(t, err)
	require.Len(t, bundles, 1)
	b, _, inputs, err := host.ReadBundle(bundles[0])
	require.NoError(t, err)
	assert.Equal(t, uint64(2), b.CallsBefore)
	assert.Empty(t, inputs)
	assert.True(t, strings.HasPrefix(b.Outcome.Message, "guest returned INVALID_ARGUMENT"), b.Outcome.Message)
}

package sandbox_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/internal/sandbox"
)

// The public face: the engines this build runs, and what each enforces.
func TestEngines(t *testing.T) {
	ctx := context.Background()
	assert.Equal(t, config.EngineWazero, sandbox.Engines()[0], "the default first")
	assert.Equal(t, sandbox.WasmtimeAvailable, sandbox.Available(config.EngineWasmtime))
	assert.False(t, sandbox.Available("v8"))
	_, err := sandbox.New(ctx, "v8", sandbox.Options{})
	assert.ErrorContains(t, err, `unknown engine "v8"`)
	for _, name := range sandbox.Engines() {
		e, err := sandbox.New(ctx, name, sandbox.Options{})
		require.NoError(t, err, name)
		assert.Equal(t, name, e.Name())
		assert.Equal(t, sandbox.Version(name), e.Version())
		assert.True(t, e.Supports(sandbox.FeatureFuel), "%s meters fuel", name)
		require.NoError(t, e.Close(ctx))
	}
	if !sandbox.WasmtimeAvailable {
		_, err := sandbox.New(ctx, config.EngineWasmtime, sandbox.Options{})
		assert.Error(t, err, "a build without cgo has no wasmtime")
	}
}

package engines_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

// The public face: the engines this build runs, and what each enforces.
func TestEngines(t *testing.T) {
	ctx := context.Background()
	assert.Equal(t, config.EngineWazero, engines.Engines()[0], "the default first")
	assert.Equal(t, engines.WasmtimeAvailable(), engines.Available(config.EngineWasmtime))
	assert.False(t, engines.Available("v8"))
	_, err := engines.New(ctx, "v8", engines.Options{})
	assert.ErrorContains(t, err, `unknown engine "v8"`)
	for _, name := range engines.Engines() {
		e, err := engines.New(ctx, name, engines.Options{})
		require.NoError(t, err, name)
		assert.Equal(t, name, e.Name())
		assert.Equal(t, engines.Version(name), e.Version())
		assert.True(t, e.Supports(sandbox.FeatureFuel), "%s meters fuel", name)
		require.NoError(t, e.Close(ctx))
	}
	if !engines.WasmtimeAvailable() {
		_, err := engines.New(ctx, config.EngineWasmtime, engines.Options{})
		assert.Error(t, err, "a build without cgo has no wasmtime")
	}
}

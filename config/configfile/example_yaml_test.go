package configfile

// config/example.yaml, the documented example: it loads as documented
// and shows every key.

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/config"
)

func TestExampleLoads(t *testing.T) {
	cfg, err := LoadEnv(examplePath, nil)
	require.NoError(t, err)
	require.NoError(t, cfg.Validate())
	assert.Equal(t, config.DefaultCallback(), cfg.Defaults, "the example's defaults block shows the built-in values")
	abs, err := filepath.Abs("../..") // example.yaml's paths are relative to config/
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(abs, ".cache", "callbox"), cfg.CacheDir)
	require.Len(t, cfg.Callbacks, 3)

	scale := mustCallback(t, cfg, "scale")
	assert.Equal(t, filepath.Join(abs, "guests", "build", "rust", "scale.wasm"), scale.Module)
	assert.Equal(t, uint64(128<<20), scale.Limits.MaxMemory)

	spin := mustCallback(t, cfg, "spin")
	assert.Equal(t, "71b87c5972485efc3494e94d94983fa7e5c377038e0245ba26735c4dbc4f840d", spin.SHA256)
	assert.Equal(t, config.EngineWasmtime, spin.Engine)
	assert.Equal(t, uint64(10000000), spin.Limits.Fuel)
	assert.Equal(t, uint64(512<<10), spin.Limits.MaxStack)
	assert.Equal(t, "spin", spin.Export)

	hist := mustCallback(t, cfg, "histogram")
	assert.Equal(t, config.IsolationFresh, hist.Isolation)
	assert.Equal(t, config.WASIMinimal, hist.WASI)
	assert.Equal(t, 8, hist.MaxInstances)
	assert.Equal(t, "histogram", hist.Export)
	assert.Equal(t, uint64(256<<20), hist.Limits.MaxMemory)
}

func TestExampleShowsEveryKey(t *testing.T) {
	data, err := readFileString(examplePath)
	require.NoError(t, err)
	for _, f := range config.Keys() {
		assert.Contains(t, data, "\n    "+f.Name+": ", "no callback in example.yaml sets %s", f.Name)
		if !f.PerCallback {
			assert.Contains(t, data, "\n  "+f.Name+": ", "example.yaml defaults lack %s", f.Name)
		}
	}
	assert.Contains(t, data, "\ncache_dir: ")
}

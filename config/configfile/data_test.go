package configfile

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/config"
)

func TestLoadDataResolvesAgainstDir(t *testing.T) {
	dir := t.TempDir()
	for format, text := range map[string]string{
		"yaml": "callbacks:\n  scale:\n    module: m.wasm\n    batching: expand_dims\n",
		"json": `{"callbacks": {"scale": {"module": "m.wasm", "batching": "expand_dims"}}}`,
	} {
		cfg, err := LoadData("<inline>", format, []byte(text), dir, nil)
		require.NoError(t, err, format)
		assert.Equal(t, "<inline>", cfg.File)
		require.Len(t, cfg.Callbacks, 1)
		assert.Equal(t, filepath.Join(dir, "m.wasm"), cfg.Callbacks[0].Module)
		assert.Equal(t, config.BatchingExpandDims, cfg.Callbacks[0].BatchingRule())
	}
}

func TestLoadDataErrors(t *testing.T) {
	_, err := LoadData("<inline>", "ini", []byte("x"), "", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `<inline>: unsupported config format "ini"`)

	_, err = LoadData("<inline>", "yaml", []byte("callbacks:\n  s:\n    module: m.wasm\n    batching: concurrent\n"), "", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "callbacks.s.batching")
	assert.Contains(t, err.Error(), "sequential or expand_dims or broadcast_all or parallel")
}

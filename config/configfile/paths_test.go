package configfile

// Paths in a configuration: relative to the file's directory (or to the
// working directory, from the environment), cleaned and made absolute:
// modules, cache_dir, worker.

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRelativePaths(t *testing.T) {
	cfg, path, err := loadYAML(t, `
cache_dir: ../cache
callbacks:
  rel:
    module: guests/../build/rel.wasm
  abs:
    module: /opt/mods//abs.wasm
`)
	require.NoError(t, err)
	dir := filepath.Dir(path)
	assert.Equal(t, filepath.Join(filepath.Dir(dir), "cache"), cfg.CacheDir)
	assert.Equal(t, filepath.Join(dir, "build", "rel.wasm"), mustCallback(t, cfg, "rel").Module)
	assert.Equal(t, "/opt/mods/abs.wasm", mustCallback(t, cfg, "abs").Module)
	assert.True(t, filepath.IsAbs(mustCallback(t, cfg, "rel").Module))
}

func TestRelativeConfigPath(t *testing.T) {
	wd := t.TempDir()
	t.Chdir(wd)
	require.NoError(t, writeFile(filepath.Join(wd, "sub", "c.yaml"), "callbacks:\n  a:\n    module: a.wasm\n"))
	cfg, err := LoadEnv(filepath.Join("sub", "c.yaml"), nil)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(wd, "sub", "a.wasm"), mustCallback(t, cfg, "a").Module)
}

func TestEmptyCacheDirDisablesCache(t *testing.T) {
	cfg := mustLoadYAML(t, `cache_dir: ""`)
	assert.Empty(t, cfg.CacheDir)
}

// TestWorkerKey: the worker key is a path like cache_dir's: relative to
// the file's directory, or to the working directory when CALLBOX_WORKER
// sets it, which wins; a value that is not a string names the key.
func TestWorkerKey(t *testing.T) {
	cfg, path, err := loadYAML(t, "worker: bin/callbox-worker\n")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(filepath.Dir(path), "bin", "callbox-worker"), cfg.Worker)

	wd := t.TempDir()
	t.Chdir(wd)
	cfg, _, err = loadYAML(t, "worker: bin/callbox-worker\n", "CALLBOX_WORKER=w/callbox-worker")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(wd, "w", "callbox-worker"), cfg.Worker)

	cfg = mustLoadYAML(t, "")
	assert.Empty(t, cfg.Worker, "no key: the host's own search")

	_, _, err = loadYAML(t, "worker: [a, b]\n")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "worker")
	assert.Contains(t, err.Error(), "callbox-worker executable")
}

package configfile

// The layers a value comes from: built-in defaults, the file's defaults,
// a callback's own keys, and CALLBOX_ variables over them (env.go);
// Config.Origin naming the layer.

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/config"
)

func TestDefaultsLayering(t *testing.T) {
	cfg := mustLoadYAML(t, `
defaults:
  timeout: 5s
  max_log: 1MiB
callbacks:
  plain:
    module: p.wasm
  own:
    module: o.wasm
    timeout: 100ms
    engine: wasmtime
`)
	builtin := config.DefaultCallback()
	assert.Equal(t, 5*time.Second, cfg.Defaults.Limits.Timeout, "file defaults override built-ins")
	assert.Equal(t, uint64(1<<20), cfg.Defaults.Limits.MaxLog)
	assert.Equal(t, builtin.Limits.MaxMemory, cfg.Defaults.Limits.MaxMemory, "unset defaults keep built-ins")

	plain := mustCallback(t, cfg, "plain")
	assert.Equal(t, 5*time.Second, plain.Limits.Timeout, "callback inherits file defaults")
	assert.Equal(t, uint64(1<<20), plain.Limits.MaxLog)
	assert.Equal(t, builtin.Engine, plain.Engine, "callback inherits built-ins")
	assert.Equal(t, "plain", plain.Export, "export defaults to the name")

	own := mustCallback(t, cfg, "own")
	assert.Equal(t, 100*time.Millisecond, own.Limits.Timeout, "callback keys override defaults")
	assert.Equal(t, config.EngineWasmtime, own.Engine)
	assert.Equal(t, uint64(1<<20), own.Limits.MaxLog)

	assert.Equal(t, []string{"own", "plain"}, []string{cfg.Callbacks[0].Name, cfg.Callbacks[1].Name}, "sorted by name")
}

func TestEnvOverrides(t *testing.T) {
	const file = `
cache_dir: cache
defaults:
  timeout: 5s
callbacks:
  scale:
    module: s.wasm
    max_memory: 32MiB
  own-timeout:
    module: o.wasm
    timeout: 3s
`
	tests := []struct {
		name  string
		env   string
		check func(t *testing.T, cfg *config.Config)
	}{
		{"defaults key present in file", "CALLBOX_DEFAULTS_TIMEOUT=50ms", func(t *testing.T, cfg *config.Config) {
			assert.Equal(t, 50*time.Millisecond, cfg.Defaults.Limits.Timeout)
			assert.Equal(t, 50*time.Millisecond, mustCallback(t, cfg, "scale").Limits.Timeout)
			assert.Equal(t, 3*time.Second, mustCallback(t, cfg, "own-timeout").Limits.Timeout,
				"the callback's own key is more specific than CALLBOX_DEFAULTS_")
		}},
		{"defaults key absent from file", "CALLBOX_DEFAULTS_ENGINE=wasmtime", func(t *testing.T, cfg *config.Config) {
			assert.Equal(t, config.EngineWasmtime, cfg.Defaults.Engine)
			assert.Equal(t, config.EngineWasmtime, mustCallback(t, cfg, "scale").Engine)
		}},
		{"callback key present in file", "CALLBOX_CALLBACKS_SCALE_MAX_MEMORY=128MiB", func(t *testing.T, cfg *config.Config) {
			assert.Equal(t, uint64(128<<20), mustCallback(t, cfg, "scale").Limits.MaxMemory)
			assert.Equal(t, config.DefaultCallback().Limits.MaxMemory, mustCallback(t, cfg, "own-timeout").Limits.MaxMemory)
		}},
		{"callback key absent from file", "CALLBOX_CALLBACKS_SCALE_FUEL=1000", func(t *testing.T, cfg *config.Config) {
			assert.Equal(t, uint64(1000), mustCallback(t, cfg, "scale").Limits.Fuel)
		}},
		{"callback env beats callback file key", "CALLBOX_CALLBACKS_OWN_TIMEOUT_TIMEOUT=7s", func(t *testing.T, cfg *config.Config) {
			assert.Equal(t, 7*time.Second, mustCallback(t, cfg, "own-timeout").Limits.Timeout, "dash maps to underscore")
		}},
		{"size in bytes", "CALLBOX_CALLBACKS_SCALE_MAX_OUTPUT=4096B", func(t *testing.T, cfg *config.Config) {
			assert.Equal(t, uint64(4096), mustCallback(t, cfg, "scale").Limits.MaxOutput)
		}},
		{"zero size needs no unit", "CALLBOX_CALLBACKS_SCALE_MAX_LOG=0", func(t *testing.T, cfg *config.Config) {
			assert.Equal(t, uint64(0), mustCallback(t, cfg, "scale").Limits.MaxLog)
		}},
		{"per-callback string key", "CALLBOX_CALLBACKS_SCALE_SHA256=" + strings.ToUpper(sha), func(t *testing.T, cfg *config.Config) {
			assert.Equal(t, sha, mustCallback(t, cfg, "scale").SHA256)
		}},
		{"absolute cache dir", "CALLBOX_CACHE_DIR=/var/cache/cb", func(t *testing.T, cfg *config.Config) {
			assert.Equal(t, "/var/cache/cb", cfg.CacheDir)
		}},
		{"empty variable counts as unset", "CALLBOX_DEFAULTS_TIMEOUT=", func(t *testing.T, cfg *config.Config) {
			assert.Equal(t, 5*time.Second, cfg.Defaults.Limits.Timeout)
		}},
		{"other CALLBOX_ variables are ignored", "CALLBOX_LOG_LEVEL=debug", func(t *testing.T, cfg *config.Config) {
			assert.Len(t, cfg.Callbacks, 2)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustLoadYAML(t, file, "PATH=/bin", tt.env)
			tt.check(t, cfg)
			assert.NoError(t, cfg.Validate())
		})
	}
}

func TestEnvLaterEntryWins(t *testing.T) {
	cfg := mustLoadYAML(t, "", "CALLBOX_DEFAULTS_MAX_INSTANCES=2", "CALLBOX_DEFAULTS_MAX_INSTANCES=9")
	assert.Equal(t, 9, cfg.Defaults.MaxInstances)
}

func TestEnvRelativePathsUseWorkingDirectory(t *testing.T) {
	wd := t.TempDir()
	t.Chdir(wd)
	cfg, path, err := loadYAML(t, "callbacks:\n  a:\n    module: a.wasm\n",
		"CALLBOX_CACHE_DIR=cache", "CALLBOX_CALLBACKS_A_MODULE=mods/b.wasm")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(wd, "cache"), cfg.CacheDir)
	assert.Equal(t, filepath.Join(wd, "mods", "b.wasm"), mustCallback(t, cfg, "a").Module)
	assert.NotEqual(t, filepath.Dir(path), wd)
}

func TestLoadReadsProcessEnvironment(t *testing.T) {
	t.Setenv("CALLBOX_DEFAULTS_MAX_INSTANCES", "7")
	path := writeConfig(t, "config.yaml", "callbacks:\n  a:\n    module: a.wasm\n")
	cfg, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, 7, mustCallback(t, cfg, "a").MaxInstances)
}

// TestOrigins: Config.Origin names, for a callback's every key, the key
// path in the file, the environment variable, or the built-in default, in
// the order they override each other; a modules entry's callbacks look in
// their override, then the entry, then the defaults.
func TestOrigins(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "callbox.yaml")
	require.NoError(t, writeFile(path, `defaults:
  timeout: 2s
  fuel: 1000
callbacks:
  scale:
    module: scale.wasm
    timeout: 3s
modules:
  kit:
    module: kit.wasm
    max_memory: 32MiB
    callbacks:
      softmax:
        max_memory: 16MiB
`))
	cfg, err := LoadEnv(path, []string{"CALLBOX_CALLBACKS_SCALE_FUEL=5", "CALLBOX_DEFAULTS_MAX_LOG=1KiB"})
	require.NoError(t, err)
	scale := []string{config.CallbackPath("scale")}
	assert.Equal(t, "callbacks.scale.timeout", cfg.Origin("timeout", scale...))
	assert.Equal(t, "$CALLBOX_CALLBACKS_SCALE_FUEL", cfg.Origin("fuel", scale...))
	assert.Equal(t, "$CALLBOX_DEFAULTS_MAX_LOG", cfg.Origin("max_log", scale...))
	assert.Equal(t, config.OriginDefault, cfg.Origin("max_wait", scale...))
	softmax := []string{config.ModulePath("kit") + "." + config.CallbackPath("softmax"), config.ModulePath("kit")}
	assert.Equal(t, "modules.kit.callbacks.softmax.max_memory", cfg.Origin("max_memory", softmax...))
	assert.Equal(t, "defaults.timeout", cfg.Origin("timeout", softmax...))
	other := []string{config.ModulePath("kit") + "." + config.CallbackPath("scale"), config.ModulePath("kit")}
	assert.Equal(t, "modules.kit.max_memory", cfg.Origin("max_memory", other...))
	assert.Equal(t, "defaults.fuel", cfg.Origin("fuel", other...))
}

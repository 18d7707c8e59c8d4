package configfile

import (
	"github.com/seed4b3e0ccb/callbox/config"

	"github.com/seed4b3e0ccb/callbox/abi"

	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeFile writes content to path, creating its directory.
func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o644)
}

// readFileString reads a whole file.
func readFileString(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

// writeConfig writes content to name in a fresh temporary directory and
// returns its path.
func writeConfig(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, writeFile(path, content))
	return path
}

// loadYAML writes content as config.yaml and loads it with environ.
func loadYAML(t *testing.T, content string, environ ...string) (*config.Config, string, error) {
	t.Helper()
	path := writeConfig(t, "config.yaml", content)
	cfg, err := LoadEnv(path, environ)
	return cfg, path, err
}

// mustLoadYAML is loadYAML that requires success.
func mustLoadYAML(t *testing.T, content string, environ ...string) *config.Config {
	t.Helper()
	cfg, _, err := loadYAML(t, content, environ...)
	require.NoError(t, err)
	require.NotNil(t, cfg)
	return cfg
}

// mustCallback returns the named callback of cfg.
func mustCallback(t *testing.T, cfg *config.Config, name string) config.Callback {
	t.Helper()
	cb, ok := cfg.Callback(name)
	require.True(t, ok, "callback %s missing", name)
	return cb
}

// configErrors flattens a joined error into its *config.Error parts.
func configErrors(t *testing.T, err error) []*config.Error {
	t.Helper()
	require.Error(t, err)
	var out []*config.Error
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		var e *config.Error
		require.True(t, errors.As(err, &e), "not a *config.Error: %v", err)
		return []*config.Error{e}
	}
	for _, part := range joined.Unwrap() {
		var e *config.Error
		require.True(t, errors.As(part, &e), "not a *config.Error: %v", part)
		out = append(out, e)
	}
	return out
}

// examplePath is the documented example configuration.
const examplePath = "../example.yaml"

const sha = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

// The same configuration in the three formats.
var equivalentConfigs = map[string]string{
	"config.yaml": `
cache_dir: cache
defaults:
  engine: wasmtime
  timeout: 250ms
  max_memory: 32MiB
  fuel: 1000000
  max_stack: 256KiB
  max_output: 16MiB
  max_error: 1KiB
  max_log: 0
  isolation: fresh
  max_instances: 2
  wasi: minimal
callbacks:
  scale:
    module: guests/scale.wasm
    sha256: ` + strings.ToUpper(sha) + `
    export: scale_f32
    signature: "(x: f32[n], f: f32[]) -> f32[n]"
    max_memory: 100000B
  my-spin:
    module: /abs/spin.wasm
    engine: wazero
    timeout: 2s
    fuel: 0
`,
	"config.toml": `
cache_dir = "cache"

[defaults]
engine = "wasmtime"
timeout = "250ms"
max_memory = "32MiB"
fuel = 1000000
max_stack = "256KiB"
max_output = "16MiB"
max_error = "1KiB"
max_log = 0
isolation = "fresh"
max_instances = 2
wasi = "minimal"

[callbacks.scale]
module = "guests/scale.wasm"
sha256 = "` + strings.ToUpper(sha) + `"
export = "scale_f32"
signature = "(x: f32[n], f: f32[]) -> f32[n]"
max_memory = "100000B"

[callbacks.my-spin]
module = "/abs/spin.wasm"
engine = "wazero"
timeout = "2s"
fuel = 0
`,
	"config.json": `{
  "cache_dir": "cache",
  "defaults": {
    "engine": "wasmtime", "timeout": "250ms", "max_memory": "32MiB",
    "fuel": 1000000, "max_stack": "256KiB", "max_output": "16MiB",
    "max_error": "1KiB", "max_log": 0, "isolation": "fresh",
    "max_instances": 2, "wasi": "minimal"
  },
  "callbacks": {
    "scale": {
      "module": "guests/scale.wasm", "sha256": "` + strings.ToUpper(sha) + `",
      "export": "scale_f32", "signature": "(x: f32[n], f: f32[]) -> f32[n]",
      "max_memory": "100000 B"
    },
    "my-spin": {"module": "/abs/spin.wasm", "engine": "wazero", "timeout": "2s", "fuel": 0}
  }
}`,
}

func TestFormatsLoadTheSameConfig(t *testing.T) {
	dir := t.TempDir()
	want := func() *config.Config {
		d := config.Callback{
			Engine: config.EngineWasmtime, Isolation: config.IsolationFresh, MaxInstances: 2, WASI: config.WASIMinimal,
			Batching: config.BatchingSequential,
			Limits: config.Limits{
				Timeout: 250 * time.Millisecond, MaxMemory: 32 << 20, Fuel: 1000000, MaxStack: 256 << 10,
				MaxOutput: 16 << 20, MaxError: 1 << 10, MaxLog: 0, MaxWait: 10 * time.Second,
			},
		}
		spin := d
		spin.Name, spin.Module, spin.Export = "my-spin", "/abs/spin.wasm", "my-spin"
		spin.Engine, spin.Limits.Timeout, spin.Limits.Fuel = config.EngineWazero, 2*time.Second, 0
		scale := d
		scale.Name, scale.Module, scale.Export = "scale", filepath.Join(dir, "guests", "scale.wasm"), "scale_f32"
		scale.SHA256, scale.Signature = sha, "(x: f32[n], f: f32[]) -> f32[n]"
		scale.Limits.MaxMemory = 2 * abi.PageSize // 100000 rounded up
		return &config.Config{CacheDir: filepath.Join(dir, "cache"), Defaults: d, Callbacks: []config.Callback{spin, scale}}
	}()
	for name, content := range equivalentConfigs {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			require.NoError(t, writeFile(path, content))
			cfg, err := LoadEnv(path, nil)
			require.NoError(t, err)
			assert.Equal(t, path, cfg.File)
			got := *cfg
			got.File = ""
			// Where each value came from, the same in every format.
			assert.Equal(t, "callbacks.my-spin.timeout", got.Origin("timeout", "callbacks.my-spin"))
			assert.Equal(t, "defaults.timeout", got.Origin("timeout", "callbacks.scale"))
			assert.Equal(t, "callbacks.scale.max_memory", got.Origin("max_memory", "callbacks.scale"))
			assert.Equal(t, config.OriginDefault, got.Origin("max_wait", "callbacks.scale"))
			got.Origins = nil
			assert.Equal(t, *want, got)
			assert.NoError(t, cfg.Validate())
		})
	}
}

func TestUpperCaseExtensionIsAccepted(t *testing.T) {
	path := writeConfig(t, "CONFIG.YML", "callbacks:\n  a:\n    module: a.wasm\n")
	cfg, err := LoadEnv(path, nil)
	require.NoError(t, err)
	assert.Len(t, cfg.Callbacks, 1)
}

func TestEmptyConfigs(t *testing.T) {
	for name, content := range map[string]string{
		"empty.yaml":         "",
		"comment.yaml":       "# nothing yet\n",
		"null-sections.yaml": "defaults:\ncallbacks:\n",
		"empty.toml":         "",
		"empty.json":         "{}",
		"null.json":          `{"callbacks": null}`,
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := LoadEnv(writeConfig(t, name, content), nil)
			require.NoError(t, err)
			assert.Empty(t, cfg.Callbacks)
			assert.Empty(t, cfg.CacheDir)
			assert.Equal(t, config.DefaultCallback(), cfg.Defaults)
		})
	}
}

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

// TestWorkerUserKey: worker_user is a user name, UID or UID:GID, never
// root; CALLBOX_WORKER_USER wins over the file; a bad value names the key
// and says what to write.
func TestWorkerUserKey(t *testing.T) {
	for value, want := range map[string]string{"nobody": "nobody", "1000": "1000", "1000:1001": "1000:1001", "callbox-worker": "callbox-worker"} {
		cfg, _, err := loadYAML(t, "worker_user: "+value+"\n")
		require.NoError(t, err, value)
		assert.Equal(t, want, cfg.WorkerUser, value)
	}
	cfg, _, err := loadYAML(t, "worker_user: nobody\n", "CALLBOX_WORKER_USER=2000:2000")
	require.NoError(t, err)
	assert.Equal(t, "2000:2000", cfg.WorkerUser, "the environment wins")
	assert.Empty(t, mustLoadYAML(t, "").WorkerUser, "no key: nobody, chosen by the host")
	for value, why := range map[string]string{"root": "unprivileged", "0": "is root", "0:0": "is root", "-1": "want a user name", "1:x": "want a user name",
		"a b": "want a user name", "[1]": "a user name, UID or UID:GID"} {
		_, _, err := loadYAML(t, "worker_user: "+value+"\n")
		require.Error(t, err, value)
		assert.Contains(t, err.Error(), "worker_user", value)
		assert.Contains(t, err.Error(), why, value)
	}
}

func TestLoadReadsProcessEnvironment(t *testing.T) {
	t.Setenv("CALLBOX_DEFAULTS_MAX_INSTANCES", "7")
	path := writeConfig(t, "config.yaml", "callbacks:\n  a:\n    module: a.wasm\n")
	cfg, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, 7, mustCallback(t, cfg, "a").MaxInstances)
}

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

func TestPageRounding(t *testing.T) {
	tests := []struct {
		value string
		want  uint64
	}{
		{"1B", abi.PageSize},
		{"65536B", abi.PageSize},
		{"65537B", 2 * abi.PageSize},
		{"100KB", 2 * abi.PageSize}, // 100000 bytes
		{"64KiB", abi.PageSize},
		{`"1.5 MiB"`, 24 * abi.PageSize},
		{"4GiB", config.MaxMemoryLimit},
		{"4294901761B", config.MaxMemoryLimit}, // one byte past the last whole page below 4GiB
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			cfg := mustLoadYAML(t, "defaults:\n  max_memory: "+tt.value+"\n")
			assert.Equal(t, tt.want, cfg.Defaults.Limits.MaxMemory)
		})
	}
	_, _, err := loadYAML(t, "defaults:\n  max_memory: 4294967297B\n")
	assert.ErrorContains(t, err, "defaults.max_memory: 4294967297B is out of range")
}

func TestSizeForms(t *testing.T) {
	tests := []struct {
		value string
		want  uint64
	}{
		{"2048B", 2048},
		{`"2048 B"`, 2048},
		{"2KiB", 2048},
		{"2 KiB", 2048},
		{"2kib", 2048},
		{"2KB", 2000},
		{"2K", 2000},
		{"1MiB", 1 << 20},
		{"1MB", 1000000},
		{"1GiB", 1 << 30},
		{"1GB", 1000000000},
		{"512B", 512},
		{"1.5KiB", 1536},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			cfg := mustLoadYAML(t, "defaults:\n  max_output: "+tt.value+"\n")
			assert.Equal(t, tt.want, cfg.Defaults.Limits.MaxOutput)
		})
	}
}

// TestZeroNeedsNoUnit: a bare number is refused for every size key, but
// zero is zero in every unit.
func TestZeroNeedsNoUnit(t *testing.T) {
	for _, value := range []string{"0", `"0"`, "0.0", "0B", "0MiB"} {
		t.Run(value, func(t *testing.T) {
			cfg := mustLoadYAML(t, "defaults:\n  max_log: "+value+"\n  max_stack: "+value+"\n")
			assert.Equal(t, uint64(0), cfg.Defaults.Limits.MaxLog)
			assert.Equal(t, uint64(0), cfg.Defaults.Limits.MaxStack)
		})
	}
}

// TestBareNumbersRejectedInEveryFormat: every size and duration key
// refuses a number without a unit, in YAML, TOML and JSON alike, with an
// error naming the file and the key and suggesting units.
func TestBareNumbersRejectedInEveryFormat(t *testing.T) {
	keys := map[string]string{
		"timeout":    "50 has no unit; write 50ms or 50s",
		"max_memory": "50 has no unit; write 50MiB or 50KiB (or 50B for bytes)",
		"max_stack":  "50 has no unit; write 50MiB or 50KiB (or 50B for bytes)",
		"max_output": "50 has no unit; write 50MiB or 50KiB (or 50B for bytes)",
		"max_error":  "50 has no unit; write 50MiB or 50KiB (or 50B for bytes)",
		"max_log":    "50 has no unit; write 50MiB or 50KiB (or 50B for bytes)",
	}
	for key, message := range keys {
		for name, content := range map[string]string{
			"config.yaml": "callbacks:\n  x:\n    module: a.wasm\n    " + key + ": 50\n",
			"config.toml": "[callbacks.x]\nmodule = \"a.wasm\"\n" + key + " = 50\n",
			"config.json": `{"callbacks": {"x": {"module": "a.wasm", "` + key + `": 50}}}`,
		} {
			t.Run(key+"/"+name, func(t *testing.T) {
				path := writeConfig(t, name, content)
				cfg, err := LoadEnv(path, nil)
				assert.Nil(t, cfg)
				assert.EqualError(t, err, path+": callbacks.x."+key+": "+message)
			})
		}
	}
	// Counts stay bare integers.
	cfg := mustLoadYAML(t, "defaults:\n  fuel: 50\n  max_instances: 3\n")
	assert.Equal(t, uint64(50), cfg.Defaults.Limits.Fuel)
	assert.Equal(t, 3, cfg.Defaults.MaxInstances)
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		env     []string
		key     string // the key or variable the error must name
		message string // what it must say
	}{
		// unknown keys
		{"unknown top-level key", "cachedir: x\n", nil, "cachedir", "unknown key (did you mean cache_dir?)"},
		{"unknown top-level key, no suggestion", "plugins: x\n", nil, "plugins", "unknown key (allowed: cache_dir, worker, worker_user, defaults, callbacks, modules)"},
		{"unknown defaults key", "defaults:\n  max_mem: 1MiB\n", nil, "defaults.max_mem", "unknown key (did you mean max_memory?)"},
		{"unknown defaults key, no suggestion", "defaults:\n  color: red\n", nil, "defaults.color", "unknown key (allowed: engine, timeout, max_cpu, max_memory, fuel, max_stack, max_output, max_error, max_log, max_wait, isolation, max_instances, wasi, batching)"},
		{"unknown callback key", "callbacks:\n  spin:\n    module: a.wasm\n    timout: 1s\n", nil, "callbacks.spin.timout", "unknown key (did you mean timeout?)"},
		{"key case matters", "callbacks:\n  spin:\n    module: a.wasm\n    Timeout: 1s\n", nil, "callbacks.spin.Timeout", "unknown key (did you mean timeout?)"},
		{"per-callback key in defaults", "defaults:\n  module: a.wasm\n", nil, "defaults.module", "module cannot be set in defaults"},
		// structure
		{"callbacks not a map", "callbacks: 5\n", nil, "callbacks", "must be a map from callback name to its settings, got a number (5)"},
		{"callbacks a list", "callbacks: [a, b]\n", nil, "callbacks", "must be a map from callback name to its settings, got a list"},
		{"defaults not a map", "defaults: fast\n", nil, "defaults", `must be a map of settings, got a string ("fast")`},
		{"callback not a map", "callbacks:\n  spin: spin.wasm\n", nil, "callbacks.spin", "must be a map of callback settings"},
		{"null value", "defaults:\n  timeout:\n", nil, "defaults.timeout", "no value (remove the key to use the default)"},
		{"null cache_dir", "cache_dir: ~\n", nil, "cache_dir", "no value"},
		{"non-string key", "callbacks:\n  1:\n    module: a.wasm\n", nil, "callbacks.1", "key is a number (1), not a string"},
		// names
		{"upper-case name", "callbacks:\n  Scale:\n    module: a.wasm\n", nil, `callbacks."Scale"`, "names must match ^[a-z][a-z0-9_-]*$ (names are case-sensitive; did you mean scale?)"},
		{"name with a dot", "callbacks:\n  a.b:\n    module: a.wasm\n", nil, `callbacks."a.b"`, `bad callback name "a.b"`},
		{"name starting with a digit", "callbacks:\n  \"9x\":\n    module: a.wasm\n", nil, `callbacks."9x"`, "names must match"},
		{"names clash in the environment", "callbacks:\n  a-b:\n    module: a.wasm\n  a_b:\n    module: b.wasm\n", nil, "callbacks.a_b", "both map to environment variables CALLBOX_CALLBACKS_A_B_*"},
		// required
		{"missing module", "callbacks:\n  spin:\n    timeout: 1s\n", nil, "callbacks.spin.module", "required"},
		{"empty module", "callbacks:\n  spin:\n    module: \"\"\n", nil, "callbacks.spin.module", "must not be empty"},
		{"empty callback", "callbacks:\n  spin:\n", nil, "callbacks.spin.module", "required"},
		// wrong types
		{"module not a string", "callbacks:\n  s:\n    module: 5\n", nil, "callbacks.s.module", "got a number (5) (allowed: a path to the .wasm module, as a string)"},
		{"timeout a boolean", "defaults:\n  timeout: true\n", nil, "defaults.timeout", "got a boolean (true)"},
		{"size a list", "defaults:\n  max_memory: [1]\n", nil, "defaults.max_memory", "got a list (allowed: a size from 64KiB to 4GiB"},
		{"enum a number", "defaults:\n  engine: 5\n", nil, "defaults.engine", "got a number (5) (allowed: wazero or wasmtime"},
		{"fuel a float", "defaults:\n  fuel: 1.5\n", nil, "defaults.fuel", "1.5: not an integer"},
		{"fuel a word", "defaults:\n  fuel: lots\n", nil, "defaults.fuel", `bad integer "lots" (allowed: an integer from 0 (unlimited) to 1125899906842624)`},
		{"sha256 a number", "callbacks:\n  s:\n    module: a.wasm\n    sha256: 12\n", nil, "callbacks.s.sha256", "got a number (12)"},
		{"date where a duration belongs", "defaults:\n  timeout: 2024-01-01\n", nil, "defaults.timeout", "got a date/time"},
		// units
		{"bare number duration", "defaults:\n  timeout: 50\n", nil, "defaults.timeout", "50 has no unit; write 50ms or 50s"},
		{"bare number duration as string", "defaults:\n  timeout: \"50\"\n", nil, "defaults.timeout", "50 has no unit; write 50ms or 50s"},
		{"bare float duration", "defaults:\n  timeout: 1.5\n", nil, "defaults.timeout", "1.5 has no unit; write 1.5ms or 1.5s"},
		{"bare zero duration", "defaults:\n  timeout: 0\n", nil, "defaults.timeout", "0s: must be > 0"},
		{"bare negative duration", "defaults:\n  timeout: -5\n", nil, "defaults.timeout", "-5: must be > 0"},
		{"bare number size", "callbacks:\n  x:\n    module: a.wasm\n    max_memory: 64\n", nil, "callbacks.x.max_memory", "64 has no unit; write 64MiB or 64KiB (or 64B for bytes)"},
		{"bare number size as string", "defaults:\n  max_stack: \"1048576\"\n", nil, "defaults.max_stack", "1048576 has no unit; write 1048576MiB or 1048576KiB (or 1048576B for bytes)"},
		{"bare float size", "defaults:\n  max_output: 2.0e3\n", nil, "defaults.max_output", "2000 has no unit"},
		{"bare number max_error", "defaults:\n  max_error: 4096\n", nil, "defaults.max_error", "4096 has no unit"},
		{"bare number max_log", "defaults:\n  max_log: 1\n", nil, "defaults.max_log", "1 has no unit"},
		{"size NaN", "defaults:\n  max_log: .nan\n", nil, "defaults.max_log", "NaN: not a finite number"},
		{"duration infinite", "defaults:\n  timeout: .inf\n", nil, "defaults.timeout", "+Inf: not a finite number"},
		{"bare negative size", "defaults:\n  max_log: -1\n", nil, "defaults.max_log", "-1: must not be negative"},
		{"bad duration", "defaults:\n  timeout: soon\n", nil, "defaults.timeout", `bad duration "soon"`},
		{"bad size unit", "defaults:\n  max_log: 64 MiBs\n", nil, "defaults.max_log", `bad size "64 MiBs": use a number with a unit`},
		// negative
		{"negative duration", "defaults:\n  timeout: -1s\n", nil, "defaults.timeout", "must be > 0"},
		{"zero duration", "defaults:\n  timeout: 0s\n", nil, "defaults.timeout", "must be > 0"},
		{"zero max_wait", "defaults:\n  max_wait: 0s\n", nil, "defaults.max_wait", "must be > 0"},
		{"bare max_wait", "defaults:\n  max_wait: 5\n", nil, "defaults.max_wait", "unit"},
		{"max_wait too long", "defaults:\n  max_wait: 2h\n", nil, "defaults.max_wait", "out of range"},
		{"negative fuel", "defaults:\n  fuel: -1\n", nil, "defaults.fuel", "-1: must not be negative"},
		{"negative size string", "defaults:\n  max_log: -1KiB\n", nil, "defaults.max_log", `"-1KiB": must not be negative`},
		{"negative instances", "defaults:\n  max_instances: -2\n", nil, "defaults.max_instances", "-2: must not be negative (allowed: an integer from 1 to 1024)"},
		// bounds
		{"timeout too long", "defaults:\n  timeout: 2h\n", nil, "defaults.timeout", "2h is out of range (allowed: a duration with a unit, > 0 and at most 1h, e.g. 50ms)"},
		{"memory too large", "defaults:\n  max_memory: 8GiB\n", nil, "defaults.max_memory", "8GiB is out of range (allowed: a size from 64KiB to 4GiB"},
		{"memory zero", "defaults:\n  max_memory: 0\n", nil, "defaults.max_memory", "0B is out of range"},
		{"memory zero with a unit", "defaults:\n  max_memory: 0MiB\n", nil, "defaults.max_memory", "0B is out of range"},
		{"memory overflows", "defaults:\n  max_memory: 99999999999EiB\n", nil, "defaults.max_memory", "bad size"},
		{"fuel too large", "defaults:\n  fuel: 2251799813685248\n", nil, "defaults.fuel", "2251799813685248 is out of range"},
		{"stack too small", "defaults:\n  max_stack: 1KiB\n", nil, "defaults.max_stack", "1KiB is out of range (allowed: 0 (engine default) or a size from 64KiB to 1GiB"},
		{"stack too large", "defaults:\n  max_stack: 2GiB\n", nil, "defaults.max_stack", "2GiB is out of range"},
		{"output zero", "defaults:\n  max_output: 0\n", nil, "defaults.max_output", "0B is out of range (allowed: a size from 1B to 4GiB"},
		{"error too large", "defaults:\n  max_error: 2MiB\n", nil, "defaults.max_error", "2MiB is out of range (allowed: a size from 1B to 1MiB"},
		{"log too large", "defaults:\n  max_log: 65MiB\n", nil, "defaults.max_log", "65MiB is out of range"},
		{"instances zero", "defaults:\n  max_instances: 0\n", nil, "defaults.max_instances", "0 is out of range (allowed: an integer from 1 to 1024)"},
		{"instances too many", "defaults:\n  max_instances: 1025\n", nil, "defaults.max_instances", "1025 is out of range"},
		{"instances huge", "defaults:\n  max_instances: 99999999999\n", nil, "defaults.max_instances", "99999999999 is out of range"},
		{"bound in a callback", "callbacks:\n  s:\n    module: a.wasm\n    max_log: 1GiB\n", nil, "callbacks.s.max_log", "1GiB is out of range"},
		// enums
		{"bad engine", "defaults:\n  engine: v8\n", nil, "defaults.engine", `bad engine "v8" (allowed: wazero or wasmtime)`},
		{"engine case matters", "defaults:\n  engine: Wazero\n", nil, "defaults.engine", `bad engine "Wazero"`},
		{"bad isolation", "defaults:\n  isolation: shared\n", nil, "defaults.isolation", `bad isolation "shared" (allowed: pooled or fresh or process or process-fresh)`},
		{"bad wasi", "defaults:\n  wasi: full\n", nil, "defaults.wasi", `bad wasi "full" (allowed: none or minimal)`},
		// per-callback strings
		{"short sha256", "callbacks:\n  s:\n    module: a.wasm\n    sha256: abc\n", nil, "callbacks.s.sha256", `"abc" has 3 characters (allowed: 64 hex digits)`},
		{"non-hex sha256", "callbacks:\n  s:\n    module: a.wasm\n    sha256: " + strings.Repeat("g", 64) + "\n", nil, "callbacks.s.sha256", `has 'g' at position 0`},
		{"bad signature", "callbacks:\n  s:\n    module: a.wasm\n    signature: \"(x: f32[n]\"\n", nil, "callbacks.s.signature", `signature "(x: f32[n]"`},
		{"empty export", "callbacks:\n  s:\n    module: a.wasm\n    export: \"\"\n", nil, "callbacks.s.export", "must not be empty (omit it to use the callback name)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, path, err := loadYAML(t, tt.file, tt.env...)
			assert.Nil(t, cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), path+": "+tt.key+": ")
			var matched []string
			for _, e := range configErrors(t, err) {
				if e.Key == tt.key {
					assert.Equal(t, path, e.File)
					matched = append(matched, e.Error())
				}
			}
			require.NotEmpty(t, matched, "no *config.Error with key %s in %v", tt.key, err)
			assert.Contains(t, strings.Join(matched, "\n"), tt.message)
		})
	}
}

func TestEnvErrors(t *testing.T) {
	const file = "callbacks:\n  scale:\n    module: s.wasm\n  my-op:\n    module: m.wasm\n"
	tests := []struct {
		env     string
		message string // the whole error
	}{
		{"CALLBOX_DEFAULTS_TIMEOUT=fast", `CALLBOX_DEFAULTS_TIMEOUT: bad duration "fast"`},
		{"CALLBOX_DEFAULTS_TIMEOUT=50", "CALLBOX_DEFAULTS_TIMEOUT: 50 has no unit; write 50ms or 50s"},
		{"CALLBOX_DEFAULTS_MAX_MEMORY=64", "CALLBOX_DEFAULTS_MAX_MEMORY: 64 has no unit; write 64MiB or 64KiB (or 64B for bytes)"},
		{"CALLBOX_CALLBACKS_SCALE_MAX_OUTPUT=1024", "CALLBOX_CALLBACKS_SCALE_MAX_OUTPUT: 1024 has no unit; write 1024MiB or 1024KiB"},
		{"CALLBOX_DEFAULTS_MAX_LOG= 7 ", "CALLBOX_DEFAULTS_MAX_LOG: 7 has no unit"},
		{"CALLBOX_DEFAULTS_MAX_MEMORY=8GiB", "CALLBOX_DEFAULTS_MAX_MEMORY: 8GiB is out of range"},
		{"CALLBOX_DEFAULTS_ENGINE=v8", `CALLBOX_DEFAULTS_ENGINE: bad engine "v8" (allowed: wazero or wasmtime)`},
		{"CALLBOX_DEFAULTS_FUEL=-5", `CALLBOX_DEFAULTS_FUEL: "-5": must not be negative`},
		{"CALLBOX_CALLBACKS_SCALE_MAX_MEMORY=lots", `CALLBOX_CALLBACKS_SCALE_MAX_MEMORY: bad size "lots"`},
		{"CALLBOX_CALLBACKS_MY_OP_SIGNATURE=(x", `CALLBOX_CALLBACKS_MY_OP_SIGNATURE: signature "(x"`},
		{"CALLBOX_CALLBACKS_SCALE_SHA256=beef", `CALLBOX_CALLBACKS_SCALE_SHA256: "beef" has 4 characters`},
		{"CALLBOX_DEFAULTS_TIMOUT=1s", "CALLBOX_DEFAULTS_TIMOUT: unknown key timout (did you mean CALLBOX_DEFAULTS_TIMEOUT?)"},
		{"CALLBOX_DEFAULTS_MODULE=a.wasm", "CALLBOX_DEFAULTS_MODULE: module cannot be set in defaults"},
		{"CALLBOX_CALLBACKS_SCALE_TIMOUT=1s", "CALLBOX_CALLBACKS_SCALE_TIMOUT: unknown key timout (did you mean CALLBOX_CALLBACKS_SCALE_TIMEOUT?)"},
		{"CALLBOX_CALLBACKS_MY_OP_WHATEVER=1", "CALLBOX_CALLBACKS_MY_OP_WHATEVER: unknown key whatever (allowed: CALLBOX_CALLBACKS_MY_OP_ followed by one of"},
		{"CALLBOX_CALLBACKS_NEW_MODULE=n.wasm", "CALLBOX_CALLBACKS_NEW_MODULE: matches no callback in "},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			cfg, path, err := loadYAML(t, file, tt.env)
			assert.Nil(t, cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.message)
			assert.NotContains(t, err.Error(), path+": CALLBOX_", "environment errors name the variable, not the file")
			errs := configErrors(t, err)
			require.Len(t, errs, 1)
			assert.Equal(t, strings.SplitN(tt.env, "=", 2)[0], errs[0].Key)
		})
	}
}

func TestErrorsAreCollected(t *testing.T) {
	cfg, path, err := loadYAML(t, `
cachedir: x
defaults:
  timeout: 5
  max_memory: 1TiB
callbacks:
  Bad:
    module: a.wasm
  ok:
    module: a.wasm
    engine: v8
  nomod:
    fuel: -1
`, "CALLBOX_DEFAULTS_WASI=all")
	assert.Nil(t, cfg)
	errs := configErrors(t, err)
	var keys []string
	for _, e := range errs {
		keys = append(keys, e.Key)
	}
	assert.ElementsMatch(t, []string{
		"cachedir", "defaults.timeout", "defaults.max_memory", `callbacks."Bad"`,
		"callbacks.ok.engine", "callbacks.nomod.fuel", "callbacks.nomod.module", "CALLBOX_DEFAULTS_WASI",
	}, keys)
	for _, line := range strings.Split(err.Error(), "\n") {
		if !strings.HasPrefix(line, "CALLBOX_") {
			assert.True(t, strings.HasPrefix(line, path+": "), "line %q does not name the file", line)
		}
	}
}

func TestValuesOfBadlyNamedCallbacksAreChecked(t *testing.T) {
	_, _, err := loadYAML(t, "callbacks:\n  Bad:\n    timeout: forever\n")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `callbacks."Bad".timeout: bad duration "forever"`)
	assert.Contains(t, err.Error(), `callbacks."Bad".module: required`)
}

func TestFileErrors(t *testing.T) {
	t.Run("unsupported extension", func(t *testing.T) {
		path := writeConfig(t, "config.ini", "a=1")
		_, err := LoadEnv(path, nil)
		require.Error(t, err)
		assert.Equal(t, path+`: unsupported config format ".ini" (use .yaml, .yml, .toml or .json)`, err.Error())
	})
	t.Run("no extension", func(t *testing.T) {
		_, err := LoadEnv("callbox", nil)
		assert.EqualError(t, err, `callbox: unsupported config format "" (use .yaml, .yml, .toml or .json)`)
	})
	t.Run("missing file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "nope.yaml")
		_, err := LoadEnv(path, nil)
		require.Error(t, err)
		assert.ErrorIs(t, err, fs.ErrNotExist)
		assert.True(t, strings.HasPrefix(err.Error(), path+": cannot open: "), err.Error())
	})
	for name, content := range map[string]string{
		"bad.yaml":    "callbacks:\n  a: [\n",
		"scalar.yaml": "just a string\n",
		"dup.yaml":    "cache_dir: a\ncache_dir: b\n",
		"bad.toml":    "callbacks = [\n",
		"bad.json":    `{"callbacks": }`,
		"list.json":   `[1, 2]`,
	} {
		t.Run(name, func(t *testing.T) {
			path := writeConfig(t, name, content)
			cfg, err := LoadEnv(path, nil)
			assert.Nil(t, cfg)
			require.Error(t, err)
			format := strings.ToUpper(strings.TrimPrefix(filepath.Ext(name), "."))
			assert.True(t, strings.HasPrefix(err.Error(), path+": bad "+format+": "), err.Error())
		})
	}
}

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

func TestJSONDuplicateKeys(t *testing.T) {
	path := writeConfig(t, "config.json", `{
  "defaults": {"timeout": "1s", "timeout": "2s"},
  "callbacks": {"a": {"module": "a.wasm", "engine": "wazero"}, "a": {"module": "b.wasm"}},
  "cache_dir": "x", "cache_dir": "y"
}`)
	cfg, err := LoadEnv(path, nil)
	assert.Nil(t, cfg)
	var keys []string
	for _, e := range configErrors(t, err) {
		assert.Equal(t, path, e.File)
		assert.Equal(t, "duplicate key (JSON would keep only the last)", e.Err.Error())
		keys = append(keys, e.Key)
	}
	assert.Equal(t, []string{"defaults.timeout", "callbacks.a", "cache_dir"}, keys)

	// The same key in different objects is fine.
	cfg, err = LoadEnv(writeConfig(t, "ok.json", `{"callbacks": {"a": {"module": "a.wasm"}, "b": {"module": "b.wasm"}}}`), nil)
	require.NoError(t, err)
	assert.Len(t, cfg.Callbacks, 2)
}

// panickyDecoder is a decoder with a bug.
type panickyDecoder struct{}

func (panickyDecoder) Decode([]byte, map[string]any) error { panic("index out of range") }

func TestDecoderPanicBecomesError(t *testing.T) {
	err := decodeSafely(panickyDecoder{}, []byte("x"), map[string]any{})
	assert.EqualError(t, err, "parser panicked: index out of range")
}

func TestUpperCaseNamesRejectedInEveryFormat(t *testing.T) {
	for name, content := range map[string]string{
		"config.yaml": "callbacks:\n  Scale:\n    module: a.wasm\n",
		"config.toml": "[callbacks.Scale]\nmodule = \"a.wasm\"\n",
		"config.json": `{"callbacks": {"Scale": {"module": "a.wasm"}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := writeConfig(t, name, content)
			cfg, err := LoadEnv(path, nil)
			assert.Nil(t, cfg)
			assert.EqualError(t, err, path+`: callbacks."Scale": bad callback name "Scale": names must match ^[a-z][a-z0-9_-]*$ (names are case-sensitive; did you mean scale?)`)
		})
	}
}

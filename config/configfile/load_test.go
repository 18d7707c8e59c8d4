package configfile

// Loading a file: the formats (YAML, TOML, JSON) giving the same
// configuration, empty files, JSON's duplicate keys, a decoder's panic,
// and the errors of a file that cannot be read or parsed; with the
// helpers the package's tests share.

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
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

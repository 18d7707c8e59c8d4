package configfile

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
)

const modulesYAML = `
defaults:
  timeout: 2s
modules:
  kit:
    module: kit.wasm
    sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
    max_memory: 32MiB
    callbacks:
      softmax:
        timeout: 50ms
      scale:
  other:
    module: /abs/other.wasm
callbacks:
  plain:
    module: plain.wasm
`

// TestModulesLoad: a modules entry resolves as a callback does (built-in
// defaults, defaults, the entry's keys, its environment variables), and
// each override on top of the entry.
func TestModulesLoad(t *testing.T) {
	cfg, path, err := loadYAML(t, modulesYAML, "CALLBOX_MODULES_KIT_FUEL=5", "CALLBOX_MODULES_OTHER_ENGINE=wasmtime")
	require.NoError(t, err)
	require.NoError(t, cfg.Validate())
	dir := filepath.Dir(path)
	require.Len(t, cfg.Callbacks, 1)
	require.Len(t, cfg.Modules, 2)

	kit := cfg.Modules[0]
	assert.Equal(t, "kit", kit.Name)
	assert.Equal(t, filepath.Join(dir, "kit.wasm"), kit.Settings.Module)
	assert.Equal(t, "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", kit.Settings.SHA256)
	assert.Equal(t, 2*time.Second, kit.Settings.Limits.Timeout)
	assert.Equal(t, uint64(32<<20), kit.Settings.Limits.MaxMemory)
	assert.Equal(t, uint64(5), kit.Settings.Limits.Fuel, "CALLBOX_MODULES_KIT_FUEL")
	require.Len(t, kit.Overrides, 2)
	assert.Equal(t, kit.Settings, kit.Overrides["scale"], "an empty override is the entry's settings")
	soft := kit.Overrides["softmax"]
	assert.Equal(t, 50*time.Millisecond, soft.Limits.Timeout)
	assert.Equal(t, uint64(32<<20), soft.Limits.MaxMemory)
	assert.Equal(t, uint64(5), soft.Limits.Fuel)

	other := cfg.Modules[1]
	assert.Equal(t, "/abs/other.wasm", other.Settings.Module)
	assert.Equal(t, config.EngineWasmtime, other.Settings.Engine)
	assert.Nil(t, other.Overrides)

	// The expansion a host does, with the module's table given.
	cbs, err := kit.Expand(path, testTable(t, "scale", "softmax", "tap"))
	require.NoError(t, err)
	require.Len(t, cbs, 3)
	assert.Equal(t, "softmax", cbs[1].Name)
	assert.Equal(t, 50*time.Millisecond, cbs[1].Limits.Timeout)
	assert.Equal(t, "tap", cbs[2].Export)
	assert.Equal(t, 2*time.Second, cbs[2].Limits.Timeout)
}

// testTable is a signature table declaring names.
func testTable(t *testing.T, names ...string) map[string]*abi.Signature {
	t.Helper()
	out := map[string]*abi.Signature{}
	for _, n := range names {
		s, err := abi.ParseSignature("(x: f32[n]) -> $x")
		require.NoError(t, err)
		out[n] = s
	}
	return out
}

// TestModulesFormats: TOML and JSON spell a modules entry the same way.
func TestModulesFormats(t *testing.T) {
	want := mustLoadYAML(t, "modules:\n  kit:\n    module: /m/kit.wasm\n    timeout: 3s\n    callbacks:\n      softmax: {timeout: 50ms}\n")
	for name, text := range map[string]string{
		"config.toml": "[modules.kit]\nmodule = \"/m/kit.wasm\"\ntimeout = \"3s\"\n[modules.kit.callbacks.softmax]\ntimeout = \"50ms\"\n",
		"config.json": `{"modules": {"kit": {"module": "/m/kit.wasm", "timeout": "3s", "callbacks": {"softmax": {"timeout": "50ms"}}}}}`,
	} {
		cfg, err := LoadEnv(writeConfig(t, name, text), nil)
		require.NoError(t, err, name)
		assert.Equal(t, want.Modules, cfg.Modules, name)
	}
}

// TestModulesErrors: every mistake in a modules entry is an error naming
// the file and the key (or the variable).
func TestModulesErrors(t *testing.T) {
	for _, tc := range []struct {
		yaml    string
		environ []string
		want    []string
	}{
		{"modules: [a]\n", nil, []string{"modules: must be a map from an entry name to a module and its settings, got a list"}},
		{"modules:\n  kit: 3\n", nil, []string{"modules.kit: must be a map of settings"}},
		{"modules:\n  Kit:\n    module: k.wasm\n", nil, []string{`modules."Kit": bad module entry name "Kit"`}},
		{"modules:\n  kit: {}\n", nil, []string{"modules.kit.module: required"}},
		{"modules:\n  kit:\n    module: k.wasm\n    timeot: 1s\n", nil, []string{"modules.kit.timeot: unknown key (did you mean timeout?)"}},
		{"modules:\n  kit:\n    module: k.wasm\n    signature: \"() -> s32[]\"\n", nil, []string{"modules.kit.signature: signature cannot be set in a modules entry"}},
		{"modules:\n  kit:\n    module: k.wasm\n    max_memory: 64\n", nil, []string{"modules.kit.max_memory: 64 has no unit"}},
		{"modules:\n  kit:\n    module: k.wasm\n    callbacks: [a]\n", nil, []string{"modules.kit.callbacks: must be a map from an export name"}},
		{"modules:\n  kit:\n    module: k.wasm\n    callbacks:\n      soft: {timeout: 50}\n", nil, []string{"modules.kit.callbacks.soft.timeout: 50 has no unit; write 50ms or 50s"}},
		{"modules:\n  kit:\n    module: k.wasm\n    callbacks:\n      soft: {module: x.wasm}\n", nil, []string{"modules.kit.callbacks.soft.module: module cannot be set for one callback of a modules entry"}},
		{"modules:\n  kit:\n    module: k.wasm\n    callbacks:\n      Soft: {}\n", nil, []string{`modules.kit.callbacks."Soft": bad callback name "Soft"`}},
		{"modules:\n  kit:\n    module: k.wasm\n", []string{"CALLBOX_MODULES_KIT_TIMEOT=1s"}, []string{"CALLBOX_MODULES_KIT_TIMEOT: unknown key timeot (did you mean CALLBOX_MODULES_KIT_TIMEOUT?)"}},
		{"modules:\n  kit:\n    module: k.wasm\n", []string{"CALLBOX_MODULES_NOPE_TIMEOUT=1s"}, []string{"CALLBOX_MODULES_NOPE_TIMEOUT: matches no modules entry"}},
		{"modules:\n  kit:\n    module: k.wasm\n", []string{"CALLBOX_MODULES_KIT_TIMEOUT=50"}, []string{"CALLBOX_MODULES_KIT_TIMEOUT: 50 has no unit"}},
		{"module:\n  kit: {}\n", nil, []string{"module: unknown key (did you mean modules?)"}},
	} {
		_, path, err := loadYAML(t, tc.yaml, tc.environ...)
		require.Error(t, err, tc.yaml)
		for _, w := range tc.want {
			prefix := path + ": "
			if strings.HasPrefix(w, "CALLBOX_") {
				prefix = ""
			}
			assert.Contains(t, err.Error(), prefix+w, tc.yaml)
		}
	}
}

// TestExampleModules: example.yaml shows a modules entry.
func TestExampleModules(t *testing.T) {
	cfg, err := LoadEnv(examplePath, nil)
	require.NoError(t, err)
	require.Len(t, cfg.Modules, 1)
	m := cfg.Modules[0]
	assert.Equal(t, "rust-softmax", m.Name)
	assert.Equal(t, 500*time.Millisecond, m.Settings.Limits.Timeout)
	assert.Equal(t, uint64(32<<20), m.Overrides["softmax"].Limits.MaxMemory)
	data, err := readFileString(examplePath)
	require.NoError(t, err)
	for _, k := range config.ModuleKeys() {
		if k.PerCallback { // the defaults keys are shown in defaults
			assert.Contains(t, data, "\n    "+k.Name+": ")
		}
	}
}

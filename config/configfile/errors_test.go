package configfile

// What a bad configuration is told: every error naming its key (or
// variable) and what is wrong, in the file and in the environment, and
// all of a file's errors at once.

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
		{"unknown defaults key, no suggestion", "defaults:\n  color: red\n", nil, "defaults.color", "unknown key (allowed: engine, timeout, max_cpu, max_memory, fuel, max_stack, max_output, max_error, max_log, max_wait, isolation, max_instances, wasi, batching, deterministic, record_failures)"},
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

package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
)

const sha = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

// configErrors flattens a joined error into its *Error parts.
func configErrors(t *testing.T, err error) []*Error {
	t.Helper()
	require.Error(t, err)
	parts := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		parts = joined.Unwrap()
	}
	var out []*Error
	for _, part := range parts {
		var e *Error
		require.True(t, errors.As(part, &e), "not a *config.Error: %v", part)
		out = append(out, e)
	}
	return out
}

// codeConfig is a valid Config built in code.
func codeConfig() *Config {
	cb := DefaultCallback()
	cb.Name, cb.Module = "scale", "scale.wasm"
	return &Config{Defaults: DefaultCallback(), Callbacks: []Callback{cb}}
}

func TestValidateAcceptsCodeConfigs(t *testing.T) {
	c := codeConfig()
	require.NoError(t, c.Validate())

	c.Callbacks[0].Limits.Timeout = 0 // no timeout: allowed in code
	c.Callbacks[0].Export = ""        // means Name
	c.Callbacks[0].Limits.MaxStack = MinStack
	c.Callbacks[0].Limits.Fuel = MaxFuel
	c.Callbacks[0].MaxInstances = MaxInstancesCap
	c.Callbacks[0].Signature = "(x: f32[n]) -> $x"
	c.Callbacks[0].SHA256 = sha
	assert.NoError(t, c.Validate())

	c.Defaults = Callback{} // unused defaults are not checked
	assert.NoError(t, c.Validate())

	assert.NoError(t, (&Config{}).Validate(), "an empty config is valid")
}

func TestValidateRejects(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(c *Config)
		key     string
		message string
	}{
		{"negative timeout", func(c *Config) { c.Callbacks[0].Limits.Timeout = -time.Second }, "callbacks.scale.timeout", "-1s is out of range"},
		{"timeout too long", func(c *Config) { c.Callbacks[0].Limits.Timeout = MaxTimeout + 1 }, "callbacks.scale.timeout", "out of range"},
		{"memory not page-rounded", func(c *Config) { c.Callbacks[0].Limits.MaxMemory = MinMemory + 1 }, "callbacks.scale.max_memory", "65537 bytes is not a whole number of 64KiB pages"},
		{"memory zero", func(c *Config) { c.Callbacks[0].Limits.MaxMemory = 0 }, "callbacks.scale.max_memory", "0B is out of range"},
		{"memory too large", func(c *Config) { c.Callbacks[0].Limits.MaxMemory = MaxMemoryLimit + abi.PageSize }, "callbacks.scale.max_memory", "out of range"},
		{"fuel too large", func(c *Config) { c.Callbacks[0].Limits.Fuel = MaxFuel + 1 }, "callbacks.scale.fuel", "out of range"},
		{"stack too small", func(c *Config) { c.Callbacks[0].Limits.MaxStack = MinStack - 1 }, "callbacks.scale.max_stack", "out of range"},
		{"output zero", func(c *Config) { c.Callbacks[0].Limits.MaxOutput = 0 }, "callbacks.scale.max_output", "out of range"},
		{"error too large", func(c *Config) { c.Callbacks[0].Limits.MaxError = MaxErrorLimit + 1 }, "callbacks.scale.max_error", "out of range"},
		{"log too large", func(c *Config) { c.Callbacks[0].Limits.MaxLog = MaxLogLimit + 1 }, "callbacks.scale.max_log", "out of range"},
		{"no instances", func(c *Config) { c.Callbacks[0].MaxInstances = 0 }, "callbacks.scale.max_instances", "0 is out of range"},
		{"bad engine", func(c *Config) { c.Callbacks[0].Engine = "" }, "callbacks.scale.engine", `bad engine "" (allowed: wazero or wasmtime)`},
		{"bad isolation", func(c *Config) { c.Callbacks[0].Isolation = "shared" }, "callbacks.scale.isolation", "allowed: pooled or fresh"},
		{"bad wasi", func(c *Config) { c.Callbacks[0].WASI = "full" }, "callbacks.scale.wasi", "allowed: none or minimal"},
		{"no module", func(c *Config) { c.Callbacks[0].Module = "" }, "callbacks.scale.module", "required"},
		{"upper-case sha256", func(c *Config) { c.Callbacks[0].SHA256 = strings.ToUpper(sha) }, "callbacks.scale.sha256", "lower-case hex"},
		{"bad signature", func(c *Config) { c.Callbacks[0].Signature = "f32[n]" }, "callbacks.scale.signature", "signature"},
		{"bad name", func(c *Config) { c.Callbacks[0].Name = "Scale" }, "callbacks[0]", `bad callback name "Scale"`},
		{"empty name", func(c *Config) { c.Callbacks[0].Name = "" }, "callbacks[0]", `bad callback name ""`},
		{"duplicate name", func(c *Config) { c.Callbacks = append(c.Callbacks, c.Callbacks[0]) }, "callbacks.scale", "duplicate callback name"},
		{"names clash in the environment", func(c *Config) {
			c.Callbacks[0].Name = "my-op"
			c.Callbacks = append(c.Callbacks, c.Callbacks[0])
			c.Callbacks[1].Name = "my_op"
		}, "callbacks.my_op", "CALLBOX_CALLBACKS_MY_OP_*"},
		{"bad defaults", func(c *Config) { c.Defaults.Limits.MaxLog = MaxLogLimit + 1 }, "defaults.max_log", "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := codeConfig()
			c.File = "in-code.yaml"
			tt.mutate(c)
			err := c.Validate()
			require.Error(t, err)
			errs := configErrors(t, err)
			require.Len(t, errs, 1, "%v", err)
			assert.Equal(t, tt.key, errs[0].Key)
			assert.Equal(t, "in-code.yaml", errs[0].File)
			assert.Contains(t, err.Error(), "in-code.yaml: "+tt.key+": ")
			assert.Contains(t, err.Error(), tt.message)
		})
	}
}

func TestValidateCollectsAllProblems(t *testing.T) {
	c := codeConfig()
	c.Callbacks[0].Engine = "v8"
	c.Callbacks[0].Limits.MaxOutput = 0
	c.Defaults.WASI = "all"
	errs := configErrors(t, c.Validate())
	var keys []string
	for _, e := range errs {
		keys = append(keys, e.Key)
	}
	assert.ElementsMatch(t, []string{"defaults.wasi", "callbacks.scale.engine", "callbacks.scale.max_output"}, keys)
	assert.NotContains(t, c.Validate().Error(), ": :", "no file means no file prefix")
}

func TestValidateWrapsSignatureError(t *testing.T) {
	c := codeConfig()
	c.Callbacks[0].Signature = "(x: f32[n]"
	var syn *abi.SyntaxError
	assert.True(t, errors.As(c.Validate(), &syn))
}

func TestCheckName(t *testing.T) {
	for _, name := range []string{"a", "scale", "my-op", "my_op2", "z9-_"} {
		assert.NoError(t, checkName(name), name)
	}
	for _, name := range []string{"", "A", "Scale", "9a", "-a", "_a", "a.b", "a b", "ä", "a/b"} {
		assert.Error(t, checkName(name), name)
	}
}

func TestDurationText(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Hour: "1h", 2 * time.Minute: "2m", 90 * time.Minute: "1h30m", 10 * time.Second: "10s",
		0: "0s", 50 * time.Millisecond: "50ms", time.Hour + time.Second: "1h0m1s", -time.Second: "-1s",
	} {
		assert.Equal(t, want, durationText(d))
	}
}

func TestSizeText(t *testing.T) {
	assert.Equal(t, "0B", FormatSize(0))
	assert.Equal(t, "65537B", FormatSize(65537))
	assert.Equal(t, "64KiB", FormatSize(64<<10))
	assert.Equal(t, "4GiB", FormatSize(4<<30))
	assert.Equal(t, "1536KiB", FormatSize(1536<<10))
}

package config

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// key returns the Key named name.
func key(t *testing.T, name string) Key {
	t.Helper()
	for _, k := range Keys() {
		if k.Name == name {
			return k
		}
	}
	t.Fatalf("no key %s", name)
	return Key{}
}

// TestBareNumbersHaveNoUnit: every size and duration key refuses a number
// without a unit, whatever type the decoder gave it (YAML ints, TOML
// int64s, JSON float64s, environment strings), and accepts zero.
func TestBareNumbersHaveNoUnit(t *testing.T) {
	units := map[string]string{
		"timeout":    "write 64ms or 64s",
		"max_memory": "write 64MiB or 64KiB (or 64B for bytes)",
		"max_stack":  "write 64MiB or 64KiB (or 64B for bytes)",
		"max_output": "write 64MiB or 64KiB (or 64B for bytes)",
		"max_error":  "write 64MiB or 64KiB (or 64B for bytes)",
		"max_log":    "write 64MiB or 64KiB (or 64B for bytes)",
	}
	for name, want := range units {
		k := key(t, name)
		for _, raw := range []any{64, int64(64), uint64(64), float64(64), "64", " 64 "} {
			cb := DefaultCallback()
			before := cb
			err := k.Parse(raw, "", &cb)
			require.Error(t, err, "%s: %#v", name, raw)
			assert.Equal(t, "64 has no unit; "+want, err.Error(), "%s: %#v", name, raw)
			assert.Equal(t, before, cb, "%s: a refused value leaves the callback as it was", name)
		}
	}
	for _, name := range []string{"max_stack", "max_log"} {
		for _, raw := range []any{0, float64(0), "0", "0.0", "0B"} {
			cb := DefaultCallback()
			cb.Limits.MaxStack, cb.Limits.MaxLog = 1, 1
			require.NoError(t, key(t, name).Parse(raw, "", &cb), "%s: %#v", name, raw)
			assert.NoError(t, key(t, name).Check(&cb))
		}
	}
	cb := DefaultCallback()
	for _, raw := range []any{math.NaN(), math.Inf(1), math.Inf(-1)} {
		assert.ErrorContains(t, key(t, "max_output").Parse(raw, "", &cb), "not a finite number", "%v", raw)
		assert.ErrorContains(t, key(t, "timeout").Parse(raw, "", &cb), "not a finite number", "%v", raw)
	}
	assert.EqualError(t, key(t, "max_output").Parse(1e6, "", &cb), "1000000 has no unit; write 1000000MiB or 1000000KiB (or 1000000B for bytes)")
	assert.EqualError(t, key(t, "timeout").Parse(0, "", &cb), "0s: must be > 0 (allowed: "+timeoutAllowed+")")
}

func TestKeysParseUnits(t *testing.T) {
	cb := DefaultCallback()
	require.NoError(t, key(t, "max_memory").Parse("100KB", "", &cb))
	assert.Equal(t, uint64(2<<16), cb.Limits.MaxMemory, "100000 bytes round up to two pages")
	require.NoError(t, key(t, "timeout").Parse("1m30s", "", &cb))
	assert.Equal(t, 90*time.Second, cb.Limits.Timeout)
	require.NoError(t, key(t, "fuel").Parse(64, "", &cb), "fuel is a count: no unit")
	assert.Equal(t, uint64(64), cb.Limits.Fuel)
	require.NoError(t, key(t, "max_instances").Parse("8", "", &cb))
	assert.Equal(t, 8, cb.MaxInstances)
	require.NoError(t, key(t, "module").Parse("m.wasm", "/base", &cb))
	assert.Equal(t, "/base/m.wasm", cb.Module)
}

func TestLooksNumeric(t *testing.T) {
	for _, s := range []string{"0", "64", "-1", "+2", "1.5", ".5", "5."} {
		assert.True(t, looksNumeric(s), s)
	}
	for _, s := range []string{"", ".", "1.2.3", "64MiB", "inf", "NaN", "0x10", "1e6", "5 B"} {
		assert.False(t, looksNumeric(s), s)
	}
}

func TestCallbackNames(t *testing.T) {
	var names CallbackNames
	assert.NoError(t, names.Check("my-op"))
	assert.NoError(t, names.Check("my-op"), "the same name twice is not a clash (duplicates are reported elsewhere)")
	assert.ErrorContains(t, names.Check("my_op"), "callback names my-op and my_op both map to environment variables CALLBOX_CALLBACKS_MY_OP_*")
	assert.ErrorContains(t, names.Check("Op"), `bad callback name "Op"`)
	assert.Equal(t, "CALLBOX_CALLBACKS_MY_OP_", CallbackEnvPrefix("my-op"))
	assert.Equal(t, "callbacks.my-op", CallbackPath("my-op"))
	assert.Equal(t, `callbacks."a.b"`, CallbackPath("a.b"))
}

func TestParseCacheDir(t *testing.T) {
	dir, err := ParseCacheDir("cache", "/base")
	require.NoError(t, err)
	assert.Equal(t, "/base/cache", dir)
	dir, err = ParseCacheDir("", "/base")
	require.NoError(t, err)
	assert.Empty(t, dir, `"" disables the cache`)
	_, err = ParseCacheDir(5, "/base")
	assert.ErrorContains(t, err, "got a number (5)")
}

package configfile

// Values: sizes and their units, max_memory rounded to pages, bare
// numbers refused where a unit is due, worker_user, callback names.

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
)

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

package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunModulesEntry: `callbox run` and `check` find a callback that a
// modules entry declares, by its export name, with the entry's override;
// a bad entry is a usage error naming the file and key.
func TestRunModulesEntry(t *testing.T) {
	scale, err := filepath.Abs("../../guests/prebuilt/rust-scale.wasm")
	require.NoError(t, err)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "callbox.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("modules:\n  rust:\n    module: "+scale+"\n    callbacks:\n      scale: {timeout: 3s}\n"), 0o644))
	x, f := filepath.Join(dir, "x.npy"), filepath.Join(dir, "f.npy")
	for _, args := range [][]string{{"npy", "make", x, "1", "2", "3"}, {"npy", "make", f, "--shape", "scalar", "2"}} {
		code, _, stderr := cli(t, args...)
		require.Equal(t, exitOK, code, stderr)
	}
	code, stdout, stderr := cli(t, "run", "-c", cfg, "scale", "--in", x, "--in", f, "--stats")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "[2 4 6]")
	code, stdout, stderr = cli(t, "check", "-c", cfg)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "3s")

	require.NoError(t, os.WriteFile(cfg, []byte("modules:\n  rust:\n    module: "+scale+"\n    callbacks:\n      nope: {timeout: 3s}\n"), 0o644))
	code, _, stderr = cli(t, "run", "-c", cfg, "scale", "--in", x, "--in", f)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, cfg+`: modules.rust.callbacks.nope: module `+scale+` declares no signature for export "nope"`)
}

package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
)

// TestReplay: a recorded timeout replays to the same outcome on the
// engine it ran on and on the other, also from a copy of the bundle in
// another directory (nothing in it names where it was written); a fixed
// module replays to success (exit 1: the outcome differs); a bundle
// whose module was changed is refused.
func TestReplay(t *testing.T) {
	dir := workspace(t, "    record_failures: replays\n")
	p := func(name string) string { return filepath.Join(dir, name) }
	code, _, _ := cli(t, "run", "-c", p("config.yaml"), "spin", "--in", p("x.npy"), "--out", p("y.npy"))
	require.Equal(t, exitCallback, code)
	bundles, err := filepath.Glob(p("replays/spin/*"))
	require.NoError(t, err)
	require.Len(t, bundles, 1)
	bundle := bundles[0]

	for _, args := range [][]string{{}, {"--engine", "wasmtime"}} {
		code, out, stderr := cli(t, append([]string{"replay", bundle}, args...)...)
		assert.Equal(t, 0, code, "%v: %s%s", args, out, stderr)
		assert.Contains(t, out, "the same outcome: Timeout: timeout after 50ms", args)
	}

	moved := filepath.Join(t.TempDir(), "bundle")
	require.NoError(t, os.CopyFS(moved, os.DirFS(bundle)))
	code, out, stderr := cli(t, "replay", moved)
	assert.Equal(t, 0, code, "%s%s", out, stderr)

	fixed := filepath.Join(t.TempDir(), "fixed.wasm")
	require.NoError(t, os.WriteFile(fixed, wat.Must(`(module (memory (export "memory") 1)
	  (func (export "callbox_abi_version") (result i32) i32.const 1)
	  (func (export "callbox_alloc") (param i32 i32) (result i32) i32.const 1024)
	  (func (export "spin") (param i32) (result i32) i32.const 0))`), 0o644))
	code, out, _ = cli(t, "replay", moved, "--module", fixed)
	assert.Equal(t, exitDiffers, code)
	assert.Contains(t, out, "the call succeeded; recorded: Timeout: timeout after 50ms")

	require.NoError(t, os.WriteFile(filepath.Join(moved, "module.wasm"), []byte("\x00asm\x01\x00\x00\x00"), 0o644))
	code, _, stderr = cli(t, "replay", moved)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "the module was changed after the call was recorded")
}

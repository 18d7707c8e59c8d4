package core_test

import (
	"bytes"
	"context"
	"debug/elf"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/sandbox/internal/wasmtime"
)

// A wasmtime artifact whose bytes change while its sidecar (key and
// checksum) stays intact is recompiled, never deserialized: a flipped
// byte of machine code (.text) and one at the artifact's end each read as
// a miss, and the entry is rewritten with a good artifact.
func TestCorruptWasmtimeArtifactIsRecompiled(t *testing.T) {
	if !wasmtime.Available {
		t.Skip("wasmtime is not built in")
	}
	dir := t.TempDir()
	run := func() uint64 {
		e, err := wasmtime.New(context.Background(), wasmtime.Options{CacheDir: dir})
		require.NoError(t, err)
		defer e.Close(context.Background())
		v, err := call(t, instantiate(t, e, trapsWAT, limits(), nil), "ok", 41)
		require.NoError(t, err)
		return v
	}
	require.Equal(t, uint64(42), run())
	raws, err := filepath.Glob(filepath.Join(dir, "wasmtime", "*.raw"))
	require.NoError(t, err)
	require.Len(t, raws, 1)
	good, err := os.ReadFile(raws[0])
	require.NoError(t, err)
	f, err := elf.Open(raws[0])
	require.NoError(t, err)
	text := f.Section(".text")
	require.NotNil(t, text, "the artifact is an ELF object with a .text section")
	require.Greater(t, text.Size, uint64(0))
	textAt := int(text.Offset + text.Size/2)
	require.NoError(t, f.Close())

	for name, at := range map[string]int{"code": textAt, "last byte": len(good) - 1} {
		t.Run(name, func(t *testing.T) {
			bad := append([]byte(nil), good...)
			bad[at] ^= 0x01
			require.NoError(t, os.WriteFile(raws[0], bad, 0o600))
			require.Equal(t, uint64(42), run(), "a corrupt artifact is recompiled, never executed")
			now, err := os.ReadFile(raws[0])
			require.NoError(t, err)
			assert.False(t, bytes.Equal(bad, now), "the corrupt artifact was replaced")
			assert.Equal(t, good[at], now[at])
		})
	}
}

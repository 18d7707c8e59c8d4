package cachefile

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRoundTripAndCorruption(t *testing.T) {
	d, err := Open(t.TempDir(), "entries")
	require.NoError(t, err)
	d.Put("k1", []byte("payload"))
	got, ok := d.Get("k1")
	require.True(t, ok)
	assert.Equal(t, "payload", string(got))

	_, ok = d.Get("k2")
	assert.False(t, ok, "another key misses")

	// Flip a payload byte: the checksum catches it.
	path := d.file("k1")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	b[len(b)-1] ^= 1
	require.NoError(t, os.WriteFile(path, b, 0o600))
	_, ok = d.Get("k1")
	assert.False(t, ok)

	// A truncated entry misses too.
	require.NoError(t, os.WriteFile(path, b[:10], 0o600))
	_, ok = d.Get("k1")
	assert.False(t, ok)
}

func TestRawEntries(t *testing.T) {
	d, err := Open(t.TempDir(), "entries")
	require.NoError(t, err)
	d.PutRaw("k", []byte("compiled code"))
	path, ok := d.GetRaw("k")
	require.True(t, ok)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "compiled code", string(b))
	_, ok = d.GetRaw("other")
	assert.False(t, ok)
	b[0] ^= 1
	require.NoError(t, os.WriteFile(path, b, 0o600))
	_, ok = d.GetRaw("k")
	assert.False(t, ok, "a corrupt file is not handed out")
}

// The recorded checksum is XXH3-64 (the published test vector of the empty
// input), and the chunked reader the non-mapping path uses agrees with the
// one-shot sum on a payload of several chunks and a ragged tail.
func TestChecksum(t *testing.T) {
	assert.Equal(t, uint64(0x2D06800538D394C2), checksum(nil))
	payload := make([]byte, 3<<20+12345)
	for i := range payload {
		payload[i] = byte(i*131 + i>>9)
	}
	path := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(path, payload, 0o600))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	streamed, err := streamChecksum(f)
	require.NoError(t, err)
	mapped, err := fileChecksum(path)
	require.NoError(t, err)
	assert.Equal(t, checksum(payload), streamed)
	assert.Equal(t, checksum(payload), mapped)
}

// A large raw entry (the size of a compiled artifact's sections) misses
// when any part of it changes: its first byte, one in the middle, its last,
// a truncation, or an appended byte; so does a sidecar of the previous
// format (v2, CRC-32C).
func TestLargeRawEntryCorruption(t *testing.T) {
	d, err := Open(t.TempDir(), "entries")
	require.NoError(t, err)
	payload := make([]byte, 5<<20+77)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	d.PutRaw("k", payload)
	path, ok := d.GetRaw("k")
	require.True(t, ok)
	for _, c := range []struct {
		name string
		edit func([]byte) []byte
	}{
		{"first byte", func(b []byte) []byte { b[0] ^= 0x80; return b }},
		{"middle byte", func(b []byte) []byte { b[len(b)/2] ^= 1; return b }},
		{"last byte", func(b []byte) []byte { b[len(b)-1] ^= 0x10; return b }},
		{"swapped words", func(b []byte) []byte { copy(b[4096:4104], b[8192:8200]); b[8192] ^= 0xff; return b }},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }},
		{"extended", func(b []byte) []byte { return append(b, 0) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, os.WriteFile(path, c.edit(slices.Clone(payload)), 0o600))
			_, ok := d.GetRaw("k")
			assert.False(t, ok, "a corrupt artifact is not handed out")
		})
	}
	require.NoError(t, os.WriteFile(path, payload, 0o600))
	_, ok = d.GetRaw("k")
	require.True(t, ok, "the restored artifact is used again")

	meta := strings.TrimSuffix(path, ".raw") + ".meta"
	b, err := os.ReadFile(meta)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(b), magic))
	old := append([]byte("callbox-cache-v2\n"), b[len(magic):]...)
	require.NoError(t, os.WriteFile(meta, old, 0o600))
	_, ok = d.GetRaw("k")
	assert.False(t, ok, "an entry of the previous format is a miss")
}

// An entry that stops being the host user's alone after the directory
// was opened (made writable by others, or replaced by a link) reads as a
// miss, whatever its checksum says, and the next write replaces it.
func TestUntrustedEntriesMiss(t *testing.T) {
	root := t.TempDir()
	d, err := Open(root, "entries")
	require.NoError(t, err)
	d.Put("k", []byte("payload"))
	d.PutRaw("r", []byte("compiled code"))
	_, ok := d.Get("k")
	require.True(t, ok)
	_, ok = d.GetRaw("r")
	require.True(t, ok)

	require.NoError(t, os.Chmod(d.file("k"), 0o666))
	_, ok = d.Get("k")
	assert.False(t, ok, "an entry writable by others is not read")
	d.Put("k", []byte("payload"))
	_, ok = d.Get("k")
	assert.True(t, ok, "the next write replaces it, private")

	raw := d.file("r") + ".raw"
	planted := filepath.Join(t.TempDir(), "planted")
	b, err := os.ReadFile(raw)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(planted, b, 0o600))
	require.NoError(t, os.Remove(raw))
	require.NoError(t, os.Symlink(planted, raw))
	_, ok = d.GetRaw("r")
	assert.False(t, ok, "a linked entry is not handed out, though its checksum matches")

	// Opening the directory again refuses it outright.
	_, err = Open(root, "entries")
	var ue *UntrustedError
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, raw, ue.Path)
}

// Everything the cache creates is private: directories 0700, files 0600.
func TestCreatedPrivate(t *testing.T) {
	root := filepath.Join(t.TempDir(), "a", "b")
	d, err := Open(root, "entries")
	require.NoError(t, err)
	d.Put("k", []byte("x"))
	d.PutRaw("r", []byte("y"))
	for _, p := range []string{filepath.Dir(root), root, d.path} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), p)
	}
	for _, p := range []string{d.file("k"), d.file("r") + ".raw", d.file("r") + ".meta"} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), p)
	}
}

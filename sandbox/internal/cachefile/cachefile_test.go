package cachefile

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRoundTripAndCorruption(t *testing.T) {
	d, err := Open(t.TempDir())
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
	d, err := Open(t.TempDir())
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

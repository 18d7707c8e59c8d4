package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWrite: a written file is whole and readable by others; a failed
// write leaves the old file and no temporary file behind.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.bin")
	require.NoError(t, Write(p, func(w io.Writer) error { _, err := w.Write([]byte("first")); return err }))
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "first", string(b))
	st, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), st.Mode().Perm())

	boom := errors.New("boom")
	err = Write(p, func(w io.Writer) error { _, _ = w.Write([]byte("half")); return boom })
	assert.ErrorIs(t, err, boom)
	assert.ErrorContains(t, err, p)
	b, err = os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "first", string(b), "the old file is untouched")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file is left")

	assert.Error(t, Write(filepath.Join(dir, "nodir", "x"), func(io.Writer) error { return nil }))
}

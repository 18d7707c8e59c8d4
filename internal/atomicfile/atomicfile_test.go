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

// TestStage: a staged file holds the bytes, mode 0644, beside the path,
// which stays as it was until the caller renames; a failed stage leaves
// nothing behind.
func TestStage(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.bin")
	tmp, err := Stage(p, func(w io.Writer) error { _, err := w.Write([]byte("staged")); return err })
	require.NoError(t, err)
	assert.Equal(t, dir, filepath.Dir(tmp))
	b, err := os.ReadFile(tmp)
	require.NoError(t, err)
	assert.Equal(t, "staged", string(b))
	st, err := os.Stat(tmp)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), st.Mode().Perm())
	assert.NoFileExists(t, p, "nothing is in place until the caller renames")
	require.NoError(t, os.Remove(tmp))

	boom := errors.New("boom")
	_, err = Stage(p, func(io.Writer) error { return boom })
	assert.ErrorIs(t, err, boom)
	assert.ErrorContains(t, err, p)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "a failed stage leaves no temporary file")
}

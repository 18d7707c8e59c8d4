package engines_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nobody is a user id that is not this process's.
const nobody = 65534

// chownOther gives path to another user, or skips where this process
// cannot (only root can).
func chownOther(t *testing.T, path string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another user needs root")
	}
	require.NoError(t, os.Lchown(path, nobody, nobody))
}

// openEngine starts the named engine with its cache in dir.
func openEngine(t *testing.T, name, dir string) error {
	t.Helper()
	e, err := engines.New(context.Background(), name, engines.Options{CacheDir: dir})
	if err == nil {
		_ = e.Close(context.Background())
	}
	return err
}

// TestCacheDirectoryMustBeTheHostUsers: a cache directory, or anything
// in it, that another user could have written is refused when the engine
// starts, on both engines, with an error naming the path and what is
// wrong; a private one is used.
func TestCacheDirectoryMustBeTheHostUsers(t *testing.T) {
	// The directories each engine keeps in the cache directory: wazero's
	// compiled code and the meter's rewrites; wasmtime's compiled code.
	subs := map[string][]string{"wazero": {"wazero", "meter"}, "wasmtime": {"wasmtime"}}
	for _, name := range engines.Engines() {
		t.Run(name, func(t *testing.T) {
			refused := func(t *testing.T, dir, wantPath, wantWhy string) {
				t.Helper()
				err := openEngine(t, name, dir)
				require.Error(t, err)
				assert.Contains(t, err.Error(), "cache_dir: refusing "+wantPath)
				assert.Contains(t, err.Error(), wantWhy)
			}
			t.Run("private", func(t *testing.T) {
				require.NoError(t, openEngine(t, name, filepath.Join(t.TempDir(), "cache")))
			})
			t.Run("world writable", func(t *testing.T) {
				dir := t.TempDir()
				require.NoError(t, os.Chmod(dir, 0o777))
				refused(t, dir, dir, "writable by group or others")
			})
			t.Run("group writable", func(t *testing.T) {
				dir := t.TempDir()
				require.NoError(t, os.Chmod(dir, 0o770))
				refused(t, dir, dir, "writable by group or others")
			})
			t.Run("above, writable without the sticky bit", func(t *testing.T) {
				above := t.TempDir()
				require.NoError(t, os.Chmod(above, 0o777))
				refused(t, filepath.Join(above, "cache"), above, "a directory above it is writable by group or others without the sticky bit")
			})
			t.Run("above, writable with the sticky bit", func(t *testing.T) {
				above := t.TempDir()
				require.NoError(t, os.Chmod(above, 0o777|os.ModeSticky))
				require.NoError(t, openEngine(t, name, filepath.Join(above, "cache")))
			})
			t.Run("symlinked cache directory", func(t *testing.T) {
				base := t.TempDir()
				require.NoError(t, os.Mkdir(filepath.Join(base, "real"), 0o700))
				require.NoError(t, os.Symlink(filepath.Join(base, "real"), filepath.Join(base, "link")))
				refused(t, filepath.Join(base, "link"), filepath.Join(base, "link"), "symbolic link")
			})
			t.Run("another user's cache directory", func(t *testing.T) {
				dir := t.TempDir()
				chownOther(t, dir)
				refused(t, dir, dir, "belongs to uid 65534")
			})
			for _, sub := range subs[name] {
				t.Run(sub+": engine directory writable by others", func(t *testing.T) {
					dir := t.TempDir()
					require.NoError(t, os.Mkdir(filepath.Join(dir, sub), 0o700))
					require.NoError(t, os.Chmod(filepath.Join(dir, sub), 0o757))
					refused(t, dir, filepath.Join(dir, sub), "writable by group or others")
				})
				t.Run(sub+": symlinked entry", func(t *testing.T) {
					dir := t.TempDir()
					require.NoError(t, os.Mkdir(filepath.Join(dir, sub), 0o700))
					elsewhere := filepath.Join(t.TempDir(), "planted")
					require.NoError(t, os.WriteFile(elsewhere, []byte("code"), 0o600))
					entry := filepath.Join(dir, sub, "0123456789abcdef")
					require.NoError(t, os.Symlink(elsewhere, entry))
					refused(t, dir, entry, "symbolic link")
				})
				t.Run(sub+": entry writable by others", func(t *testing.T) {
					dir := t.TempDir()
					require.NoError(t, os.Mkdir(filepath.Join(dir, sub), 0o700))
					entry := filepath.Join(dir, sub, "0123456789abcdef")
					require.NoError(t, os.WriteFile(entry, []byte("code"), 0o600))
					require.NoError(t, os.Chmod(entry, 0o666))
					refused(t, dir, entry, "writable by group or others")
				})
				t.Run(sub+": engine directory made first by another user", func(t *testing.T) {
					dir := t.TempDir()
					require.NoError(t, os.Mkdir(filepath.Join(dir, sub), 0o700))
					chownOther(t, filepath.Join(dir, sub))
					refused(t, dir, filepath.Join(dir, sub), "belongs to uid 65534")
				})
				t.Run(sub+": another user's entry", func(t *testing.T) {
					dir := t.TempDir()
					require.NoError(t, os.Mkdir(filepath.Join(dir, sub), 0o700))
					entry := filepath.Join(dir, sub, "0123456789abcdef")
					require.NoError(t, os.WriteFile(entry, []byte("code"), 0o600))
					chownOther(t, entry)
					refused(t, dir, entry, "belongs to uid 65534")
				})
			}
		})
	}
}

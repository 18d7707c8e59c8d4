package cachefile

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Who may write a cache. A cache entry is compiled native code (wasmtime),
// a rewritten module (the meter's output, which the engine runs as it
// finds it) or wazero's compiled code: anyone who can write one can make
// the host run code of their choosing, or a module without its meter. The
// checksum in every entry detects corruption, not tampering. So a cache
// is used only when nobody but the host's own user (and root) can have
// written anything in it, which is checked the way ssh checks its key
// files:
//
//   - the configured cache directory and everything the host uses below
//     it (each engine's directory, wazero's versioned directory, every
//     entry) must be owned by the host's effective user, not writable by
//     group or others, and not a symbolic link; entries must be regular
//     files;
//   - every directory above the cache directory (symbolic links resolved)
//     must be owned by root or by that user, and not writable by group or
//     others unless its sticky bit is set (as /tmp's is), so that no one
//     else can rename the cache directory and put another in its place.
//
// A cache directory that fails is refused with an *UntrustedError naming
// the path and what is wrong with it; the host does not start the engine
// (a silent fall back to no cache would hide the problem). Everything the
// host creates is 0700 (directories) or 0600 (files).

// UntrustedError is a cache directory, or something in or above it, that
// someone other than the host's user could have written.
type UntrustedError struct {
	// Root is the configured cache directory; Path what failed in or
	// above it.
	Root, Path string
	Reason     string
}

func (e *UntrustedError) Error() string {
	what := e.Path
	if e.Path != e.Root {
		what = fmt.Sprintf("%s (in the cache directory %s)", e.Path, e.Root)
	}
	return fmt.Sprintf("cache_dir: refusing %s: %s; another user who can write there could plant compiled code "+
		"that callbox would run: make the cache directory yours and private (chown, chmod 700), or use a per-user one "+
		"such as ~/.cache/callbox (cache_dir, CALLBOX_CACHE_DIR)", what, e.Reason)
}

// Prepare creates root/name (and root), 0700, where missing, checks that
// root and everything in root/name can be trusted (Trust), and returns
// root/name.
func Prepare(root, name string) (string, error) {
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("cache: %w", err)
	}
	return dir, Trust(root, dir)
}

// Trust checks that nobody but the host's effective user and root can
// have written root (the configured cache directory), dir (a directory in
// it) or anything under dir, or can replace root: the rules above.
func Trust(root, dir string) error {
	if !ownersKnown {
		return nil
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	// Above root, links resolved: root or us, and no one else may
	// rename what is below unless the sticky bit stops them.
	parent, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	for p := parent; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("cache: %w", err)
		}
		if uid := owner(fi); uid != 0 && uid != euid() {
			return &UntrustedError{Root: root, Path: p, Reason: fmt.Sprintf("a directory above it belongs to uid %d", uid)}
		}
		if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
			return &UntrustedError{Root: root, Path: p, Reason: fmt.Sprintf("a directory above it is writable by group or others without the sticky bit (mode %s)", fi.Mode())}
		}
		if filepath.Dir(p) == p {
			break
		}
	}
	// root, then every directory on the way down to dir: ours and
	// private.
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	p := root
	if err := private(root, p, true); err != nil {
		return err
	}
	for _, part := range splitPath(rel) {
		p = filepath.Join(p, part)
		if err := private(root, p, true); err != nil {
			return err
		}
	}
	// Everything under dir.
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("cache: %w", err)
		}
		if path == dir {
			return nil
		}
		return private(root, path, d.IsDir())
	})
}

// splitPath splits a relative path into its elements.
func splitPath(rel string) []string {
	var parts []string
	for rel != "." && rel != "" {
		d, f := filepath.Split(rel)
		parts = append([]string{f}, parts...)
		rel = filepath.Clean(d)
		if d == "" {
			break
		}
	}
	return parts
}

// private checks one path in the cache: not a link, a directory (dir) or
// a regular file, owned by the host's user, writable by no one else.
func private(root, path string, dir bool) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return &UntrustedError{Root: root, Path: path, Reason: "it is a symbolic link"}
	case dir && !fi.IsDir():
		return &UntrustedError{Root: root, Path: path, Reason: "it is not a directory"}
	case !dir && !fi.Mode().IsRegular():
		return &UntrustedError{Root: root, Path: path, Reason: "it is not a regular file"}
	case owner(fi) != euid():
		return &UntrustedError{Root: root, Path: path, Reason: fmt.Sprintf("it belongs to uid %d, not to this process's user (uid %d)", owner(fi), euid())}
	case fi.Mode().Perm()&0o022 != 0:
		return &UntrustedError{Root: root, Path: path, Reason: fmt.Sprintf("it is writable by group or others (mode %s)", fi.Mode())}
	}
	return nil
}

// trustedFile reports whether an entry file may be read: a regular file
// (not a link), the host's user's, writable by no one else. Entries
// failing it read as misses and are replaced by the next write.
func trustedFile(path string) bool {
	if !ownersKnown {
		return true
	}
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode().IsRegular() && owner(fi) == euid() && fi.Mode().Perm()&0o022 == 0
}

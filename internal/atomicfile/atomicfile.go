// Package atomicfile writes a file so that a reader sees the old file or
// the whole new one, never a part: through a temporary file beside it,
// renamed into place once written and closed.
package atomicfile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write writes path with write, mode 0644. On any failure path is left as
// it was and the temporary file is removed; the error names path.
func Write(path string, write func(io.Writer) error) error {
	tmp, err := Stage(path, write)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Stage writes what path will hold to a temporary file beside it (mode
// 0644, closed) and returns its name, for a caller that renames several
// files into place only once all are written. On failure nothing is left
// behind; the error names path.
func Stage(path string, write func(io.Writer) error) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return f.Name(), nil
}

//go:build !cgo

package wat

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Compile converts WebAssembly text to a binary module with wabt's
// wat2wasm, which must be on PATH.
func Compile(src string) ([]byte, error) { return wat2wasm(src, "--enable-all") }

// CompileUnchecked converts WebAssembly text to a binary module without
// validating it (wat2wasm --no-check), for tests that need invalid
// modules.
func CompileUnchecked(src string) ([]byte, error) { return wat2wasm(src, "--enable-all", "--no-check") }

func wat2wasm(src string, flags ...string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "wat")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	in, out := filepath.Join(dir, "m.wat"), filepath.Join(dir, "m.wasm")
	if err := os.WriteFile(in, []byte(src), 0o600); err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd := exec.Command("wat2wasm", append(flags, in, "-o", out)...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("wat2wasm: %w: %s", err, stderr.String())
	}
	return os.ReadFile(out)
}

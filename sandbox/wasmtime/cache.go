//go:build cgo

package wasmtime

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"

	wt "github.com/bytecodealliance/wasmtime-go/v39"
)

// diskCache keeps serialized compiled modules. Deserializing a wasmtime
// artifact executes its machine code, so an entry is trusted only when its
// header names the exact cache key and its payload matches the recorded
// sha256; anything else (a truncated write, a file from another version or
// configuration, bit rot) is ignored and recompiled. The directory itself
// must be writable only by the host's user: a checksum is no defence
// against someone who can write both the payload and the sum.
type diskCache struct {
	dir string
}

const cacheMagic = "callbox-wasmtime-cache-v1\n"

func newDiskCache(root string) (*diskCache, error) {
	dir := filepath.Join(root, "wasmtime")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("wasmtime cache: %w", err)
	}
	return &diskCache{dir: dir}, nil
}

func (c *diskCache) path(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(c.dir, fmt.Sprintf("%x.cwasm", sum[:16]))
}

// load returns the cached module, or nil when there is no valid entry.
func (c *diskCache) load(eng *wt.Engine, key string) *wt.Module {
	data, err := os.ReadFile(c.path(key))
	if err != nil {
		return nil
	}
	payload, ok := verifyEntry(data, key)
	if !ok {
		return nil
	}
	mod, err := wt.NewModuleDeserialize(eng, payload)
	if err != nil {
		return nil
	}
	return mod
}

// verifyEntry checks an entry's header: magic, key line, sha256 line.
func verifyEntry(data []byte, key string) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(data, []byte(cacheMagic))
	if !ok {
		return nil, false
	}
	line, rest, ok := bytes.Cut(rest, []byte{'\n'})
	if !ok || string(line) != key {
		return nil, false
	}
	sumLine, payload, ok := bytes.Cut(rest, []byte{'\n'})
	if !ok {
		return nil, false
	}
	sum := sha256.Sum256(payload)
	if string(sumLine) != fmt.Sprintf("%x", sum) {
		return nil, false
	}
	return payload, true
}

// store writes an entry atomically (temp file, then rename). Failures are
// ignored: the cache is an optimisation.
func (c *diskCache) store(mod *wt.Module, key string) {
	payload, err := mod.Serialize()
	if err != nil {
		return
	}
	sum := sha256.Sum256(payload)
	var b bytes.Buffer
	b.WriteString(cacheMagic)
	b.WriteString(key + "\n")
	fmt.Fprintf(&b, "%x\n", sum)
	b.Write(payload)
	tmp, err := os.CreateTemp(c.dir, "tmp-*")
	if err != nil {
		return
	}
	if _, err := tmp.Write(b.Bytes()); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return
	}
	if err := os.Rename(tmp.Name(), c.path(key)); err != nil {
		os.Remove(tmp.Name())
	}
}

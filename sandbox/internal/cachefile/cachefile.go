// Package cachefile stores derived artifacts (rewritten modules, compiled
// code) on disk, each under a key that names everything it was derived
// from. An entry is used only when its header names the exact key and its
// payload matches the recorded checksum (XXH3-64, RATIONALE.md: "A cache
// hit checksums with XXH3"); anything else — a truncated write, an entry
// from another version or configuration, bit rot — reads as a miss, and
// the caller rebuilds it. The checksum detects corruption, not tampering:
// a directory someone else could write is refused (trust.go), and an
// entry file that is a link, another user's, or writable by others reads
// as a miss.
package cachefile

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/zeebo/xxh3"
)

// magic starts every entry and sidecar; v3 entries carry an XXH3-64 (v2's
// CRC-32C entries read as misses).
const magic = "callbox-cache-v3\n"

// sumSize is the size of a recorded checksum.
const sumSize = 8

// checksum is an entry payload's checksum: XXH3-64, which runs at about
// memory bandwidth (AVX2 where the CPU has it), three to four times CRC-32C's
// speed on a large artifact.
func checksum(b []byte) uint64 { return xxh3.Hash(b) }

func putSum(b *bytes.Buffer, payload []byte) {
	var sum [sumSize]byte
	binary.LittleEndian.PutUint64(sum[:], checksum(payload))
	b.Write(sum[:])
}

// Dir is one directory of entries.
type Dir struct{ path string }

// Open creates (if needed) and returns the cache directory name inside
// root, the configured cache directory, after checking that nobody but
// the host's user can have written either or anything in them (Trust).
func Open(root, name string) (*Dir, error) {
	path, err := Prepare(root, name)
	if err != nil {
		return nil, err
	}
	return &Dir{path: path}, nil
}

func (d *Dir) file(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(d.path, fmt.Sprintf("%x", sum[:16]))
}

// Get returns the payload stored under key, or false.
func (d *Dir) Get(key string) ([]byte, bool) {
	if !trustedFile(d.file(key)) {
		return nil, false
	}
	data, err := os.ReadFile(d.file(key))
	if err != nil {
		return nil, false
	}
	return Verify(data, key)
}

// Verify checks an entry's header and checksum and returns its payload.
func Verify(data []byte, key string) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(data, []byte(magic))
	if !ok {
		return nil, false
	}
	line, rest, ok := bytes.Cut(rest, []byte{'\n'})
	if !ok || string(line) != key || len(rest) < sumSize {
		return nil, false
	}
	sum, payload := binary.LittleEndian.Uint64(rest), rest[sumSize:]
	if checksum(payload) != sum {
		return nil, false
	}
	return payload, true
}

// Put stores payload under key atomically (temp file, then rename).
// Failures are ignored: a cache is an optimisation.
func (d *Dir) Put(key string, payload []byte) {
	var b bytes.Buffer
	b.Grow(len(magic) + len(key) + 1 + sumSize + len(payload))
	b.WriteString(magic)
	b.WriteString(key + "\n")
	putSum(&b, payload)
	b.Write(payload)
	_ = writeAtomic(d.path, d.file(key), b.Bytes())
}

// PutRaw stores payload under key as a bare file with a sidecar header
// (for consumers that map the file themselves, like wasmtime's
// deserialize-from-file). Failures are ignored.
func (d *Dir) PutRaw(key string, payload []byte) {
	var meta bytes.Buffer
	meta.WriteString(magic)
	meta.WriteString(key + "\n")
	putSum(&meta, payload)
	base := d.file(key)
	if writeAtomic(d.path, base+".raw", payload) == nil {
		_ = writeAtomic(d.path, base+".meta", meta.Bytes())
	}
}

// GetRaw returns the path of the bare file stored under key when its
// sidecar names the key and its checksum matches, reading it in chunks
// without holding it in memory.
func (d *Dir) GetRaw(key string) (string, bool) {
	base := d.file(key)
	if !trustedFile(base+".meta") || !trustedFile(base+".raw") {
		return "", false
	}
	meta, err := os.ReadFile(base + ".meta")
	if err != nil {
		return "", false
	}
	rest, ok := bytes.CutPrefix(meta, []byte(magic))
	if !ok {
		return "", false
	}
	line, rest, ok := bytes.Cut(rest, []byte{'\n'})
	if !ok || string(line) != key || len(rest) != sumSize {
		return "", false
	}
	sum, err := fileChecksum(base + ".raw")
	if err != nil || sum != binary.LittleEndian.Uint64(rest) {
		return "", false
	}
	return base + ".raw", true
}

// streamChecksum is the checksum of a file read in chunks.
func streamChecksum(f *os.File) (uint64, error) {
	h := xxh3.New()
	if _, err := io.CopyBuffer(h, f, make([]byte, 1<<20)); err != nil {
		return 0, err
	}
	return h.Sum64(), nil
}

func writeAtomic(dir, path string, data []byte) error {
	tmp, err := os.CreateTemp(dir, "tmp-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr == nil && cerr == nil {
		if err := os.Rename(tmp.Name(), path); err == nil {
			return nil
		}
	}
	_ = os.Remove(tmp.Name())
	if werr != nil {
		return werr
	}
	if cerr != nil {
		return cerr
	}
	return fmt.Errorf("cache: rename %s failed", path)
}

//go:build !unix

package wazero

// reservation is a growable Go slice on platforms without mmap; growing may
// move it, which the host tolerates by re-reading the memory view after
// every guest call.
// stableMemory: growing may move the slice.
const stableMemory = false

type reservation struct {
	buf []byte
	max uint64
}

func reserveMemory(max uint64) reservation { return reservation{max: max} }

func (r *reservation) grow(size uint64) []byte {
	if size > r.max {
		return nil
	}
	if size > uint64(cap(r.buf)) {
		nb := make([]byte, size)
		copy(nb, r.buf)
		r.buf = nb
	}
	r.buf = r.buf[:size]
	return r.buf
}

func (r *reservation) release() { r.buf = nil }

// stable reports whether the memory never moves: never, here.
func (r *reservation) stable() bool { return false }

// file: no shared file here.
func (r *reservation) file() (int, uint64) { return -1, 0 }

//go:build unix

package wazero

import "syscall"

// reservation is an anonymous private mapping of the maximum size. Pages are
// committed (and zero-filled) by the kernel on first touch. If the mapping
// cannot be made, it falls back to a growable Go slice, which moves when it
// grows (stable reports which).
type reservation struct {
	buf    []byte
	mapped bool
	// memfd backs a shared reservation (reserveShared): the file grows
	// with the memory (fileSize), and is sealed against shrinking so a
	// process that maps it can trust a size it has seen.
	memfd    int
	hasFile  bool
	fileSize uint64
}

// stableMemory: the engine reserves memory with mmap, mapped once and
// never moved; each reservation says whether its mapping succeeded.
const stableMemory = true

// stable reports whether the memory never moves: it is mapped.
func (r *reservation) stable() bool { return r.mapped }

func reserveMemory(max uint64) reservation {
	if max == 0 {
		return reservation{}
	}
	buf, err := syscall.Mmap(-1, 0, int(max), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return reservation{}
	}
	return reservation{buf: buf, mapped: true}
}

func (r *reservation) grow(size uint64) []byte {
	if !r.mapped {
		if size > uint64(cap(r.buf)) {
			nb := make([]byte, size)
			copy(nb, r.buf)
			r.buf = nb
		}
		r.buf = r.buf[:size]
		return r.buf
	}
	if size > uint64(len(r.buf)) {
		return nil
	}
	if r.hasFile && size > r.fileSize {
		// A shared mapping past the file's end faults: the file grows
		// first (sparse: the pages are committed on first touch).
		if err := growFile(r.memfd, size); err != nil {
			return nil
		}
		r.fileSize = size
	}
	return r.buf[:size:size]
}

// file returns the memfd behind a shared reservation and its size, or -1.
func (r *reservation) file() (int, uint64) {
	if !r.hasFile {
		return -1, 0
	}
	return r.memfd, uint64(len(r.buf))
}

func (r *reservation) release() {
	if r.hasFile {
		releaseShared(r.buf, r.memfd)
	} else if r.mapped {
		_ = syscall.Munmap(r.buf)
	}
	r.buf, r.mapped, r.hasFile = nil, false, false
}

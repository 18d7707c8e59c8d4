package wazero

import (
	"golang.org/x/sys/unix"
)

// reserveShared reserves max bytes backed by a memfd mapped MAP_SHARED,
// sealed against shrinking (F_SEAL_SHRINK), so that the process-isolation
// host can map the same file and see the guest's memory with no copy. It
// falls back to an anonymous reservation when the file cannot be made.
func reserveShared(max uint64) reservation {
	if max == 0 {
		return reservation{}
	}
	fd, err := unix.MemfdCreate("callbox-guest-memory", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return reserveMemory(max)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK); err != nil {
		_ = unix.Close(fd)
		return reserveMemory(max)
	}
	buf, err := unix.Mmap(fd, 0, int(max), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_NORESERVE)
	if err != nil {
		_ = unix.Close(fd)
		return reserveMemory(max)
	}
	return reservation{buf: buf, mapped: true, memfd: fd, hasFile: true}
}

// growFile extends the memfd to size bytes.
func growFile(fd int, size uint64) error { return unix.Ftruncate(fd, int64(size)) }

// releaseShared unmaps a shared reservation (mapped by unix.Mmap, which
// only unix.Munmap can undo) and closes its file.
func releaseShared(buf []byte, fd int) {
	_ = unix.Munmap(buf)
	_ = unix.Close(fd)
}

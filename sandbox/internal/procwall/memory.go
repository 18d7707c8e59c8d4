//go:build linux

package procwall

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/seed4b3e0ccb/callbox/config"
)

// Guest memory shared by two processes: the engines in the worker put
// each instance's linear memory in a memfd (their SharedMemory options),
// which the host maps too. The file is a memfd sealed
// against shrinking (F_SEAL_SHRINK): a size the host has once seen can
// never be taken back, so a worker cannot make the host's reads fault
// (SIGBUS) by truncating the file under it.

// hostMemory is the host's mapping of a guest memory file.
type hostMemory struct {
	fd       int
	buf      []byte // the whole reservation
	fileSize uint64 // the least size the file is known to have
}

// mapMemory maps a memory file the worker sent: it must be sealed against
// shrinking, and the mapping is as large as the worker says it reserved.
func mapMemory(fd int, reserved uint64) (*hostMemory, error) {
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, fmt.Errorf("reading the memory file's seals: %w", err)
	}
	if seals&unix.F_SEAL_SHRINK == 0 {
		return nil, errors.New("the memory file is not sealed against shrinking")
	}
	if reserved == 0 || reserved > config.MaxMemoryLimit {
		return nil, fmt.Errorf("a memory reservation of %d bytes", reserved)
	}
	buf, err := unix.Mmap(fd, 0, int(reserved), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("mapping the memory file: %w", err)
	}
	hm := &hostMemory{fd: fd, buf: buf}
	return hm, nil
}

// view returns the first n bytes, once the file is known to hold them.
func (hm *hostMemory) view(n uint64) ([]byte, error) {
	if n > uint64(len(hm.buf)) {
		return nil, fmt.Errorf("the worker reports %d bytes of guest memory, beyond the %d-byte mapping", n, len(hm.buf))
	}
	if n > hm.fileSize {
		var st unix.Stat_t
		if err := unix.Fstat(hm.fd, &st); err != nil {
			return nil, err
		}
		if uint64(st.Size) < n {
			return nil, fmt.Errorf("the worker reports %d bytes of guest memory, but its file holds %d", n, st.Size)
		}
		hm.fileSize = uint64(st.Size)
	}
	return hm.buf[:n:n], nil
}

func (hm *hostMemory) close() {
	if hm.buf != nil {
		_ = unix.Munmap(hm.buf)
		hm.buf = nil
	}
	closeFD(hm.fd)
	hm.fd = -1
}

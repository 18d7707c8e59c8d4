//go:build unix

package cachefile

import (
	"os"
	"syscall"
)

// fileChecksum is the checksum of a file, computed over a read-only mapping
// (pre-faulted where the OS can: mmapFlags) so a large artifact is neither
// copied through a buffer nor faulted in a page at a time.
func fileChecksum(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if fi.Size() == 0 {
		return checksum(nil), nil
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, mmapFlags)
	if err != nil {
		return streamChecksum(f)
	}
	defer syscall.Munmap(data)
	return checksum(data), nil
}

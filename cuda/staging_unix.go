//go:build unix

package cuda

import "golang.org/x/sys/unix"

// mapStaging maps n bytes of anonymous memory for a staging buffer: page
// aligned, outside the Go heap, so it can be registered and never moves.
func mapStaging(n uint64) ([]byte, error) {
	return unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
}

func unmapStaging(b []byte) error { return unix.Munmap(b) }

package hugepage

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Advise asks for huge pages behind b's 2 MiB-aligned interior when b
// holds at least MinBytes. It reports whether the kernel took the advice;
// a refusal (no THP support, memory that cannot have it) changes nothing.
// b must be memory the Go runtime does not manage (a foreign buffer).
func Advise(b []byte) bool {
	if len(b) < MinBytes {
		return false
	}
	start, n := interior(uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	if n == 0 {
		return false
	}
	_, _, errno := unix.Syscall(unix.SYS_MADVISE, start, n, unix.MADV_HUGEPAGE)
	// Fault the whole buffer in now, in one call (Linux 5.14 and later;
	// refused, harmlessly, before): the pages outside the huge interior
	// come without a trap each.
	base := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	pstart := base &^ (smallPage - 1)
	_, _, _ = unix.Syscall(unix.SYS_MADVISE, pstart, base+uintptr(len(b))-pstart, unix.MADV_POPULATE_WRITE)
	return errno == 0
}

// smallPage is the base page size madvise ranges start on.
const smallPage = 4096

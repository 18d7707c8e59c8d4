// Package hugepage advises the kernel to back large foreign buffers
// (XLA's result buffers) with transparent huge pages before callbox
// writes them.
//
// XLA's CPU client allocates every result buffer fresh, with the C
// allocator, which maps a large one anew for each execution without
// advice: under the common transparent_hugepage=madvise setting, writing
// a 32 MiB result then takes 8,192 page faults, each a trap, a zeroed page
// and a memory-cgroup charge: a third of a jitted 32 MiB call's time on
// the development VM (perf), where host.call's result (NumPy's, which
// advises huge pages for arrays of 4 MiB and more) takes 16 faults of
// 2 MiB. Advising the buffer's 2 MiB-aligned interior does the same for
// XLA's, and populating the whole buffer in one madvise call faults in the
// pages outside that interior without a trap each. The advice changes no byte of the buffer and nothing of its
// lifetime: the allocator still owns and frees it.
package hugepage

// MinBytes is the smallest buffer advised, NumPy's threshold: below it a
// huge page would not fit or not pay for its zeroing.
const MinBytes = 4 << 20

// hugePage is the size of a transparent huge page on the platforms that
// have them (x86-64, arm64 with 4 KiB pages).
const hugePage = 2 << 20

// interior is the 2 MiB-aligned part of [addr, addr+n): its start and
// length, zero when it holds no whole huge page.
func interior(addr, n uintptr) (start, length uintptr) {
	start = (addr + hugePage - 1) &^ (hugePage - 1)
	end := (addr + n) &^ (hugePage - 1)
	if end <= start {
		return 0, 0
	}
	return start, end - start
}

//go:build unix

package bench

import "golang.org/x/sys/unix"

// processCPU is the CPU time the process has used, all threads together
// (user and system), in ns; ok is false where it cannot be read.
func processCPU() (ns int64, ok bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return ts.Nano(), true
}

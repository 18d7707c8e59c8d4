//go:build unix

package core

import "golang.org/x/sys/unix"

// ThreadCPUAvailable reports whether ThreadCPU works on this platform:
// config.Limits.MaxCPU needs it.
const ThreadCPUAvailable = true

// ThreadCPU is the CPU time the calling OS thread has used, in ns. The
// caller must keep its goroutine on the thread (runtime.LockOSThread, or
// a cgo call) between two readings it compares.
func ThreadCPU() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}

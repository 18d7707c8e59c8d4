//go:build callbox_probe && linux

package worker

import (
	"strings"

	"golang.org/x/sys/unix"

	"github.com/seed4b3e0ccb/callbox/internal/sandbox/internal/procwall"
)

// The test build of the worker (-tags callbox_probe) tries a forbidden
// system call when a guest logs "callbox-probe:<call>": the lockdown
// tests load such a guest and assert that the call fails as WorkerDied
// naming SIGSYS. Release builds do not contain this file.
func serveOptions() procwall.ServeOptions {
	return procwall.ServeOptions{Probe: func(text string) {
		call, ok := strings.CutPrefix(text, "callbox-probe:")
		if !ok {
			return
		}
		switch call {
		case "open":
			_, _ = unix.Open("/etc/hostname", unix.O_RDONLY, 0)
		case "socket":
			_, _ = unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		case "execve":
			_ = unix.Exec("/bin/true", []string{"true"}, nil)
		case "fork":
			_, _, _ = unix.RawSyscall(unix.SYS_FORK, 0, 0, 0)
		case "hang":
			// stuck in a host function, where neither epoch nor fuel
			// reaches: only the host's kill at the deadline ends it
			select {}
		case "crash":
			// a panic nothing recovers: the worker's runtime ends it
			// (exit status 2), as an engine bug in Go code would
			go func() { panic("callbox-probe: crash") }()
			select {}
		}
	}}
}

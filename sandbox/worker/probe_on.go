//go:build callbox_probe && linux

package worker

import (
	"strings"

	"golang.org/x/sys/unix"

	"github.com/seed4b3e0ccb/callbox/sandbox/internal/procwall"
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
		// Calls that name another process, or change limits or
		// privileges: each must be refused (an errno) or kill the
		// worker (SIGSYS). The host's own limits and priority are read
		// before and after by the test.
		case "prlimit-parent":
			lim := unix.Rlimit{Cur: 4242, Max: 4242}
			_ = unix.Prlimit(unix.Getppid(), unix.RLIMIT_MSGQUEUE, &lim, nil)
		case "prlimit-raise":
			lim := unix.Rlimit{Cur: 1 << 20, Max: 1 << 20}
			_ = unix.Prlimit(0, unix.RLIMIT_NOFILE, &lim, nil)
		case "prctl-mm":
			_ = unix.Prctl(unix.PR_SET_MM, unix.PR_SET_MM_START_CODE, 0x10000, 0, 0)
		case "prctl-dumpable":
			_ = unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0)
		case "ptrace":
			_, _, _ = unix.RawSyscall(unix.SYS_PTRACE, unix.PTRACE_ATTACH, uintptr(unix.Getppid()), 0)
		case "process_vm_writev":
			_, _, _ = unix.RawSyscall6(unix.SYS_PROCESS_VM_WRITEV, uintptr(unix.Getppid()), 0, 0, 0, 0, 0)
		case "kill-parent":
			_ = unix.Kill(unix.Getppid(), 0)
		case "setpriority-parent":
			_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Getppid(), 19)
		case "mlock":
			if b, err := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS); err == nil {
				_ = unix.Mlock(b)
			}
		case "capset":
			hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
			data := [2]unix.CapUserData{{Effective: ^uint32(0), Permitted: ^uint32(0)}, {Effective: ^uint32(0), Permitted: ^uint32(0)}}
			_ = unix.Capset(&hdr, &data[0])
		case "setuid":
			_, _, _ = unix.RawSyscall(unix.SYS_SETUID, 0, 0, 0)
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

package lockdown

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/landlock-lsm/go-landlock/landlock"
	"golang.org/x/sys/unix"
)

// Apply locks the calling process down, keeping descriptors 0-2 and keep
// open. Seccomp is required: when it cannot be installed Apply fails and
// the worker must not serve. Every other step is reported, applied or not.
//
// settle runs once the file system and network are closed (Landlock) and
// before the seccomp filter: the worker starts its engine there, so what a
// runtime starts once per process and would otherwise start under the
// filter (wasmtime's compiler threads, which read /proc/self/cgroup, an
// open the filter kills) starts where such a read merely fails. Landlock
// goes first also because, before Landlock ABI 8, it reaches every thread
// by signalling each (libpsx): before settle there are only the Go
// runtime's few, where wasmtime's epoch thread took 40-140 ms to answer.
//
// Between Landlock and settle the worker gives up its privileges
// (dropPrivileges: not dumpable, user's ids when the host is root, no
// capability in any set), on every thread, all of them before the engine
// starts a thread of its own.
func Apply(lim Limits, user User, keep int, settle func()) (Report, error) {
	var r Report
	r.Add("landlock", restrictLandlock(), "no file system access, no TCP bind or connect")
	dropPrivileges(&r, user)
	if settle != nil {
		settle()
	}
	r.Add("descriptors", closeInherited(keep), fmt.Sprintf("every inherited descriptor closed but the control socket (%d)", keep))
	r.Add("environment", clearEnv(), "empty")
	r.Add("rlimit_core", unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}), "0: no core files")
	r.Add("rlimit_nofile", setLimit(unix.RLIMIT_NOFILE, lim.Files), fmt.Sprintf("%d descriptors", lim.Files))
	r.Add("rlimit_fsize", setLimit(unix.RLIMIT_FSIZE, lim.FileSize), fmt.Sprintf("%d bytes per file (guest memory files)", lim.FileSize))
	r.Add("rlimit_memlock", setLimit(unix.RLIMIT_MEMLOCK, memlock), fmt.Sprintf("%d bytes of locked memory (mlock)", memlock))
	if lim.AddressSpace > 0 {
		r.Add("rlimit_as", setLimit(unix.RLIMIT_AS, lim.AddressSpace), fmt.Sprintf("%d bytes of address space", lim.AddressSpace))
	} else {
		r.Add("rlimit_as", errors.New("not set: the engine reserves memory without a bound (max_memory unset)"), "")
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		r.Add("no_new_privs", err, "")
		return r, fmt.Errorf("no_new_privs: %w", err)
	}
	r.Add("no_new_privs", nil, "set")
	if err := policy().install(); err != nil {
		r.Add("seccomp", err, "")
		return r, fmt.Errorf("seccomp: %w", err)
	}
	r.Add("seccomp", nil, fmt.Sprintf("allowlist of %d system calls (clone only for threads, tgkill only to its own, prlimit64 only on itself, prctl only %d options; %d scheduling calls and every other prctl fail with EPERM), on every thread; any other kills the process (SIGSYS)",
		len(allowed)+4, len(prctlOptions), len(refused)))
	return r, nil
}

// memlock is the worker's RLIMIT_MEMLOCK: nothing it runs locks memory
// (Go does, for signal stacks, only on Linux 5.2-5.4), and without
// CAP_IPC_LOCK no mlock passes it.
const memlock = 64 << 10

// closeInherited closes every descriptor above 2 but keep.
func closeInherited(keep int) error {
	if keep > 3 {
		if err := unix.CloseRange(3, uint(keep-1), 0); err != nil {
			return err
		}
	}
	return unix.CloseRange(uint(keep+1), ^uint(0), 0)
}

func clearEnv() error {
	os.Clearenv()
	if len(os.Environ()) != 0 {
		return errors.New("environment not empty after clearing")
	}
	return nil
}

func setLimit(res int, v uint64) error {
	return unix.Setrlimit(res, &unix.Rlimit{Cur: v, Max: v})
}

// restrictLandlock denies every file system access and TCP bind and
// connect, where the kernel has Landlock (ABI 4 or later for the network).
func restrictLandlock() error {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, 1 /* LANDLOCK_CREATE_RULESET_VERSION */)
	if errno != 0 {
		return fmt.Errorf("not available: the kernel refused landlock_create_ruleset (%v)", errno)
	}
	if v < 4 {
		return fmt.Errorf("not applied: the kernel's Landlock ABI is %d; 4 is needed for the network", v)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return landlock.V4.Restrict()
}

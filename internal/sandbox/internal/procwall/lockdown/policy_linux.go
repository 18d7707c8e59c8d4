package lockdown

import (
	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// allowed is every system call a worker makes once locked down: the Go
// runtime's (threads, memory, signals, timers, the scheduler), the
// engines' (code pages, guard pages, trap signals) and the worker's own
// (its sockets, memfds for guest memory). It names no call that opens a
// file or a socket, starts a process or changes an identity: a worker that
// tries one is killed (SIGSYS), and the host fails the call as
// WorkerDied naming the signal.
var allowed = []string{
	// descriptors the worker already holds or makes for guest memory
	"read", "write", "readv", "writev", "pread64", "pwrite64", "close", "fcntl", "fstat", "newfstatat", "lseek",
	"recvmsg", "sendmsg", "recvfrom", "sendto", "shutdown", "memfd_create", "ftruncate", "fallocate",
	"epoll_create1", "epoll_ctl", "epoll_pwait", "epoll_wait", "eventfd2", "pipe2", "poll", "ppoll",
	// memory
	"mmap", "munmap", "mprotect", "madvise", "mremap", "brk", "mlock", "munlock", "membarrier",
	// threads and the scheduler
	"futex", "set_robust_list", "get_robust_list", "rseq", "set_tid_address", "gettid", "getpid", "getppid",
	"sched_yield", "sched_getaffinity", "nanosleep", "clock_nanosleep", "clock_gettime", "clock_getres",
	"gettimeofday", "getrusage", "getrlimit", "prlimit64", "restart_syscall", "exit", "exit_group", "getrandom",
	"uname", "prctl", "arch_prctl", "getcpu",
	// signals (Go's preemption, the engines' trap handlers)
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack",
	"timer_create", "timer_settime", "timer_delete", "setitimer",
}

// refused are calls answered EPERM instead of killing the worker: the
// wasmtime glue asks for them on a best-effort basis (a real-time
// priority for its epoch thread, a guest thread pinned to its core during
// its turn) and does without when refused; a worker may not change how
// any thread, its own or another process's, is scheduled.
var refused = []string{"sched_setscheduler", "sched_setparam", "sched_setattr", "sched_setaffinity", "setpriority"}

// policy is the allowlist, with three calls narrowed by their arguments:
// clone only for a thread (CLONE_THREAD set), never a process; tgkill only
// to the worker's own threads (Go's preemption signals them); clone3,
// whose flags seccomp cannot read, fails with ENOSYS, which makes glibc
// fall back to clone. The refused calls fail with EPERM.
func policy() seccomp.Policy {
	self := uint64(unix.Getpid())
	return seccomp.Policy{
		DefaultAction: seccomp.ActionKillProcess,
		Syscalls: []seccomp.SyscallGroup{
			{Action: seccomp.ActionAllow, Names: allowed},
			{Action: seccomp.ActionAllow, NamesWithCondtions: []seccomp.NameWithConditions{{
				Name: "clone", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: unix.CLONE_THREAD}},
			}, {
				Name: "tgkill", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.Equal, Value: self}},
			}}},
			{Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS), Names: []string{"clone3"}},
			{Action: seccomp.ActionErrno | seccomp.Action(unix.EPERM), Names: refused},
		},
	}
}

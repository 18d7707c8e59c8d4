package lockdown

import "golang.org/x/sys/unix"

// The worker's seccomp policy: what a locked-down worker may ask the
// kernel, audited call by call in docs/SECURITY.md ("The worker's system
// calls"). Nothing in it names another process: the calls that take a pid
// are narrowed to the worker itself, or answer only what /proc already
// shows anyone.

// allowed is every system call a worker makes once locked down, with no
// condition on its arguments: the Go runtime's (threads, memory, signals,
// timers, the scheduler), the engines' (code pages, guard pages, trap
// signals) and the worker's own (its sockets, memfds for guest memory).
// It names no call that opens a file or a socket, starts a process or
// changes an identity: a worker that tries one is killed (SIGSYS), and
// the host fails the call as WorkerDied naming the signal.
var allowed = []string{
	// descriptors the worker already holds or makes for guest memory
	"read", "write", "readv", "writev", "pread64", "pwrite64", "close", "fcntl", "fstat", "newfstatat", "lseek",
	"recvmsg", "sendmsg", "recvfrom", "sendto", "shutdown", "memfd_create", "ftruncate", "fallocate",
	"epoll_create1", "epoll_ctl", "epoll_pwait", "epoll_wait", "eventfd2", "pipe2", "poll", "ppoll",
	// memory (mlock within RLIMIT_MEMLOCK, which a process without
	// CAP_IPC_LOCK cannot pass)
	"mmap", "munmap", "mprotect", "madvise", "mremap", "brk", "mlock", "munlock", "membarrier",
	// threads and the scheduler; sched_getaffinity reads a thread's CPU
	// mask (wasmtime's glue asks for its own threads'), which /proc shows
	// any process of every other
	"futex", "set_robust_list", "rseq", "set_tid_address", "gettid", "getpid", "getppid",
	"sched_yield", "sched_getaffinity", "nanosleep", "clock_nanosleep", "clock_gettime", "clock_getres",
	"gettimeofday", "getrusage", "getrlimit", "restart_syscall", "exit", "exit_group", "getrandom",
	"uname", "arch_prctl", "getcpu",
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

// prctlOptions are the prctl options the runtimes use once the worker is
// locked down: Go names its anonymous mappings (PR_SET_VMA), the wasmtime
// glue's ticker sets its timer slack, threads name themselves. Any other
// option (PR_SET_MM, PR_SET_DUMPABLE, PR_CAP_AMBIENT, PR_SET_SECCOMP, ...)
// fails with EPERM.
var prctlOptions = []uint32{unix.PR_SET_VMA, unix.PR_SET_TIMERSLACK, unix.PR_GET_TIMERSLACK, unix.PR_SET_NAME, unix.PR_GET_NAME}

// policy is the allowlist, with calls narrowed by their arguments: clone
// only for a thread (CLONE_THREAD set), never a process; tgkill only to
// the worker's own threads (Go's preemption signals them); prlimit64 only
// on the worker itself (pid 0 or its own), never its host or anyone else;
// prctl only the options above, any other failing with EPERM. clone3,
// whose flags seccomp cannot read, fails with ENOSYS, which makes glibc
// fall back to clone. The refused calls fail with EPERM. Anything else
// kills the process.
func policy() Policy {
	self := uint32(unix.Getpid())
	rules := map[string]Rule{}
	for _, name := range allowed {
		rules[name] = Rule{Then: Allow}
	}
	for _, name := range refused {
		rules[name] = Rule{Then: Errno(unix.EPERM)}
	}
	rules["clone3"] = Rule{Then: Errno(unix.ENOSYS)}
	rules["clone"] = Rule{AnyOf: [][]Cond{{{Arg: 0, BitsSet: unix.CLONE_THREAD}}}, Then: Allow, Else: KillProcess}
	rules["tgkill"] = Rule{AnyOf: [][]Cond{{{Arg: 0, Equal: self}}}, Then: Allow, Else: KillProcess}
	rules["prlimit64"] = Rule{AnyOf: [][]Cond{{{Arg: 0, Equal: 0}}, {{Arg: 0, Equal: self}}}, Then: Allow, Else: KillProcess}
	var prctl [][]Cond
	for _, opt := range prctlOptions {
		prctl = append(prctl, []Cond{{Arg: 0, Equal: opt}})
	}
	rules["prctl"] = Rule{AnyOf: prctl, Then: Allow, Else: Errno(unix.EPERM)}
	return Policy{Rules: rules, Default: KillProcess}
}

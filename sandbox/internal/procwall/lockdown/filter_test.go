//go:build linux

package lockdown

import (
	"encoding/binary"
	"testing"

	"github.com/elastic/go-seccomp-bpf/arch"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// run evaluates the filter for one system call in x/net/bpf's
// interpreter, as the kernel would: seccomp_data holds the number, the
// architecture and the six arguments in native byte order; the
// interpreter loads 32-bit words big-endian, so each word is stored
// big-endian at its native position.
func run(t *testing.T, vm *bpf.VM, archID uint32, nr int, args ...uint64) Action {
	t.Helper()
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], uint32(nr))
	binary.BigEndian.PutUint32(b[4:], archID)
	for i, a := range args {
		binary.BigEndian.PutUint32(b[16+8*i+lowWord:], uint32(a))
		binary.BigEndian.PutUint32(b[16+8*i+4-lowWord:], uint32(a>>32))
	}
	r, err := vm.Run(b)
	require.NoError(t, err)
	return Action(r)
}

// TestFilter holds the compiled worker policy to its rules, in a BPF
// interpreter: every allowed call is allowed whatever its arguments; the
// narrowed ones only with theirs; a failed condition never falls into
// another call's rule (the go-seccomp-bpf defect this compiler avoids:
// clone with flags equal to prlimit64's number, prlimit64 naming the pid
// equal to prctl's number).
func TestFilter(t *testing.T) {
	p := policy()
	insts, err := p.program()
	require.NoError(t, err)
	vm, err := bpf.NewVM(insts)
	require.NoError(t, err)
	info, err := arch.GetInfo("")
	require.NoError(t, err)
	id := uint32(info.ID)
	nr := func(name string) int {
		n, ok := info.SyscallNames[name]
		require.True(t, ok, name)
		return n
	}
	self := uint64(unix.Getpid())
	eperm := Errno(unix.EPERM)

	for _, name := range allowed {
		assert.Equal(t, Allow, run(t, vm, id, nr(name), 7, 8, 9), name)
	}
	for _, name := range refused {
		assert.Equal(t, eperm, run(t, vm, id, nr(name), 1), name)
	}
	for name, want := range map[string]Action{"open": KillProcess, "openat": KillProcess, "socket": KillProcess, "execve": KillProcess,
		"ptrace": KillProcess, "kill": KillProcess, "process_vm_writev": KillProcess, "capset": KillProcess, "setuid": KillProcess,
		"clone3": Errno(unix.ENOSYS)} {
		assert.Equal(t, want, run(t, vm, id, nr(name), 0, 0), name)
	}
	cases := []struct {
		what string
		call string
		args []uint64
		want Action
	}{
		{"a thread", "clone", []uint64{unix.CLONE_VM | unix.CLONE_THREAD | unix.CLONE_SIGHAND}, Allow},
		{"a process", "clone", []uint64{uint64(unix.SIGCHLD)}, KillProcess},
		{"a process whose flags are prlimit64's number", "clone", []uint64{uint64(nr("prlimit64"))}, KillProcess},
		{"a process whose flags are prctl's number", "clone", []uint64{uint64(nr("prctl"))}, KillProcess},
		{"a process whose flags are this pid", "clone", []uint64{self}, KillProcess},
		{"own thread", "tgkill", []uint64{self, 1, 23}, Allow},
		{"another process's", "tgkill", []uint64{self + 1, 1, 23}, KillProcess},
		{"itself, pid 0", "prlimit64", []uint64{0, unix.RLIMIT_NOFILE}, Allow},
		{"itself, by pid", "prlimit64", []uint64{self, unix.RLIMIT_NOFILE}, Allow},
		{"its host", "prlimit64", []uint64{1, unix.RLIMIT_NOFILE}, KillProcess},
		{"a pid equal to prctl's number", "prlimit64", []uint64{uint64(nr("prctl"))}, KillProcess},
		{"a pid equal to mmap's number", "prlimit64", []uint64{uint64(nr("mmap"))}, KillProcess},
		{"upper bits set, low word 0: the kernel reads pid 0", "prlimit64", []uint64{1 << 32}, Allow},
		{"PR_SET_VMA", "prctl", []uint64{unix.PR_SET_VMA, 0}, Allow},
		{"PR_SET_TIMERSLACK", "prctl", []uint64{unix.PR_SET_TIMERSLACK, 1000}, Allow},
		{"PR_SET_NAME", "prctl", []uint64{unix.PR_SET_NAME}, Allow},
		{"PR_SET_MM", "prctl", []uint64{unix.PR_SET_MM, unix.PR_SET_MM_START_CODE}, eperm},
		{"PR_SET_DUMPABLE", "prctl", []uint64{unix.PR_SET_DUMPABLE, 1}, eperm},
		{"PR_CAP_AMBIENT", "prctl", []uint64{unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE}, eperm},
		{"an option equal to clone's number", "prctl", []uint64{uint64(nr("clone"))}, eperm},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, run(t, vm, id, nr(c.call), c.args...), "%s: %s", c.call, c.what)
	}
	// Another architecture, or x32 on x86-64, is killed.
	assert.Equal(t, KillProcess, run(t, vm, id+1, nr("read")), "another architecture")
	if info.SeccompMask != 0 {
		assert.Equal(t, KillProcess, run(t, vm, id, nr("read")|info.SeccompMask), "x32")
	}
}

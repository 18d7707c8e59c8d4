package lockdown

import (
	"fmt"
	"sort"
	"unsafe"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The seccomp filter, compiled here from a Policy. go-seccomp-bpf (whose
// syscall tables this uses) compiles argument conditions into a program
// that, when a condition fails, goes on comparing the syscall number
// against a register that now holds the argument: a failed condition can
// land in another rule, even another syscall's allow (clone with flags
// equal to prlimit64's number, say). So this compiler gives every syscall
// one rule, reached only by its number, and every rule ends in a return:
// nothing runs after an argument load but that rule's own comparisons.
// The whole program is tested in a BPF interpreter (filter_test.go).

// Action is what the filter does with a system call.
type Action uint32

// Filter actions (SECCOMP_RET_*).
const (
	Allow       Action = unix.SECCOMP_RET_ALLOW
	KillProcess Action = unix.SECCOMP_RET_KILL_PROCESS
)

// Errno fails the call with errno.
func Errno(errno unix.Errno) Action {
	return Action(unix.SECCOMP_RET_ERRNO | uint32(errno)&unix.SECCOMP_RET_DATA)
}

// Cond is one argument condition. Arguments are compared on their low 32
// bits: every argument a Policy names here is an int (pid, option) or has
// its flag in the low word (clone), and the kernel reads an int argument
// from those bits alone, whatever the upper half holds.
type Cond struct {
	Arg   int    // 0-5
	Equal uint32 // the low word must equal this
	// BitsSet, when not zero, replaces Equal: the low word must have
	// every one of these bits set.
	BitsSet uint32
}

// Rule is what the filter does with one system call: Allow when any of
// AnyOf matches (each a conjunction of conditions; none: always), and
// Else otherwise.
type Rule struct {
	AnyOf [][]Cond
	Then  Action
	Else  Action
}

// Policy maps system call names to rules; every other call gets Default.
type Policy struct {
	Rules   map[string]Rule
	Default Action
}

// program compiles the policy for the running architecture.
func (p Policy) program() ([]bpf.Instruction, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(p.Rules))
	for name := range p.Rules {
		names = append(names, name)
	}
	sort.Strings(names)
	const (
		offNr   = 0
		offArch = 4
	)
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(KillProcess)}, // another architecture's calls
		bpf.LoadAbsolute{Off: offNr, Size: 4},
	}
	if info.SeccompMask != 0 {
		// x32 calls on x86-64 (the number has the x32 bit set).
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: uint32(info.SeccompMask), SkipFalse: 1},
			bpf.RetConstant{Val: uint32(KillProcess)})
	}
	// The dispatch: for each call, its number, then a jump to its rule.
	type pending struct {
		at   int // the Jump instruction to patch
		rule Rule
	}
	var rules []pending
	for _, name := range names {
		nr, ok := info.SyscallNames[name]
		if !ok {
			return nil, fmt.Errorf("seccomp: no system call %q on %s", name, info.Name)
		}
		r := p.Rules[name]
		if len(r.AnyOf) == 0 {
			prog = append(prog,
				bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(nr), SkipFalse: 1},
				bpf.RetConstant{Val: uint32(r.Then)})
			continue
		}
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(nr), SkipFalse: 1})
		rules = append(rules, pending{at: len(prog), rule: r})
		prog = append(prog, bpf.Jump{})
	}
	prog = append(prog, bpf.RetConstant{Val: uint32(p.Default)})
	// Each conditional rule: every conjunction in turn, a return at the
	// end of each path.
	for _, pr := range rules {
		prog[pr.at] = bpf.Jump{Skip: uint32(len(prog) - pr.at - 1)}
		for _, all := range pr.rule.AnyOf {
			prog = append(prog, conjunction(all, pr.rule.Then)...)
		}
		prog = append(prog, bpf.RetConstant{Val: uint32(pr.rule.Else)})
	}
	return prog, nil
}

// conjunction is the code of one conjunction of conditions: each
// condition's load and test, a failed test skipping past the rest
// (landing on the next conjunction, or the rule's Else), and then's
// return when every test passed.
func conjunction(all []Cond, then Action) []bpf.Instruction {
	var body []bpf.Instruction
	var tests []int // the index of each condition's test in body
	for _, c := range all {
		body = append(body, bpf.LoadAbsolute{Off: uint32(16 + 8*c.Arg + lowWord), Size: 4})
		if c.BitsSet != 0 {
			body = append(body, bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: c.BitsSet})
			tests = append(tests, len(body))
			body = append(body, bpf.JumpIf{Cond: bpf.JumpEqual, Val: c.BitsSet})
			continue
		}
		tests = append(tests, len(body))
		body = append(body, bpf.JumpIf{Cond: bpf.JumpEqual, Val: c.Equal})
	}
	body = append(body, bpf.RetConstant{Val: uint32(then)})
	for _, at := range tests {
		j := body[at].(bpf.JumpIf)
		j.SkipFalse = uint8(len(body) - at - 1)
		body[at] = j
	}
	return body
}

// lowWord is the offset of an argument's low 32 bits in its 64-bit slot.
var lowWord = func() int {
	x := uint16(1)
	if *(*byte)(unsafe.Pointer(&x)) == 1 {
		return 0 // little-endian
	}
	return 4
}()

// install loads the policy as the calling process's seccomp filter, on
// every thread (TSYNC). no_new_privs must be set.
func (p Policy) install() error {
	insts, err := p.program()
	if err != nil {
		return err
	}
	raw, err := bpf.Assemble(insts)
	if err != nil {
		return fmt.Errorf("seccomp: assembling the filter: %w", err)
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	switch {
	case errno != 0:
		return fmt.Errorf("seccomp: %w", errno)
	case r != 0:
		return fmt.Errorf("seccomp: thread %d could not take the filter", r)
	}
	return nil
}

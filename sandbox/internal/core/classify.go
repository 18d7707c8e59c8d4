package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/sandbox"
)

// This file is the one place where failures are named: the order in which
// a failed guest entry is classified, and the message of every kind the
// engines produce, so a kind reads the same whichever engine ran the guest
// (the first words are identical; engine detail, where kept, follows).

// TimeoutMessage is the message of a call stopped at its timeout.
func TimeoutMessage(timeout time.Duration) string {
	if timeout <= 0 {
		return "timeout"
	}
	return fmt.Sprintf("timeout after %v", timeout)
}

// TimeoutTrap is the trap of a call stopped at its timeout; where, when
// not empty, says what the guest was doing ("in poll_oneoff").
func TimeoutTrap(timeout time.Duration, where string) *sandbox.Trap {
	msg := TimeoutMessage(timeout)
	if where != "" {
		msg += " (" + where + ")"
	}
	return &sandbox.Trap{Class: abi.Timeout, Message: msg}
}

// CPULimitTrap is the trap of a call stopped when it had used its CPU
// time (config.Limits.MaxCPU): a Timeout, worded so that it names the
// limit, which a wall-clock timeout's message does not.
func CPULimitTrap(limit time.Duration) *sandbox.Trap {
	return &sandbox.Trap{Class: abi.Timeout, Message: fmt.Sprintf("cpu time limit %v used up (max_cpu)", limit)}
}

// InterruptTrap is the trap of a guest the engine interrupted. When the
// caller's context is done it decides: a context that reached its deadline
// (context.DeadlineExceeded) is a Timeout, one that was canceled is
// Canceled; both wrap the context's error. Otherwise the callback's own
// deadline passed: Timeout, naming the timeout.
func InterruptTrap(caller context.Context, timeout time.Duration) *sandbox.Trap {
	if err := caller.Err(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return &sandbox.Trap{Class: abi.Timeout, Message: "timeout: the caller's deadline passed", Cause: err}
		}
		return &sandbox.Trap{Class: abi.Canceled, Message: "canceled by the caller", Cause: err}
	}
	return TimeoutTrap(timeout, "")
}

// FuelTrap is the trap of a call that used up its fuel.
func FuelTrap(budget uint64) *sandbox.Trap {
	return &sandbox.Trap{Class: abi.FuelExhausted, Message: fmt.Sprintf("fuel exhausted (budget %d)", budget)}
}

// StackOverflowTrap is the trap of a call past its stack limit (maxStack
// bytes; 0 when the engine's default applies).
func StackOverflowTrap(maxStack uint64) *sandbox.Trap {
	if maxStack == 0 {
		return &sandbox.Trap{Class: abi.StackOverflow, Message: "stack overflow"}
	}
	return &sandbox.Trap{Class: abi.StackOverflow, Message: fmt.Sprintf("stack overflow (max_stack %s)", config.FormatSize(maxStack))}
}

// ThreadStackTrap is the failure of a call that did not start because its
// thread had room bytes of native stack (said in whole KiB) and the guest needs need (its
// max_stack, maxStack, plus the engine's own), on a system where the
// engine cannot give it a stack of its own: a stack overflow, prevented
// before the guest ran instead of faulting the process.
func ThreadStackTrap(room, need, maxStack uint64) *sandbox.Trap {
	limit := "the default max_stack"
	if maxStack > 0 {
		limit = "max_stack " + config.FormatSize(maxStack)
	}
	return &sandbox.Trap{Class: abi.StackOverflow, Message: fmt.Sprintf(
		"stack overflow: the calling thread has %s of native stack left and the guest needs %s (%s plus the engine's own); "+
			"call from a thread with a bigger stack, or lower max_stack", config.FormatSize(room&^1023), config.FormatSize(need), limit)}
}

// EngineTrap is an engine's own trap, already mapped onto a kind, worded
// the same on every engine: fuel, stack and timeout traps as FuelTrap,
// StackOverflowTrap and TimeoutTrap say (from the callback's limits), any
// other kind by its name. The engine's text (detail) is kept in Cause, and
// as the message of OtherTrap, which has no other name.
func EngineTrap(k abi.Kind, detail string, frames []sandbox.Frame, cause error, lim *config.Limits) *sandbox.Trap {
	var t *sandbox.Trap
	switch k {
	case abi.FuelExhausted:
		t = FuelTrap(lim.Fuel)
	case abi.StackOverflow:
		t = StackOverflowTrap(lim.MaxStack)
	case abi.Timeout:
		t = TimeoutTrap(lim.Timeout, "")
	case abi.OtherTrap:
		t = &sandbox.Trap{Class: k, Message: "trap"}
		if detail != "" {
			t.Message = "trap: " + detail
		}
	default:
		t = &sandbox.Trap{Class: k, Message: k.String()}
	}
	if cause == nil && detail != "" {
		cause = errors.New(detail)
	}
	t.Frames, t.Cause = frames, cause
	return t
}

// Classify is the one order in which both engines classify the end of a
// guest entry (instantiation or a call): an abort the host recorded (an
// import's ABI violation, proc_exit, a host panic, and on wazero the
// meter's fuel, stack and deadline stops) comes first; then the engine's
// interrupt (interrupted: the deadline or the caller's context, see
// InterruptTrap); then the engine's own trap (nil: none). Any of them,
// after the guest hit its memory limit, becomes MemoryLimit
// (MemoryLimitTrap). memBytes is the linear memory's size after the entry.
// It returns nil when the entry succeeded.
func (g *GuestState) Classify(ctx context.Context, interrupted bool, trap *sandbox.Trap, memBytes uint64) *sandbox.Trap {
	var t *sandbox.Trap
	switch {
	case g.Abort != nil:
		t = g.Abort
		if trap != nil && len(t.Frames) == 0 {
			t.Frames = trap.Frames // where the guest was when the host stopped it
		}
	case interrupted:
		t = InterruptTrap(ctx, g.limits.Timeout)
		if trap != nil {
			t.Frames = trap.Frames
			if t.Cause == nil {
				t.Cause = sandbox.Kindless(trap) // the engine's abort: its text, not its kind
			}
		}
	case trap != nil:
		t = trap
	default:
		return nil
	}
	return MemoryLimitTrap(t, g, memBytes)
}

// MemoryLimitHit reports whether a failure of the instance counts as its
// memory limit: a memory.grow was refused by the limit
// (GuestState.MemoryDenied, precise), or the memory is within one page of
// the limit (the fallback where the engine cannot report refusals). Every
// memory-limit decision (a trap, a RESOURCE_EXHAUSTED status, an allocator
// returning 0) is this one.
func (g *GuestState) MemoryLimitHit(memBytes uint64) bool {
	return g.Report().MemoryLimitHit(g.limits.MaxMemory, memBytes)
}

// MemoryLimitTrap reclassifies a failed entry as MemoryLimit when the guest
// failed after its memory hit the limit (MemoryLimitHit). Interrupts, fuel,
// ABI violations and host panics keep their kind. The original trap is
// kept in the message and as the cause.
func MemoryLimitTrap(t *sandbox.Trap, g *GuestState, memBytes uint64) *sandbox.Trap {
	if t == nil {
		return t
	}
	switch t.Class {
	case abi.Timeout, abi.Canceled, abi.FuelExhausted, abi.ABIViolation, abi.HostPanic, abi.MemoryLimit:
		return t
	}
	if !g.MemoryLimitHit(memBytes) {
		return t
	}
	return &sandbox.Trap{
		Class:   abi.MemoryLimit,
		Message: sandbox.MemoryLimitMessage(g.limits.MaxMemory, "guest then failed: "+t.Error()),
		Frames:  t.Frames,
		Cause:   sandbox.Kindless(t), // what the guest did then: its text, not its kind
	}
}

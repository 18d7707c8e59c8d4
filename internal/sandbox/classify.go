package sandbox

import (
	"github.com/seed4b3e0ccb/callbox/abi"

	"context"
	"errors"
	"fmt"
	"time"
)

// contextTrap converts a done context's error into a Timeout or Canceled
// trap.
func contextTrap(err error) *Trap {
	if errors.Is(err, context.DeadlineExceeded) {
		return &Trap{Class: Timeout, Message: "deadline exceeded", Cause: err}
	}
	return &Trap{Class: Canceled, Message: "call canceled", Cause: err}
}

// InterruptTrap is the trap for a call the engine interrupted: Canceled
// (wrapping the context's error) when the caller's context is done, else
// Timeout naming the callback's limit.
func InterruptTrap(caller context.Context, timeout time.Duration) *Trap {
	if err := caller.Err(); err != nil {
		msg := "canceled by the caller"
		if errors.Is(err, context.DeadlineExceeded) {
			msg = "caller's deadline exceeded"
		}
		return &Trap{Class: Canceled, Message: msg, Cause: err}
	}
	return &Trap{Class: Timeout, Message: fmt.Sprintf("timeout after %v", timeout)}
}

// MemoryLimitTrap reclassifies a failed call as MemoryLimit when the guest
// failed after its memory hit the limit: a memory.grow was refused
// (GuestState.MemoryDenied, precise) or the memory is within one page of
// the limit (the fallback where the engine cannot report refusals). The
// original trap is kept in the message.
func MemoryLimitTrap(t *Trap, g *GuestState, memBytes uint64) *Trap {
	if t == nil || g.limits.MaxMemory == 0 {
		return t
	}
	switch t.Class {
	case Timeout, Canceled, FuelExhausted, ABIViolation, HostPanic, MemoryLimit:
		return t
	}
	if !g.MemoryDenied && memBytes+abi.PageSize <= g.limits.MaxMemory {
		return t
	}
	return &Trap{
		Class:   MemoryLimit,
		Message: fmt.Sprintf("memory limit of %s reached (guest then failed: %s)", FormatBytes(g.limits.MaxMemory), t.Error()),
		Frames:  t.Frames,
		Cause:   t,
	}
}

// FormatBytes renders a byte count with a binary unit: "64MiB", "1.5KiB".
func FormatBytes(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i, scale := 0, uint64(1)
	for i < len(units)-1 && n >= scale*1024 {
		i++
		scale *= 1024
	}
	if n%scale == 0 {
		return fmt.Sprintf("%d%s", n/scale, units[i])
	}
	return fmt.Sprintf("%.1f%s", float64(n)/float64(scale), units[i])
}

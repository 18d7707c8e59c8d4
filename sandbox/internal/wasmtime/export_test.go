//go:build cgo

package wasmtime

import (
	"testing"

	"github.com/seed4b3e0ccb/callbox/sandbox"
)

// TurnStats is e's core turns now (e a wasmtime engine): for the turn
// tests, which wait on these instead of sleeping.
type TurnStats = turnStats

// Turns reads e's core turns.
func Turns(e sandbox.Engine) TurnStats { return e.(*Engine).ticker.turns() }

// The stack switches a test may choose.
const (
	SwitchAssembly = switchAssembly
	SwitchContext  = switchContext
	SwitchNone     = switchNone
)

// ChooseStackSwitch makes the engine switch stacks with mode, until the
// test ends; false where that choice is not offered.
func ChooseStackSwitch(t testing.TB, mode int) bool {
	was, ok := chooseStackSwitch(mode)
	if ok {
		t.Cleanup(func() { chooseStackSwitch(was) })
	}
	return ok
}

// StackSwitches counts the entries that ran on a switched stack.
func StackSwitches() uint64 { return stackSwitches() }

// StacksFreed counts the threads' own stacks unmapped as their threads
// ended.
func StacksFreed() uint64 { return stacksFreed() }

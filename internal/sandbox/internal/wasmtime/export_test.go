//go:build cgo

package wasmtime

import "github.com/seed4b3e0ccb/callbox/internal/sandbox/internal/engine"

// TurnStats is e's core turns now (e a wasmtime engine): for the turn
// tests, which wait on these instead of sleeping.
type TurnStats = turnStats

// Turns reads e's core turns.
func Turns(e engine.Engine) TurnStats { return e.(*Engine).ticker.turns() }

// UseContextSwitch makes the stack switch use makecontext/swapcontext (on)
// or the x86-64 assembly (off); false where the choice is not offered.
func UseContextSwitch(on bool) bool { return useContextSwitch(on) }

// StackSwitches counts the entries that ran on a switched stack.
func StackSwitches() uint64 { return stackSwitches() }

// StacksFreed counts the threads' own stacks unmapped as their threads
// ended.
func StacksFreed() uint64 { return stacksFreed() }

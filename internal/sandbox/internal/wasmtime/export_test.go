//go:build cgo

package wasmtime

import "github.com/seed4b3e0ccb/callbox/internal/sandbox/internal/engine"

// TurnStats is e's core turns now (e a wasmtime engine): for the turn
// tests, which wait on these instead of sleeping.
type TurnStats = turnStats

// Turns reads e's core turns.
func Turns(e engine.Engine) TurnStats { return e.(*Engine).ticker.turns() }

// Package wasmtime is callbox's cgo engine: wasmtime-go v39.
//
// Timeouts use epoch interruption: a C thread advances the engine epoch
// every millisecond while guests run, and a per-store deadline callback,
// also C, stops a guest whose call deadline passed, or whose context ended
// (watched from Go once a call outlives its first tick) — so a timeout
// never waits for the Go scheduler. Fuel and the
// stack limit are native wasmtime settings (engine-wide in wasmtime, so
// callbacks that differ in them get separate engines). Calls go through
// wasmtime's unchecked call API via a small cgo shim (the glue: guard.c, call.c), which skips
// wasmtime-go's per-call type reflection. Trap kinds are classified from
// wasmtime's raw C trap codes, never from wasmtime-go's Go constants, which
// are off by one from OutOfFuel on.
//
// Without cgo the package still builds; New then reports that the engine is
// unavailable, and callbox runs on wazero alone.
package wasmtime

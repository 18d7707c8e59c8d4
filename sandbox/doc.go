// Package sandbox is the contract between callbox's host and the
// WebAssembly engines that run callbacks: the interfaces an engine
// implements (Engine, Module, Instance), the values that cross between
// them (ModuleConfig, FuncType, Trap, CallReport), the guest's imports
// every engine provides (Imports), and the load check every module passes
// before an engine sees it (CheckModule, after Engine.Validate has
// checked it as its author built it; Compile runs both in order). Programs
// call callbacks through package host; package sandbox/engines starts the
// built-in engines (wazero, pure Go, the default; wasmtime, cgo; either in
// a locked-down worker process), and package sandbox/worker is that
// process's entry point.
//
// What each side owes:
//
//   - An engine enforces the limits of ModuleConfig.Limits it Supports
//     (Timeout always; Fuel and MaxStack as Feature says; MaxMemory, the
//     error and log caps), gives the guest exactly Imports, and reports
//     every failed guest run as a *Trap whose kind (abi.Kind) says why:
//     the same kind for the same failure on every engine.
//   - An Instance should also implement Liveness if it can die without a
//     call failing (a worker process), StableMemory if whether its memory
//     moves is decided per instance, and SharedMemory if its memory can
//     live in a file another process maps. The host checks each with a
//     type assertion and assumes the default when it is absent (Alive,
//     MemoryStable).
//   - The host gives an Instance one call at a time, closes instances
//     before their Module, and reads LastCall after each Call.
//
// # Notes
//
//   - These interfaces decouple the host from the engines; they are not
//     for third-party engines yet. Every implementation is in this module
//     (sandbox/internal/wazero, sandbox/internal/wasmtime,
//     sandbox/internal/procwall), and methods may be added in any
//     release: a third engine implements Engine, Module and Instance as
//     those do, reporting failures through the classified traps of
//     sandbox/internal/core.
package sandbox

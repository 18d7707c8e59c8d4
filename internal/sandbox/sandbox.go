// Package sandbox is callbox's engine layer: one interface over two
// WebAssembly engines (wazero, pure Go, the default; wasmtime-go, cgo),
// the per-callback limits each enforces, the host side of the guest's
// imports, the load check every module passes before it is compiled, and
// Inspect.
//
// The whole layer is internal to the module: programs call callbacks
// through package host, whose API names none of its types. This package
// is the layer's face inside the module: choosing an engine (New,
// Available, WasmtimeAvailable, the Feature each engine supports), the
// contract host drives the engines through (Engine, Module, Instance,
// Compile, Trap, CheckModule, ...), Inspect for the CLI, and the raw
// engine calls the benchmark module times. The contract types are
// aliases of the core's because Go's internal rule lets only
// internal/sandbox/... import what lives below it. The adapters
// (internal/wazero, internal/wasmtime), the engine-neutral core they share
// (internal/engine), the module parser (internal/wasmbin), the metering
// rewrite (internal/meter), the compile cache (internal/cachefile) and
// process isolation (internal/procwall: NewProcess's engine, whose worker
// program is package worker) sit below it.
package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/internal/sandbox/internal/engine"
	"github.com/seed4b3e0ccb/callbox/internal/sandbox/internal/wasmtime"
	"github.com/seed4b3e0ccb/callbox/internal/sandbox/internal/wazero"
)

// Choosing an engine.

// Options configure an engine made by New.
type Options struct {
	// CacheDir, when set, keeps compiled modules on disk under
	// CacheDir/<engine name>, checksummed and keyed by module sha256,
	// engine version and code-affecting settings.
	CacheDir string
}

// A guest's log line is a record with this message, the source attribute
// "guest" and the guest's text under GuestTextKey (host.GuestLogText reads
// it); the guest never sets a record's message.
const (
	GuestLogMessage = engine.GuestLogMessage
	GuestSourceKey  = engine.GuestSourceKey
	GuestSource     = engine.GuestSource
	GuestTextKey    = engine.GuestTextKey
)

// WasmtimeAvailable reports whether this build includes the wasmtime
// engine (it needs cgo).
const WasmtimeAvailable = wasmtime.Available

// Engines lists the engine names this build can run, the default first.
func Engines() []string {
	if WasmtimeAvailable {
		return []string{config.EngineWazero, config.EngineWasmtime}
	}
	return []string{config.EngineWazero}
}

// Available reports whether this build can run the named engine.
func Available(name string) bool {
	return name == config.EngineWazero || name == config.EngineWasmtime && WasmtimeAvailable
}

// Version is the named engine library's version ("" for an unknown name).
func Version(name string) string {
	switch name {
	case config.EngineWazero:
		return wazero.Version
	case config.EngineWasmtime:
		return wasmtime.Version
	}
	return ""
}

// CallerStack is the native stack, in bytes, that a thread calling a
// guest of the named engine under limits must have: 0 where any thread
// will do (wazero runs guests on goroutine stacks; wasmtime, on Linux, on
// x86-64 or with glibc, switches to a stack of its own when the caller's is
// short),
// else about the guest's wasm stack limit plus 1 MiB (wasmtime
// elsewhere). A foreign caller with small threads (an Erlang scheduler)
// reads it to choose where to call from.
func CallerStack(name string, limits config.Limits) uint64 {
	if name == config.EngineWasmtime {
		return wasmtime.CallerStack(limits.MaxStack)
	}
	return 0
}

// New starts the named engine (config.EngineWazero or
// config.EngineWasmtime).
func New(ctx context.Context, name string, o Options) (Engine, error) {
	switch name {
	case config.EngineWazero:
		e, err := wazero.New(ctx, wazero.Options{CacheDir: o.CacheDir})
		if err != nil {
			return nil, err
		}
		return e, nil
	case config.EngineWasmtime:
		e, err := wasmtime.New(ctx, wasmtime.Options{CacheDir: o.CacheDir})
		if err != nil {
			return nil, err
		}
		return e, nil
	}
	return nil, fmt.Errorf("unknown engine %q (want wazero or wasmtime)", name)
}

// Feature is a limit an engine may or may not enforce (Engine.Supports).
type Feature = engine.Feature

// Engine features.
const (
	FeatureFuel         = engine.FeatureFuel         // config.Limits.Fuel
	FeatureMaxStack     = engine.FeatureMaxStack     // config.Limits.MaxStack
	FeatureStableMemory = engine.FeatureStableMemory // an instance's memory never moves
)

// The contract host drives the engines through.
type (
	// Engine compiles modules; safe for concurrent use.
	Engine = engine.Engine
	// Module is a compiled module.
	Module = engine.Module
	// Instance is one instantiated module, one call at a time.
	Instance = engine.Instance
	// Function is an export resolved once and called many times.
	Function = engine.Function
	// ModuleConfig describes how to compile and run one module.
	ModuleConfig = engine.ModuleConfig
	// ValType is a wasm value type.
	ValType = engine.ValType
	// FuncType is a function's type.
	FuncType = engine.FuncType
	// Trap is a failed guest run, classified.
	Trap = engine.Trap
	// Frame is one frame of a trap's guest stack.
	Frame = engine.Frame
	// InvalidModuleError is a module an engine's validator refused as
	// its author built it (Engine.Validate).
	InvalidModuleError = engine.InvalidModuleError
)

// Kindless returns err with every kind in its chain turned into plain
// text (engine.Detail): what keeps one failure to one kind.
func Kindless(err error) error { return engine.Kindless(err) }

// ErrNotStarted is the cause of a WorkerDied failure whose call never
// reached its worker: nothing ran, so the host may run it again.
var ErrNotStarted = engine.ErrNotStarted

// Value types the ABI uses.
const (
	I32 = engine.I32
	F32 = engine.F32
)

// Compile is the one way to compile a module on any path: it applies the
// host's table limit, then asks e to compile.
func Compile(ctx context.Context, e Engine, wasm []byte, cfg ModuleConfig) (Module, error) {
	return engine.Compile(ctx, e, wasm, cfg)
}

// Deadline is the deadline of a guest entry starting at now under
// timeout: now + timeout, or zero (none) when timeout is not positive.
func Deadline(now time.Time, timeout time.Duration) time.Time { return engine.Deadline(now, timeout) }

// MemoryStable reports whether inst's linear memory never moves.
func MemoryStable(e Engine, inst Instance) bool { return engine.MemoryStable(e, inst) }

// MemoryLimitMessage is the one message of a MemoryLimit failure under
// limit, followed by what happened then.
func MemoryLimitMessage(limit uint64, then string) string {
	return engine.MemoryLimitMessage(limit, then)
}

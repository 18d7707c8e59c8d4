package sandbox

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"time"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/wasmbin"
)

// ModuleConfig describes how to compile and run one callback module.
type ModuleConfig struct {
	// Name identifies the module in diagnostics (the callback name).
	Name string
	// Limits are the callback's limits, as config defines them (the one
	// Limits type): the engines read Timeout, MaxMemory, Fuel, MaxStack,
	// MaxError and MaxLog. MaxOutput is the host's.
	Limits config.Limits
	// WASI grants the minimal WASI profile (captured stdout/stderr, clocks,
	// random; no files, sockets, args or environment).
	WASI bool
	// Logger receives guest log lines; nil discards them.
	Logger *slog.Logger
	// SHA256 is the module bytes' sha256 when the caller has it (the host
	// does, for the callback id); engines key their caches on it and
	// compute it themselves when it is zero.
	SHA256 [32]byte
	// Instances is the most instances of the module alive at once (the
	// callback's max_instances); a process-isolated engine sizes its
	// worker's resource limits from it. Zero means one.
	Instances int
	// Workers, when set, hears of a process-isolated module's worker
	// starts and deaths (the host's metrics); other engines ignore it.
	Workers WorkerEvents
	// Deterministic canonicalizes every NaN an arithmetic float operation
	// returns (config.Callback.Deterministic): wasmtime's Cranelift
	// option, the meter's rewrite on wazero.
	Deterministic bool
	// Profile, when set, compiles the module with the guest profiler
	// (the meter's entry and exit reports) and every instance adds the
	// work of its calls to it. In-process engines only: a
	// process-isolated engine refuses it.
	Profile *GuestProfile
}

// WorkerEvents hears of a process-isolated module's workers. The calls
// are made with the module's lock held: they must be quick and must not
// call back into the module.
type WorkerEvents interface {
	// WorkerStarted: a worker started (its module compiled in it).
	WorkerStarted()
	// WorkerDied: a worker died; cause is one of a few words (a signal's
	// name as "SIGKILL", "exit_2", "killed_unresponsive", "killed_start",
	// "killed_protocol", "start_failed", "unknown").
	WorkerDied(cause string)
}

// ModuleSum returns cfg.SHA256, or computes it.
func ModuleSum(wasm []byte, cfg ModuleConfig) [32]byte {
	if cfg.SHA256 != ([32]byte{}) {
		return cfg.SHA256
	}
	return sha256.Sum256(wasm)
}

// Features an engine may or may not support.
type Feature int

// Engine features that limits depend on.
const (
	FeatureFuel     Feature = iota // Limits.Fuel
	FeatureMaxStack                // Limits.MaxStack
	// FeatureStableMemory: an instance's linear memory never moves for
	// the instance's life (growth maps more of one reservation), so its
	// base address may be cached and pinned once. An instance that
	// implements StableMemory may still report that its own memory can
	// move (MemoryStable).
	FeatureStableMemory
)

// StableMemory is implemented by instances that decide memory stability
// per instance: on wazero, a reservation that could not be mapped falls
// back to a growable slice, which moves when it grows.
type StableMemory interface {
	// MemoryStable reports whether this instance's linear memory never
	// moves for its life.
	MemoryStable() bool
}

// MemoryStable reports whether inst's linear memory never moves: the
// engine's FeatureStableMemory, narrowed by the instance's own report
// where it gives one.
func MemoryStable(e Engine, inst Instance) bool {
	if !e.Supports(FeatureStableMemory) {
		return false
	}
	if s, ok := inst.(StableMemory); ok {
		return s.MemoryStable()
	}
	return true
}

// Engine compiles modules. Implementations are safe for concurrent use.
type Engine interface {
	// Name is "wazero" or "wasmtime".
	Name() string
	// Version is the engine library's version, part of compiled-module
	// cache keys.
	Version() string
	// Supports reports whether the engine enforces a limit feature.
	Supports(Feature) bool
	// Validate checks a module as its author built it, before anything
	// rewrites it, with the engine validators of this build under
	// callbox's features (one feature set for every engine); sum is its
	// sha256. A refusal is an *InvalidModuleError. Compile (the package
	// function) calls it first on every path.
	Validate(ctx context.Context, wasm []byte, sum [32]byte) error
	// Compile rewrites (meters) and compiles a module. The wasm bytes
	// have passed Validate as the module's author built them, then
	// CheckModule (the host's import, export, memory and table rules),
	// and carry the table limit (LimitTables): the rewrites only ever see
	// valid input. Call it through Compile, the package function.
	Compile(ctx context.Context, wasm []byte, cfg ModuleConfig) (Module, error)
	// Close releases the engine and everything compiled by it.
	Close(ctx context.Context) error
}

// Module is a compiled module. Safe for concurrent use.
//
// # Errors
//
// Instantiate returns a *Trap when the start function fails (its kind:
// a Timeout at the deadline, a MemoryLimit, a StackOverflow, ...) and a
// *Trap of kind WorkerDied when a process-isolated module's worker is
// gone (ErrNotStarted in its chain when nothing ran, so the host may try
// again); any other error is the engine's own.
//
// # Notes
//
//   - Close every Instance of a module before the Module: after Close an
//     instance may be dead (a process-isolated one is: its worker ends),
//     and Alive says so.
type Module interface {
	// Instantiate creates an instance, running the start function against
	// deadline (zero: none). The deadline stays set for the instance's
	// later Calls until SetDeadline changes it, so every guest entry of
	// one host call (start, _initialize, callbox_alloc, the callback)
	// shares the one deadline the host computed for that call. It does not
	// call _initialize.
	Instantiate(ctx context.Context, deadline time.Time) (Instance, error)
	// Close releases the compiled module (and a process-isolated one's
	// worker). The host closes a module's instances first.
	Close(ctx context.Context) error
}

// Function is an export an Instance resolved (Instance.Export), opaque to
// the host, resolved once and called many times. It may be passed only to
// Call of the instance that resolved it.
type Function any

// Instance is one instantiated module. It is not safe for concurrent use:
// one call at a time (the host's pool guarantees it).
//
// # Errors
//
// Call returns a *Trap on any failed guest run, its kind saying why;
// after one, the instance must not be used again. Export returns a plain
// error (MissingExport, CheckExport's) when the export is missing or has
// another type.
//
// # Notes
//
//   - Memory is a view, not a copy: any call into the guest may grow and
//     move it.
//   - A view stays readable until Close, also after a failed Call: a
//     process-isolated instance whose worker died keeps its mapping of
//     the memory, as the worker left it, so the host can still read a
//     frame it staged (to run the call again on a new instance).
//   - LastCall and FuelConsumed describe the last Call (or
//     Instantiate): read them before the next.
type Instance interface {
	// Export resolves an exported function; it fails when the export is
	// missing or has a different type than params -> results.
	Export(name string, params, results []ValType) (Function, error)
	// SetDeadline sets the deadline every later Call runs against (zero:
	// none) until it is set again. It costs no clock read and no
	// allocation: the host sets it once per host call.
	SetDeadline(deadline time.Time)
	// Call runs fn under the module's limits and the deadline last set.
	// stack holds the parameters on
	// entry and the results on return (as wazero's CallWithStack). On
	// failure it returns a *Trap and the instance must not be used again.
	Call(ctx context.Context, fn Function, stack []uint64) error
	// Memory is a view of the whole linear memory. It is invalidated by any
	// call into the guest (memory may grow and move).
	Memory() []byte
	// LastCall is what the guest's imports recorded during the last Call
	// (or Instantiate).
	LastCall() CallReport
	// FuelConsumed is the fuel used by the last Call, and whether the engine
	// measured it.
	FuelConsumed() (uint64, bool)
	// Close releases the instance; its memory view is gone.
	Close(ctx context.Context) error
}

// ValType is a wasm value type of an export or import signature.
type ValType byte

// Value types used by the ABI.
const (
	I32 ValType = 0x7f
	I64 ValType = 0x7e
	F32 ValType = 0x7d
	F64 ValType = 0x7c
)

// Deadline is the deadline of a guest entry starting at now under timeout:
// now + timeout, or zero (none) when timeout is not positive.
func Deadline(now time.Time, timeout time.Duration) time.Time {
	if timeout <= 0 {
		return time.Time{}
	}
	return now.Add(timeout)
}

func (v ValType) String() string { return wasmbin.ValTypeName(byte(v)) }

// SharedMemory is implemented by instances whose linear memory can live in
// a file another process maps (wazero under Options.SharedMemory): the
// process-isolation worker hands that file to the host.
type SharedMemory interface {
	// MemoryFile returns the memfd behind the memory and the bytes the
	// mapping reserves, or -1 when the memory is not such a file.
	MemoryFile() (fd int, reserved uint64)
}

// Liveness is implemented by instances that can die under the host
// without a call failing first: an instance in a worker process dies with
// its worker. The host's pool asks before it reuses an idle instance.
type Liveness interface {
	// Alive reports whether the instance can still serve a call.
	Alive() bool
}

// Alive reports whether inst can still serve: true unless it implements
// Liveness and says otherwise.
func Alive(inst Instance) bool {
	if l, ok := inst.(Liveness); ok {
		return l.Alive()
	}
	return true
}

// CallReport is what the guest's imports recorded during an instance's
// last call: the host reads it after each Call.
type CallReport struct {
	// GuestError is the text the guest last passed to callbox.error ("":
	// none).
	GuestError string
	// MemoryDenied: a memory.grow was refused by Limits.MaxMemory.
	MemoryDenied bool
}

// MemoryLimitHit reports whether a call that ended with memBytes of
// linear memory, under maxMemory (0: none), ran into the limit: a grow
// was refused, or no further page fits. A guest that then fails (its
// allocator returns 0, it traps, it reports RESOURCE_EXHAUSTED) failed
// for want of memory, a MemoryLimit.
func (r CallReport) MemoryLimitHit(maxMemory, memBytes uint64) bool {
	return maxMemory != 0 && (r.MemoryDenied || memBytes+abi.PageSize > maxMemory)
}

// WorkerName is the name a worker runs under (its argv[0]), whichever
// file it was started from: cmd/callbox-worker, or a program serving as
// its own worker (host.WorkerMain), which tells by it that a host
// started it (isolation: process).
const WorkerName = "callbox-worker"

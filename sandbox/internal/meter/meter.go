// Package meter instruments a WebAssembly module at load time so that an
// engine without cheap interruption or a configurable stack (wazero) can
// enforce timeouts, fuel and a stack limit from inside the guest's own
// thread.
//
// The rewrite adds two mutable i64 globals and two imported functions:
//
//   - the budget (exported as BudgetExport) counts down instructions. At
//     every function entry and at the top of every loop body the code
//     subtracts the instruction count of the straight-line segment that
//     starts there and, when the budget turns negative, calls
//     RefillModule.RefillName (i64) -> i64, which reads the clock, the
//     caller's context and the fuel left, and either stops the guest or
//     grants another slice. Every path that can run long passes a check — a
//     loop iterates through its header, recursion through function entries —
//     so the host gets control at least once per slice, on the guest's
//     thread, with no goroutine, signal or scheduler involved. A loop's
//     check leaves the loop for an added outer loop that calls the refill
//     and enters it again (inserter.copyControl), so the loop itself holds
//     no call. A counted inner loop, whose trip count its own exit test
//     gives, is charged a chunk of iterations at a time instead, its own
//     compare ending the chunk, so its body holds no check (chunk.go);
//     the fuel charged and the points where the refill runs are the same.
//
//   - the stack counter (StackExport) starts at minus the stack limit in
//     bytes. Each function adds an estimate of its frame size on entry
//     (8 bytes per parameter and local, plus FrameOverhead) and subtracts it
//     on every exit — the end of the body (branches to the function's label
//     included, through a wrapping block), return, and before a tail call.
//     When it turns positive the code calls RefillModule.OverflowName, which
//     stops the guest with a stack overflow. This bounds the host memory a
//     runaway recursion can make the engine allocate (wazero's own ceiling
//     is 400 MB of stack per instance).
//
//   - with GrowHook, every memory.grow becomes a call to an injected
//     function that grows memory and, when growth is refused, calls
//     RefillModule.GrowDeniedName with the pages asked for, so the host can
//     tell a guest that hit its memory limit from one that failed on its
//     own. Engines whose memory limiter gives no such signal (wasmtime's C
//     API) use this alone.
//
//   - with Profile, every function calls RefillModule.ProfileEnterName
//     (i32 function, i64 budget) before its entry charge, with its index in
//     the module as its author built it, and RefillModule.ProfileExitName
//     (i64 budget) wherever it leaves normally (the end of the body, return,
//     before a tail call). The budget passed is the counter's current value
//     (the cached local's, where the function caches it), so the host knows
//     the fuel used at each entry and exit without reading a global: the
//     guest profiler (sandbox.GuestProfile) attributes the fuel between two
//     events to the call path then on top. Profile needs Meter.
//
// Adding imports shifts the index of every defined function, so every
// reference to a function index is rewritten: call, return_call and ref.func
// in code and constant expressions, element segments, exports, the start
// function, and the name section. Anything the rewriter does not understand
// (an unknown opcode, the GC proposal's type encodings) makes Instrument
// fail; the caller then runs the module with the engine's own interruption.
//
// The input must be a valid module, as its author built it: callers
// validate it first (sandbox/internal/validate; engine.Compile
// does, on every path). The rewrite is not a validator. Given an invalid
// module it can produce a valid one that reaches what the rewrite added —
// global.set of the global one past the module's own writes the budget, a
// br one label past a function's body lands in the wrapper block and skips
// the frame's release, a type, function or local index one past the
// module's own names the meter's — and it re-encodes malformed sizes and
// LEB128s as well-formed ones.
//
// Known approximations: instruction counts charge whole segments in code
// order (an upper bound of what runs between two checks); frame sizes are
// estimates; an exception unwinding through frames skips their decrements,
// which the host undoes by resetting the counter at every call.
package meter

import (
	"errors"
	"fmt"
)

// Version changes whenever the rewrite's output changes; caches of
// rewritten or compiled modules include it in their keys.
const Version = 7

// Names of the injected imports and exports.
const (
	RefillModule = "callbox_meter"
	RefillName   = "refill"
	OverflowName = "overflow"
	// GrowDeniedName is called with the pages a refused memory.grow asked
	// for.
	GrowDeniedName = "grow_denied"
	// ProfileEnterName and ProfileExitName are the guest profiler's
	// imports (Options.Profile).
	ProfileEnterName = "profile_enter"
	ProfileExitName  = "profile_exit"
	BudgetExport     = ExportPrefix + "budget"
	StackExport      = ExportPrefix + "stack"
)

// Fuel rates of operations whose work grows with an operand. The
// instruction itself costs one unit like any other; these are charged on
// top, from the operand's value at run time, before the operation runs
// (after it, and only when it succeeds, for the two grows). They are set so
// that a unit of each buys about as much CPU as a unit of plain compiled
// code (0.1-0.2 ns) and never more than about a nanosecond, on either
// engine (BenchmarkFuelRate in sandbox/internal/core; docs/SECURITY.md gives the
// numbers).
const (
	// BytesPerFuel: memory.fill, memory.copy and memory.init cost one unit
	// per BytesPerFuel bytes (rounded up).
	BytesPerFuel = 8
	// ElementFuel is the cost per element of table.fill, table.copy,
	// table.init and table.grow: wasmtime's table.init of functions
	// costs tens of nanoseconds an element, wazero's table.grow about 14.
	ElementFuel = 64
	// PageFuel is the cost of each page memory.grow adds: the page's bytes
	// at BytesPerFuel (the engine zeroes them, now or on first touch).
	PageFuel = 65536 / BytesPerFuel
)

// ErrTooManyBlocks is returned for a function with more blocks than
// Options.MaxBlocks. It does not wrap ErrUnsupported: the module is
// refused, not run unmetered.
var ErrTooManyBlocks = errors.New("too many blocks in one function")

// ExportPrefix starts the name of every export the rewrite adds. A module
// that already exports a name with it cannot be instrumented (and on wazero
// would run without its fuel and stack limits), so the host reserves the
// prefix: its load check refuses such modules.
const ExportPrefix = "callbox_meter_"

// FrameOverhead is the bytes charged per call on top of 8 per parameter and
// local, approximating an engine's per-frame bookkeeping.
const FrameOverhead = 64

// Options configure the rewrite.
type Options struct {
	// Meter adds the instruction budget and the stack counter.
	Meter bool
	// StackLimit is the initial stack budget in bytes, used until the host
	// sets the counter (the start function runs with it).
	StackLimit int64
	// GrowHook reports refused memory.grow calls.
	GrowHook bool
	// CanonicalNaN replaces the NaN result of every arithmetic float
	// operation by the canonical NaN (nan.go): deterministic mode on
	// wazero.
	CanonicalNaN bool
	// MaxBlocks, when positive, refuses a function with more structured
	// control instructions (block, loop, if, try, try_table) than this:
	// wazero's compile time grows with their square (ErrTooManyBlocks).
	MaxBlocks int
	// Profile adds the guest profiler's entry and exit calls to every
	// function (needs Meter).
	Profile bool

	// inline keeps every loop's check inline (the shape before Version
	// 5), for tests that compare the two shapes.
	inline bool
	// noChunks leaves counted loops in the retry shape (the shape before
	// Version 7), for tests and benchmarks that compare the two.
	noChunks bool
}

// ErrUnsupported wraps every reason a module cannot be instrumented.
var ErrUnsupported = errors.New("module not instrumentable")

func unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsupported, fmt.Sprintf(format, args...))
}

// Instrument returns the metered module.
func Instrument(wasm []byte, opts Options) ([]byte, error) {
	out, _, err := instrument(wasm, opts, false)
	return out, err
}

func instrument(wasm []byte, opts Options, mapped bool) ([]byte, *SourceMap, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" || wasm[4] != 1 {
		return nil, nil, unsupported("not a core module")
	}
	var secs []section
	m := &rewriter{opts: opts}
	if mapped {
		m.smap = &SourceMap{}
	}
	r := &reader{b: wasm, pos: 8}
	for r.more() {
		id := r.byte()
		size := uint64(r.u32())
		if id == secCode && m.smap != nil {
			m.smap.codeStart[1] = uint64(r.pos)
		}
		body := r.bytes(size)
		if r.err != nil {
			return nil, nil, r.err
		}
		secs = append(secs, section{id, body})
	}
	if err := m.scan(secs); err != nil {
		return nil, nil, err
	}
	out, err := m.emit(secs)
	if err != nil {
		return nil, nil, err
	}
	if m.smap != nil {
		m.smap.funcImports, m.smap.added, m.smap.defined = m.numFuncImports, m.addedImports, uint32(len(m.funcTypes))
	}
	return out, m.smap, nil
}

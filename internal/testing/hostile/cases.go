// Package hostile is the data of the hostile-guest suite: every case's
// guest module, the callback it runs as, the phase at which it must fail
// and the failure kind it must produce on each engine. The suite itself
// (host's TestHostile, which also generates docs/SECURITY.md's table) and
// the runs of the same cases inside a foreign process (ffi's
// TestHostileForeign, through the C API and the Python package) share it,
// so the cases are written once.
package hostile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
)

const (
	// Timeout is every hostile callback's timeout, unless the case needs
	// another.
	Timeout = 250 * time.Millisecond
	// MaxMemory is every hostile callback's max_memory, unless the case
	// needs more.
	MaxMemory = 1 << 20
	// Fuel is the fuel budget of the fuel cases.
	Fuel = 100_000
)

// Phase is when a case must fail: at its call, or when its module loads.
type Phase int

const (
	// AtCall cases load and fail when called.
	AtCall Phase = iota
	// AtLoad cases are refused when their module loads.
	AtLoad
)

// String names the phase ("call" or "load").
func (p Phase) String() string {
	if p == AtLoad {
		return "load"
	}
	return "call"
}

// OK is the "kind" of a call (or load) that must succeed.
const OK = abi.KindNone

// Case is one hostile guest.
type Case struct {
	Name   string // also the callback name
	Module string // <dir>/<Module>.wat (host/testdata/hostile); empty with Build
	Build  func() []byte
	Export string // default: Name
	What   string // what the guest does, for the table
	Phase  Phase
	Kind   abi.Kind // expected kind; OK: the call succeeds
	// Differs lists legitimate engine differences: the kind an engine
	// reports instead, and why (rendered as a footnote).
	Differs map[string]abi.Kind
	Why     string
	Msg     string // a substring the error message must contain
	Tweak   func(*config.Callback)
	// Before is how many calls succeed on the same pooled instance before
	// the hostile one; Grow makes the hostile call's input larger, so the
	// host must ask the guest's allocator for a new scratch region.
	Before int
	Grow   bool
	// Want is the output of a call that succeeds (default: a copy of x).
	Want func(x []float32) []float32
}

// Expected is the kind the case must produce on engine.
func (c Case) Expected(engine string) abi.Kind {
	if k, ok := c.Differs[engine]; ok {
		return k
	}
	return c.Kind
}

// Callback is the case's callback on engine: signature
// (x: f32[n]) -> f32[n], one pooled instance, the suite's timeout and
// max_memory, then the case's tweak.
func (c Case) Callback(engine string) config.Callback {
	cb := config.DefaultCallback()
	cb.Name, cb.Export, cb.Engine = c.Name, c.Export, engine
	if cb.Export == "" {
		cb.Export = c.Name
	}
	cb.Signature = "(x: f32[n]) -> f32[n]"
	cb.MaxInstances = 1
	cb.Limits.Timeout = Timeout
	cb.Limits.MaxMemory = MaxMemory
	if strings.HasPrefix(c.Module, "imports") {
		cb.Limits.MaxMemory = 8 << 20
	}
	if c.Tweak != nil {
		c.Tweak(&cb)
	}
	return cb
}

// Wasm returns the case's Module: built, or compiled from
// dir/<Module>.wat (dir is host/testdata/hostile).
func (c Case) Wasm(dir string) ([]byte, error) {
	if c.Build != nil {
		return c.Build(), nil
	}
	src, err := os.ReadFile(filepath.Join(dir, c.Module+".wat"))
	if err != nil {
		return nil, err
	}
	b, err := wat.Compile(string(src))
	if err != nil {
		return nil, fmt.Errorf("%s.wat: %w", c.Module, err)
	}
	return b, nil
}

// Input is the input of the case's hostile call: x = [0 1 2 3], or 4096
// zeros for a Grow case.
func (c Case) Input() []float32 {
	if c.Grow {
		return make([]float32, 4096)
	}
	return []float32{0, 1, 2, 3}
}

// Double is a Want: every element of x doubled.
func Double(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = 2 * v
	}
	return out
}

func withTimeout(d time.Duration) func(*config.Callback) {
	return func(cb *config.Callback) { cb.Limits.Timeout = d }
}

func withMemoryTimeout(mem uint64, d time.Duration) func(*config.Callback) {
	return func(cb *config.Callback) { cb.Limits.MaxMemory, cb.Limits.Timeout = mem, d }
}

func withWASI(cb *config.Callback) { cb.WASI = config.WASIMinimal; cb.Limits.MaxMemory = 8 << 20 }

func withFuel(cb *config.Callback) {
	cb.WASI = config.WASIMinimal
	cb.Limits.MaxMemory = 16 << 20
	cb.Limits.Fuel = Fuel
}

func withSmallFuel(cb *config.Callback) { cb.Limits.Fuel = 1000 }

// Cases is the suite, in the order of docs/SECURITY.md's table.
var Cases = []Case{
	// Runaways: CPU, stack, memory, tables.
	{Name: "spin", Module: "runaway", What: "infinite loop", Kind: abi.Timeout},
	{Name: "recurse", Module: "runaway", What: "infinite recursion", Kind: abi.StackOverflow, Msg: "failed: stack overflow"},
	{Name: "deep_then_spin", Module: "runaway", What: "recursion 5000 deep, then a loop with no calls in it", Kind: abi.Timeout},
	{Name: "grow_pages", Module: "runaway", What: "memory.grow one page at a time until refused, then traps", Kind: abi.MemoryLimit},
	{Name: "grow_huge", Module: "runaway", What: "one memory.grow of 1 GiB; when refused returns RESOURCE_EXHAUSTED", Kind: abi.MemoryLimit},
	{Name: "grow_then_exhausted", Module: "runaway", What: "grows to the limit page by page, then returns RESOURCE_EXHAUSTED", Kind: abi.MemoryLimit},
	{Name: "table_grow", Module: "runaway", What: "table.grow by 2^31 elements (16 GiB of host memory); traps when refused", Kind: abi.Unreachable},
	{Name: "log_flood", Module: "runaway", What: "100,000 64-byte log lines in one call (5 s timeout)", Kind: OK, Tweak: withTimeout(5 * time.Second)},
	{Name: "log_forever", Module: "runaway", What: "calls callbox.log in an endless loop", Kind: abi.Timeout},

	// Fuel that bounds work: bulk operations and imports charged by size.
	{Name: "fill_flood", Module: "fuel", What: "2,000 memory.fill of 8 MiB each (16 GB) under fuel 100,000", Kind: abi.FuelExhausted, Tweak: withFuel},
	{Name: "copy_flood", Module: "fuel", What: "4,000 memory.copy of 4 MiB each under fuel 100,000", Kind: abi.FuelExhausted, Tweak: withFuel},
	{Name: "table_flood", Module: "fuel", What: "table.fill of 100,000 elements, a million times, under fuel 100,000", Kind: abi.FuelExhausted, Tweak: withFuel},
	{Name: "grow_flood", Module: "fuel", What: "memory.grow one page at a time (100 pages, within max_memory) under fuel 100,000", Kind: abi.FuelExhausted, Tweak: withFuel},
	{Name: "error_flood", Module: "fuel", What: "callbox.error of 4 MiB, a million times, under fuel 100,000", Kind: abi.FuelExhausted, Tweak: withFuel},
	{Name: "random_flood", Module: "fuel", What: "WASI random_get of 8 MiB, 2,000 times, under fuel 100,000", Kind: abi.FuelExhausted, Tweak: withFuel},
	{Name: "load_fuel", Module: "load_fuel", Export: "run", What: "start, _initialize, callbox_abi_version and callbox_alloc run 10 million instructions each; the callback a handful, under fuel 1,000", Kind: OK, Tweak: withSmallFuel},

	// Traps.
	{Name: "div_by_zero", Module: "traps", What: "i32.div_u by zero", Kind: abi.DivideByZero},
	{Name: "rem_by_zero", Module: "traps", What: "i64.rem_s by zero", Kind: abi.DivideByZero},
	{Name: "int_overflow", Module: "traps", What: "INT_MIN / -1", Kind: abi.IntegerOverflow},
	{Name: "unreachable", Module: "traps", What: "executes unreachable", Kind: abi.Unreachable},
	{Name: "trunc_nan", Module: "traps", What: "i32.trunc_f32_s of NaN", Kind: abi.InvalidConversion},
	{Name: "trunc_range", Module: "traps", What: "i64.trunc_f64_u of -1e300 (out of range: the spec's integer overflow)", Kind: abi.IntegerOverflow},
	{Name: "indirect_mismatch", Module: "traps", What: "call_indirect with the wrong function type", Kind: abi.IndirectCallMismatch},
	{Name: "indirect_null", Module: "traps", What: "call_indirect through a null table entry", Kind: abi.TableOutOfBounds},
	{Name: "indirect_oob", Module: "traps", What: "call_indirect past the end of the table", Kind: abi.TableOutOfBounds},
	{Name: "load_oob", Module: "traps", What: "i32.load 4 bytes below 4 GiB", Kind: abi.MemoryOutOfBounds},
	{Name: "store_oob", Module: "traps", What: "i32.store straddling the end of memory", Kind: abi.MemoryOutOfBounds},
	{Name: "fill_oob", Module: "traps", What: "memory.fill of 2 GiB", Kind: abi.MemoryOutOfBounds},

	// The call frame.
	{Name: "overrun_1", Module: "frame", What: "correct output, then 1 byte past its end", Kind: abi.ABIViolation, Msg: "guest wrote past the end of its 16-byte buffer: the first changed byte is at end+0"},
	{Name: "overrun_last_guard", Module: "frame", What: "writes only the 64th byte after its output", Kind: abi.ABIViolation, Msg: "the first changed byte is at end+63"},
	{Name: "overrun_far", Module: "frame", What: "fills 64 KiB past its output, through the guard and the frame", Kind: abi.ABIViolation, Msg: "past the end of its 16-byte buffer"},
	{Name: "redirect", Module: "frame", What: "points its output descriptor at its input", Kind: abi.ABIViolation, Msg: "the data pointer of output 0's descriptor"},
	{Name: "redirect_host", Module: "frame", What: "points its output descriptor at 0xfffff000, length 4 KiB", Kind: abi.ABIViolation, Msg: "the data pointer of output 0's descriptor"},
	{Name: "rank_huge", Module: "frame", What: "sets its output's rank to 2^32-1", Kind: abi.ABIViolation, Msg: "the rank of output 0's descriptor"},
	{Name: "dim_negative", Module: "frame", What: "sets its output's first dimension to -1", Kind: abi.ABIViolation, Msg: "the dims array"},
	{Name: "byte_len_huge", Module: "frame", What: "sets its output's byte length to 2^32-1", Kind: abi.ABIViolation, Msg: "the byte length of output 0's descriptor"},
	{Name: "outputs_more", Module: "frame", What: "claims 1000 outputs in the frame header", Kind: abi.ABIViolation, Msg: "the frame header"},
	{Name: "magic", Module: "frame", What: "overwrites the frame's magic number", Kind: abi.ABIViolation, Msg: "the frame header"},
	{Name: "descriptors_moved", Module: "frame", What: "points the header's descriptor array elsewhere", Kind: abi.ABIViolation, Msg: "the frame header"},
	{Name: "write_then_trap", Module: "frame", What: "writes its whole output, then traps", Kind: abi.Unreachable},
	{Name: "write_then_bad_status", Module: "frame", What: "writes its whole output, then returns status 77", Kind: abi.ABIViolation, Msg: "status 77 is not an ABI v1 status"},
	{Name: "status_negative", Module: "frame", What: "returns status -1", Kind: abi.ABIViolation, Msg: "status -1 is not an ABI v1 status"},
	{Name: "status_cancelled", Module: "frame", What: "returns absl CANCELLED (1), not an ABI v1 status", Kind: abi.ABIViolation, Msg: "status 1 is not"},
	{Name: "scribble_inputs", Module: "frame", What: "overwrites its input buffer and succeeds (the caller's input must not change)", Kind: OK, Want: Double},

	// callbox.error and callbox.log.
	{Name: "error_ptr_oob", Module: "imports", What: "callbox.error with a pointer 8 bytes below 4 GiB", Kind: abi.ABIViolation, Msg: "callbox.error message at guest offset 4294967288"},
	{Name: "error_len_huge", Module: "imports", What: "callbox.error with a length of 2^32-1", Kind: abi.ABIViolation, Msg: "callbox.error message at guest offset 0"},
	{Name: "error_len_wraps", Module: "imports", What: "callbox.error whose pointer + length wraps past 2^32", Kind: abi.ABIViolation, Msg: "is outside guest memory"},
	{Name: "error_ptr_past_end", Module: "imports", What: "callbox.error at the end of memory (allowed), then one byte further", Kind: abi.ABIViolation, Msg: "at guest offset 4194305"},
	{Name: "error_megabytes", Module: "imports", What: "a 3 MiB error message, then INVALID_ARGUMENT", Kind: abi.GuestError, Msg: "[truncated 3141632 bytes]"},
	{Name: "error_many", Module: "imports", What: "sets a 3 MiB error message 1,000 times, then fails (5 s timeout)", Kind: abi.GuestError, Msg: "bad input", Tweak: withMemoryTimeout(8<<20, 5*time.Second)},
	{Name: "error_invalid_utf8", Module: "imports", What: "an error message that is not UTF-8", Kind: abi.GuestError, Msg: "\uFFFD"},
	{Name: "error_then_ok", Module: "imports", What: "sets an error message, then succeeds", Kind: OK},
	{Name: "error_then_trap", Module: "imports", What: "sets an error message, then faults", Kind: abi.MemoryOutOfBounds},
	{Name: "log_ptr_oob", Module: "imports", What: "callbox.log with a pointer 8 bytes below 4 GiB", Kind: abi.ABIViolation, Msg: "callbox.log message at guest offset 4294967288"},
	{Name: "log_len_huge", Module: "imports", What: "callbox.log with a length of 2^32-1", Kind: abi.ABIViolation, Msg: "callbox.log message"},
	{Name: "log_megabytes", Module: "imports", What: "one 3 MiB log line, then success", Kind: OK},
	{Name: "log_bad_levels", Module: "imports", What: "log levels -5 and 1000", Kind: OK},

	// The WASI profile, granted.
	{Name: "sleep_forever", Module: "wasi", What: "WASI poll_oneoff sleep of 17 minutes", Kind: abi.Timeout, Tweak: withWASI},
	{Name: "stdout_flood", Module: "wasi", What: "writes 300 MiB to stdout with no newline", Kind: OK, Tweak: withWASI},
	{Name: "stdout_iovec_oob", Module: "wasi", What: "fd_write with an iovec outside memory", Kind: abi.ABIViolation, Msg: "WASI fd_write buffer", Tweak: withWASI},
	{Name: "iovecs_huge", Module: "wasi", What: "fd_write claiming 2^29 iovecs", Kind: abi.ABIViolation, Msg: "WASI fd_write iovecs", Tweak: withWASI},
	{Name: "clock_result_oob", Module: "wasi", What: "clock_time_get writing its result outside memory", Kind: abi.ABIViolation, Msg: "WASI clock_time_get", Tweak: withWASI},
	{Name: "random_huge", Module: "wasi", What: "random_get over all its memory, frame included", Kind: abi.ABIViolation, Msg: "guest rewrote", Tweak: withWASI},
	{Name: "open_file", Module: "wasi", What: "path_open(\"/etc/passwd\"); fails the call when refused", Kind: abi.GuestError, Tweak: withWASI},
	{Name: "exit", Module: "wasi", What: "proc_exit(3) in the middle of a call", Kind: abi.GuestError, Msg: "proc_exit(3)", Tweak: withWASI},

	// Pooled instances that sabotage themselves.
	{Name: "corrupt_heap", Module: "pooled", What: "succeeds, leaving its allocator pointing at 4 GiB; the next call needs a larger frame", Kind: abi.ABIViolation,
		Before: 1, Grow: true, Msg: "callbox_alloc result"},
	{Name: "corrupt_state", Module: "pooled", What: "succeeds, leaving a pointer it uses on every call outside memory", Kind: abi.MemoryOutOfBounds, Before: 1},

	// The guest allocator.
	{Name: "alloc_spin", Module: "alloc_spin", Export: "run", What: "callbox_alloc never returns (first called by the first call)", Kind: abi.Timeout, Msg: "allocating the call frame"},
	{Name: "alloc_oob", Module: "alloc_oob", Export: "run", What: "callbox_alloc returns 0xffffffc0", Kind: abi.ABIViolation, Msg: "callbox_alloc result"},
	{Name: "alloc_straddle", Module: "alloc_straddle", Export: "run", What: "callbox_alloc returns a region running past the end of memory", Kind: abi.ABIViolation, Msg: "callbox_alloc result"},
	{Name: "alloc_unaligned", Module: "alloc_unaligned", Export: "run", What: "callbox_alloc ignores the alignment asked for", Kind: abi.ABIViolation, Msg: "not 64-byte aligned"},
	{Name: "alloc_null", Module: "alloc_null", Export: "run", What: "callbox_alloc returns 0", Kind: abi.GuestError, Msg: "callbox_alloc(4096, 64) returned 0"},
	{Name: "alloc_trap", Module: "alloc_trap", Export: "run", What: "callbox_alloc traps", Kind: abi.Unreachable},

	// One deadline per call.
	{Name: "deadline_split", Module: "deadline_split", Export: "run", What: "fresh isolation: 0.6x the timeout in each of _initialize, callbox_alloc and the callback (1.8x in all, each entry within the timeout)", Kind: abi.Timeout,
		Msg: "allocating the call frame: timeout after 250ms", Tweak: func(cb *config.Callback) { withWASI(cb); cb.Isolation = config.IsolationFresh }},
	{Name: "spin_fuel", Module: "runaway", Export: "spin", What: "infinite loop with a fuel budget of 2^40 (the timeout ends it first)", Kind: abi.Timeout,
		Msg: "timeout after 250ms", Tweak: func(cb *config.Callback) { cb.Limits.Fuel = 1 << 40 }},

	// Refused at load.
	{Name: "version_wrong", Module: "load_version_wrong", Export: "run", Phase: AtLoad, What: "callbox_abi_version returns 2", Kind: abi.ABIViolation, Msg: "guest reports ABI version 2"},
	{Name: "version_trap", Module: "load_version_trap", Export: "run", Phase: AtLoad, What: "callbox_abi_version divides by zero", Kind: abi.DivideByZero},
	{Name: "reserved_export", Module: "load_reserved_export", Export: "run", Phase: AtLoad, What: "exports callbox_meter_budget, a name the instrumentation reserves", Kind: abi.ABIViolation, Msg: "export callbox_meter_budget uses the prefix callbox_meter_, which the host reserves"},
	{Name: "missing_exports", Module: "load_missing_exports", Export: "run", Phase: AtLoad, What: "exports neither memory, callbox_alloc nor the callback", Kind: abi.ABIViolation, Msg: "missing required export callbox_alloc"},
	{Name: "wrong_signatures", Module: "load_wrong_signatures", Export: "run", Phase: AtLoad, What: "callback, callbox_alloc and callbox_abi_version mistyped; callbox_free a global", Kind: abi.ABIViolation, Msg: "export run has type (i32, i32) -> (i32), want (i32) -> (i32)"},
	{Name: "unknown_import", Module: "load_unknown_import", Export: "run", Phase: AtLoad, What: "imports env.system", Kind: abi.ABIViolation, Msg: "imports env.system, which the host does not provide"},
	{Name: "import_wrong_type", Module: "load_import_wrong_type", Export: "run", Phase: AtLoad, What: "imports callbox.error with another type", Kind: abi.ABIViolation, Msg: "imports callbox.error with type (i64) -> (i32)"},
	{Name: "import_memory", Module: "load_import_memory", Export: "run", Phase: AtLoad, What: "imports its memory and a global", Kind: abi.ABIViolation, Msg: "imports memory env.memory"},
	{Name: "wasi_not_granted", Module: "load_wasi_not_granted", Export: "run", Phase: AtLoad, What: "imports WASI fd_write and path_open without the grant", Kind: abi.ABIViolation, Msg: "imports wasi_snapshot_preview1.path_open, but WASI is not granted"},
	{Name: "memory_huge", Module: "load_memory_huge", Export: "run", Phase: AtLoad, What: "declares an initial memory of 4 GiB", Kind: abi.MemoryLimit, Msg: "declares a minimum memory of 4GiB, above the callback's max_memory of 1MiB"},
	{Name: "memory_shared", Module: "load_memory_shared", Export: "run", Phase: AtLoad, What: "a shared memory, and two memories (neither valid under callbox's features)", Kind: abi.InvalidArgument, Msg: "not a valid WebAssembly module (wazero's validator): section memory: at most one memory allowed"},
	{Name: "table_huge", Module: "load_table_huge", Export: "run", Phase: AtLoad, What: "declares a table of 10 million elements", Kind: abi.ABIViolation, Msg: "table 0 declares 10000000 elements"},
	{Name: "tables_many", Module: "load_tables_many", Export: "run", Phase: AtLoad, What: "four tables of 900,000 elements each", Kind: abi.ABIViolation, Msg: "its 4 tables declare 3600000 elements in all"},
	{Name: "start_loop", Module: "load_start_loop", Export: "run", Phase: AtLoad, What: "start function never returns", Kind: abi.Timeout},
	{Name: "initialize_loop", Module: "load_initialize_loop", Export: "run", Phase: AtLoad, What: "_initialize never returns", Kind: abi.Timeout},
	{Name: "start_recurse", Module: "load_start_trap", Export: "run", Phase: AtLoad, What: "start function recurses forever", Kind: abi.StackOverflow, Msg: "instantiate: stack overflow"},
	{Name: "start_unreachable", Module: "load_start_unreachable", Export: "run", Phase: AtLoad, What: "start function executes unreachable", Kind: abi.Unreachable, Msg: "instantiate: unreachable"},
	{Name: "start_log", Module: "load_start_log", Export: "run", Phase: AtLoad, What: "calls callbox.log from its start function and _initialize (valid)", Kind: OK},
	{Name: "start_grow", Module: "load_start_grow", Export: "run", Phase: AtLoad, What: "start function grows memory until refused, then traps", Kind: abi.MemoryLimit},
	{Name: "data_oob", Module: "load_data_oob", Export: "run", Phase: AtLoad, What: "an active data segment past the end of memory", Kind: abi.MemoryOutOfBounds},
	{Name: "elem_oob", Module: "load_elem_oob", Export: "run", Phase: AtLoad, What: "an active element segment past the end of its table", Kind: abi.TableOutOfBounds,
		Differs: map[string]abi.Kind{config.EngineWazero: OK},
		Why:     "wazero v1.12 deliberately skips an active element segment that does not fit its table (and every later segment) instead of failing instantiation, so the module loads with those table entries left null; nothing is written out of bounds. wasmtime refuses it, as the spec requires"},
	{Name: "signatures_oob", Module: "load_signatures_oob", Export: "run", Phase: AtLoad, What: "callbox_signatures points outside memory", Kind: abi.ABIViolation, Msg: "callbox_signatures length at guest offset 4294967294"},
	{Name: "signatures_huge", Module: "load_signatures_huge", Export: "run", Phase: AtLoad, What: "callbox_signatures claims a 4 GiB table", Kind: abi.ABIViolation, Msg: "table of 4294967295 bytes exceeds 65536"},
	{Name: "signatures_loop", Module: "load_signatures_loop", Export: "run", Phase: AtLoad, What: "callbox_signatures never returns", Kind: abi.Timeout},
	{Name: "signatures_garbage", Module: "load_signatures_garbage", Export: "run", Phase: AtLoad, What: "callbox_signatures returns binary junk", Kind: abi.ABIViolation, Msg: "signature table line 1 (run)"},
	{Name: "locals_bomb", Build: localsBomb, Export: "run", Phase: AtLoad, What: "a 100-byte module declaring 2^32-16 locals in one function", Kind: abi.InvalidArgument, Msg: "(callbox's reader): malformed wasm at byte 108: section 10: function 2 declares more than 50000 locals"},
	{Name: "data_count_bomb", Build: vectorBomb(11), Export: "run", Phase: AtLoad, What: "a data section claiming 2^32-1 segments", Kind: abi.InvalidArgument, Msg: "(callbox's reader): malformed wasm at byte 119: section 11: count 4294967295 exceeds the remaining 0 bytes"},
	{Name: "blocks_bomb", Build: nestingBomb, Export: "run", Phase: AtLoad, What: "a 120 KB function of 40,000 nested empty blocks (6-7 s to compile on wazero)", Kind: abi.ABIViolation, Msg: "too many blocks in one function: more than 4096",
		Differs: map[string]abi.Kind{config.EngineWasmtime: OK},
		Why:     "wazero's compile time grows with the square of a function's blocks, so that engine refuses a function with more than 4096 (real compilers emit a few hundred at most); wasmtime compiles the module in about 0.1 s and loads it"},
	{Name: "names_bomb", Build: namesBomb, Export: "run", Phase: AtLoad, What: "a name section claiming 2^32-1 function names", Kind: abi.InvalidArgument, Msg: "(callbox's reader): malformed wasm at byte"},
}

// Decoder bombs: tiny modules whose declared vector lengths would make
// wazero's decoder allocate gigabytes (a fatal error, not a panic).

func bombModule(sections ...[]byte) []byte {
	m := []byte("\x00asm\x01\x00\x00\x00")
	sec := func(id byte, body []byte) []byte {
		return append(append([]byte{id}, uleb(uint64(len(body)))...), body...)
	}
	// types: () -> i32, (i32, i32) -> i32, (i32) -> i32
	m = append(m, sec(1, []byte{3, 0x60, 0, 1, 0x7f, 0x60, 2, 0x7f, 0x7f, 1, 0x7f, 0x60, 1, 0x7f, 1, 0x7f})...)
	m = append(m, sec(3, []byte{3, 0, 1, 2})...)
	m = append(m, sec(5, []byte{1, 0, 1})...)
	exp := []byte{4}
	for i, n := range []string{"callbox_abi_version", "callbox_alloc", "run"} {
		exp = append(append(append(exp, byte(len(n))), n...), 0, byte(i))
	}
	exp = append(append(append(exp, 6), "memory"...), 2, 0)
	m = append(m, sec(7, exp)...)
	for _, s := range sections {
		m = append(m, s...)
	}
	return m
}

func uleb(v uint64) []byte {
	var out []byte
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(out, b)
		}
		out = append(out, b|0x80)
	}
}

func codeSection(run []byte) []byte {
	bodies := [][]byte{{0, 0x41, 1, 0x0b}, {0, 0x41, 0x80, 0x08, 0x0b}, run}
	code := []byte{3}
	for _, b := range bodies {
		code = append(append(code, uleb(uint64(len(b)))...), b...)
	}
	return append(append([]byte{10}, uleb(uint64(len(code)))...), code...)
}

func nestingBomb() []byte {
	const depth = 40_000
	run := []byte{0}
	for i := 0; i < depth; i++ {
		run = append(run, 0x02, 0x40) // block
	}
	for i := 0; i < depth; i++ {
		run = append(run, 0x0b)
	}
	run = append(run, 0x41, 0, 0x0b) // i32.const 0; end
	return bombModule(codeSection(run))
}

func localsBomb() []byte {
	run := append(append([]byte{1}, uleb(0xfffffff0)...), 0x7e, 0x41, 0, 0x0b)
	return bombModule(codeSection(run))
}

func vectorBomb(id byte) func() []byte {
	return func() []byte {
		body := uleb(0xffffffff)
		return bombModule(codeSection([]byte{0, 0x41, 0, 0x0b}), append(append([]byte{id}, uleb(uint64(len(body)))...), body...))
	}
}

func namesBomb() []byte {
	body := append([]byte{4}, "name"...)
	sub := uleb(0xffffffff)
	body = append(append(append(body, 1), uleb(uint64(len(sub)))...), sub...)
	return bombModule(codeSection([]byte{0, 0x41, 0, 0x0b}), append(append([]byte{0}, uleb(uint64(len(body)))...), body...))
}

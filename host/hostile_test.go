package host_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/sandbox/wasmtime"
	"github.com/seed4b3e0ccb/callbox/internal/wat"
)

// The hostile-guest suite. Every case is a guest module under
// testdata/hostile (or, for the decoder bombs, bytes built below) that
// attacks the host in one way, with the failure kind it must produce. Every
// case runs on every engine and asserts:
//
//   - the error's kind (per engine, where they legitimately differ, with
//     the reason), that it is typed (*host.CallbackError or *host.LoadError)
//     and names the callback;
//   - that the call (or the load) returned within the callback's timeout
//     plus hostileSlack;
//   - that a failed call left the caller's output buffer byte-for-byte
//     unchanged, and never changed the caller's inputs;
//   - that the instance was discarded (PoolStats) unless the kind lets the
//     ABI keep it (GuestError with a valid status, or success);
//   - that the guest's log output and error message stayed within their
//     caps;
//   - that the host then serves a normal call;
//   - that no goroutine outlives the host (goleak, after Close).
//
// The results are the table in docs/SECURITY.md: run with -security-doc to
// regenerate it; a normal run fails when the committed table no longer
// matches (measured times excepted).

const (
	// hostileTimeout is every hostile callback's timeout.
	hostileTimeout = 250 * time.Millisecond
	// hostileSlack is how far past its timeout a hostile call may return.
	// It is a containment bound, not a performance target: generous
	// enough for a loaded 2-core CI machine under the race detector
	// (where a call typically returns within a few ms of its deadline).
	hostileSlack = time.Second
	// hostileMaxMemory is every hostile callback's max_memory, unless the
	// case needs more.
	hostileMaxMemory = 1 << 20
)

type phase int

const (
	atCall phase = iota
	atLoad
)

// ok is the "kind" of a call that must succeed.
const ok = host.Kind(0)

type hostileCase struct {
	name   string // also the callback name
	module string // testdata/hostile/<module>.wat; empty with build
	build  func() []byte
	export string // default: name
	what   string // what the guest does, for the table
	phase  phase
	kind   host.Kind // expected kind; ok: the call succeeds
	// differs lists legitimate engine differences: the kind an engine
	// reports instead, and why (rendered as a footnote).
	differs map[string]host.Kind
	why     string
	msg     string // a substring the error message must contain
	tweak   func(*config.Callback)
	// before is how many calls succeed on the same pooled instance before
	// the hostile one; grow makes the hostile call's input larger, so the
	// host must ask the guest's allocator for a new scratch region.
	before int
	grow   bool
	// want is the output of a call that succeeds (default: a copy of x).
	want func(x []float32) []float32
}

func (hc hostileCase) expected(engine string) host.Kind {
	if k, ok := hc.differs[engine]; ok {
		return k
	}
	return hc.kind
}

func double(x []float32) []float32 {
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

// hostileFuel is the fuel budget of the fuel cases.
const hostileFuel = 100_000

func withFuel(cb *config.Callback) {
	cb.WASI = config.WASIMinimal
	cb.Limits.MaxMemory = 16 << 20
	cb.Limits.Fuel = hostileFuel
}

func withSmallFuel(cb *config.Callback) { cb.Limits.Fuel = 1000 }

var hostileCases = []hostileCase{
	// Runaways: CPU, stack, memory, tables.
	{name: "spin", module: "runaway", what: "infinite loop", kind: host.Timeout},
	{name: "recurse", module: "runaway", what: "infinite recursion", kind: host.StackOverflow, msg: "failed: stack overflow"},
	{name: "deep_then_spin", module: "runaway", what: "recursion 5000 deep, then a loop with no calls in it", kind: host.Timeout},
	{name: "grow_pages", module: "runaway", what: "memory.grow one page at a time until refused, then traps", kind: host.MemoryLimit},
	{name: "grow_huge", module: "runaway", what: "one memory.grow of 1 GiB; when refused returns RESOURCE_EXHAUSTED", kind: host.MemoryLimit},
	{name: "grow_then_exhausted", module: "runaway", what: "grows to the limit page by page, then returns RESOURCE_EXHAUSTED", kind: host.MemoryLimit},
	{name: "table_grow", module: "runaway", what: "table.grow by 2^31 elements (16 GiB of host memory); traps when refused", kind: host.Unreachable},
	{name: "log_flood", module: "runaway", what: "100,000 64-byte log lines in one call (5 s timeout)", kind: ok, tweak: withTimeout(5 * time.Second)},
	{name: "log_forever", module: "runaway", what: "calls callbox.log in an endless loop", kind: host.Timeout},

	// Fuel that bounds work: bulk operations and imports charged by size.
	{name: "fill_flood", module: "fuel", what: "2,000 memory.fill of 8 MiB each (16 GB) under fuel 100,000", kind: host.FuelExhausted, tweak: withFuel},
	{name: "copy_flood", module: "fuel", what: "4,000 memory.copy of 4 MiB each under fuel 100,000", kind: host.FuelExhausted, tweak: withFuel},
	{name: "table_flood", module: "fuel", what: "table.fill of 100,000 elements, a million times, under fuel 100,000", kind: host.FuelExhausted, tweak: withFuel},
	{name: "grow_flood", module: "fuel", what: "memory.grow one page at a time (100 pages, within max_memory) under fuel 100,000", kind: host.FuelExhausted, tweak: withFuel},
	{name: "error_flood", module: "fuel", what: "callbox.error of 4 MiB, a million times, under fuel 100,000", kind: host.FuelExhausted, tweak: withFuel},
	{name: "random_flood", module: "fuel", what: "WASI random_get of 8 MiB, 2,000 times, under fuel 100,000", kind: host.FuelExhausted, tweak: withFuel},
	{name: "load_fuel", module: "load_fuel", export: "run", what: "start, _initialize, callbox_abi_version and callbox_alloc run 10 million instructions each; the callback a handful, under fuel 1,000", kind: ok, tweak: withSmallFuel},

	// Traps.
	{name: "div_by_zero", module: "traps", what: "i32.div_u by zero", kind: host.DivideByZero},
	{name: "rem_by_zero", module: "traps", what: "i64.rem_s by zero", kind: host.DivideByZero},
	{name: "int_overflow", module: "traps", what: "INT_MIN / -1", kind: host.IntegerOverflow},
	{name: "unreachable", module: "traps", what: "executes unreachable", kind: host.Unreachable},
	{name: "trunc_nan", module: "traps", what: "i32.trunc_f32_s of NaN", kind: host.InvalidConversion},
	{name: "trunc_range", module: "traps", what: "i64.trunc_f64_u of -1e300 (out of range: the spec's integer overflow)", kind: host.IntegerOverflow},
	{name: "indirect_mismatch", module: "traps", what: "call_indirect with the wrong function type", kind: host.IndirectCallMismatch},
	{name: "indirect_null", module: "traps", what: "call_indirect through a null table entry", kind: host.TableOutOfBounds},
	{name: "indirect_oob", module: "traps", what: "call_indirect past the end of the table", kind: host.TableOutOfBounds},
	{name: "load_oob", module: "traps", what: "i32.load 4 bytes below 4 GiB", kind: host.MemoryOutOfBounds},
	{name: "store_oob", module: "traps", what: "i32.store straddling the end of memory", kind: host.MemoryOutOfBounds},
	{name: "fill_oob", module: "traps", what: "memory.fill of 2 GiB", kind: host.MemoryOutOfBounds},

	// The call frame.
	{name: "overrun_1", module: "frame", what: "correct output, then 1 byte past its end", kind: host.ABIViolation, msg: "guest wrote past the end of its 16-byte buffer: the first changed byte is at end+0"},
	{name: "overrun_last_guard", module: "frame", what: "writes only the 64th byte after its output", kind: host.ABIViolation, msg: "the first changed byte is at end+63"},
	{name: "overrun_far", module: "frame", what: "fills 64 KiB past its output, through the guard and the frame", kind: host.ABIViolation, msg: "past the end of its 16-byte buffer"},
	{name: "redirect", module: "frame", what: "points its output descriptor at its input", kind: host.ABIViolation, msg: "the data pointer of output 0's descriptor"},
	{name: "redirect_host", module: "frame", what: "points its output descriptor at 0xfffff000, length 4 KiB", kind: host.ABIViolation, msg: "the data pointer of output 0's descriptor"},
	{name: "rank_huge", module: "frame", what: "sets its output's rank to 2^32-1", kind: host.ABIViolation, msg: "the rank of output 0's descriptor"},
	{name: "dim_negative", module: "frame", what: "sets its output's first dimension to -1", kind: host.ABIViolation, msg: "the dims array"},
	{name: "byte_len_huge", module: "frame", what: "sets its output's byte length to 2^32-1", kind: host.ABIViolation, msg: "the byte length of output 0's descriptor"},
	{name: "outputs_more", module: "frame", what: "claims 1000 outputs in the frame header", kind: host.ABIViolation, msg: "the frame header"},
	{name: "magic", module: "frame", what: "overwrites the frame's magic number", kind: host.ABIViolation, msg: "the frame header"},
	{name: "descriptors_moved", module: "frame", what: "points the header's descriptor array elsewhere", kind: host.ABIViolation, msg: "the frame header"},
	{name: "write_then_trap", module: "frame", what: "writes its whole output, then traps", kind: host.Unreachable},
	{name: "write_then_bad_status", module: "frame", what: "writes its whole output, then returns status 77", kind: host.ABIViolation, msg: "status 77 is not an ABI v1 status"},
	{name: "status_negative", module: "frame", what: "returns status -1", kind: host.ABIViolation, msg: "status -1 is not an ABI v1 status"},
	{name: "status_cancelled", module: "frame", what: "returns absl CANCELLED (1), not an ABI v1 status", kind: host.ABIViolation, msg: "status 1 is not"},
	{name: "scribble_inputs", module: "frame", what: "overwrites its input buffer and succeeds (the caller's input must not change)", kind: ok, want: double},

	// callbox.error and callbox.log.
	{name: "error_ptr_oob", module: "imports", what: "callbox.error with a pointer 8 bytes below 4 GiB", kind: host.ABIViolation, msg: "callbox.error message at guest offset 4294967288"},
	{name: "error_len_huge", module: "imports", what: "callbox.error with a length of 2^32-1", kind: host.ABIViolation, msg: "callbox.error message at guest offset 0"},
	{name: "error_len_wraps", module: "imports", what: "callbox.error whose pointer + length wraps past 2^32", kind: host.ABIViolation, msg: "is outside guest memory"},
	{name: "error_ptr_past_end", module: "imports", what: "callbox.error at the end of memory (allowed), then one byte further", kind: host.ABIViolation, msg: "at guest offset 4194305"},
	{name: "error_megabytes", module: "imports", what: "a 3 MiB error message, then INVALID_ARGUMENT", kind: host.GuestError, msg: "[truncated 3141632 bytes]"},
	{name: "error_many", module: "imports", what: "sets a 3 MiB error message 1,000 times, then fails (5 s timeout)", kind: host.GuestError, msg: "bad input", tweak: withMemoryTimeout(8<<20, 5*time.Second)},
	{name: "error_invalid_utf8", module: "imports", what: "an error message that is not UTF-8", kind: host.GuestError, msg: "\uFFFD"},
	{name: "error_then_ok", module: "imports", what: "sets an error message, then succeeds", kind: ok},
	{name: "error_then_trap", module: "imports", what: "sets an error message, then faults", kind: host.MemoryOutOfBounds},
	{name: "log_ptr_oob", module: "imports", what: "callbox.log with a pointer 8 bytes below 4 GiB", kind: host.ABIViolation, msg: "callbox.log message at guest offset 4294967288"},
	{name: "log_len_huge", module: "imports", what: "callbox.log with a length of 2^32-1", kind: host.ABIViolation, msg: "callbox.log message"},
	{name: "log_megabytes", module: "imports", what: "one 3 MiB log line, then success", kind: ok},
	{name: "log_bad_levels", module: "imports", what: "log levels -5 and 1000", kind: ok},

	// The WASI profile, granted.
	{name: "sleep_forever", module: "wasi", what: "WASI poll_oneoff sleep of 17 minutes", kind: host.Timeout, tweak: withWASI},
	{name: "stdout_flood", module: "wasi", what: "writes 300 MiB to stdout with no newline", kind: ok, tweak: withWASI},
	{name: "stdout_iovec_oob", module: "wasi", what: "fd_write with an iovec outside memory", kind: host.ABIViolation, msg: "WASI fd_write buffer", tweak: withWASI},
	{name: "iovecs_huge", module: "wasi", what: "fd_write claiming 2^29 iovecs", kind: host.ABIViolation, msg: "WASI fd_write iovecs", tweak: withWASI},
	{name: "clock_result_oob", module: "wasi", what: "clock_time_get writing its result outside memory", kind: host.ABIViolation, msg: "WASI clock_time_get", tweak: withWASI},
	{name: "random_huge", module: "wasi", what: "random_get over all its memory, frame included", kind: host.ABIViolation, msg: "guest rewrote", tweak: withWASI},
	{name: "open_file", module: "wasi", what: "path_open(\"/etc/passwd\"); fails the call when refused", kind: host.GuestError, tweak: withWASI},
	{name: "exit", module: "wasi", what: "proc_exit(3) in the middle of a call", kind: host.GuestError, msg: "proc_exit(3)", tweak: withWASI},

	// Pooled instances that sabotage themselves.
	{name: "corrupt_heap", module: "pooled", what: "succeeds, leaving its allocator pointing at 4 GiB; the next call needs a larger frame", kind: host.ABIViolation,
		before: 1, grow: true, msg: "callbox_alloc result"},
	{name: "corrupt_state", module: "pooled", what: "succeeds, leaving a pointer it uses on every call outside memory", kind: host.MemoryOutOfBounds, before: 1},

	// The guest allocator.
	{name: "alloc_spin", module: "alloc_spin", export: "run", what: "callbox_alloc never returns (first called by the first call)", kind: host.Timeout, msg: "allocating the call frame"},
	{name: "alloc_oob", module: "alloc_oob", export: "run", what: "callbox_alloc returns 0xffffffc0", kind: host.ABIViolation, msg: "callbox_alloc result"},
	{name: "alloc_straddle", module: "alloc_straddle", export: "run", what: "callbox_alloc returns a region running past the end of memory", kind: host.ABIViolation, msg: "callbox_alloc result"},
	{name: "alloc_unaligned", module: "alloc_unaligned", export: "run", what: "callbox_alloc ignores the alignment asked for", kind: host.ABIViolation, msg: "not 64-byte aligned"},
	{name: "alloc_null", module: "alloc_null", export: "run", what: "callbox_alloc returns 0", kind: host.GuestError, msg: "callbox_alloc(4096, 64) returned 0"},
	{name: "alloc_trap", module: "alloc_trap", export: "run", what: "callbox_alloc traps", kind: host.Unreachable},

	// One deadline per call.
	{name: "deadline_split", module: "deadline_split", export: "run", what: "fresh isolation: 0.6x the timeout in each of _initialize, callbox_alloc and the callback (1.8x in all, each entry within the timeout)", kind: host.Timeout,
		msg: "allocating the call frame: timeout after 250ms", tweak: func(cb *config.Callback) { withWASI(cb); cb.Isolation = config.IsolationFresh }},
	{name: "spin_fuel", module: "runaway", export: "spin", what: "infinite loop with a fuel budget of 2^40 (the timeout ends it first)", kind: host.Timeout,
		msg: "timeout after 250ms", tweak: func(cb *config.Callback) { cb.Limits.Fuel = 1 << 40 }},

	// Refused at load.
	{name: "version_wrong", module: "load_version_wrong", export: "run", phase: atLoad, what: "callbox_abi_version returns 2", kind: host.ABIViolation, msg: "guest reports ABI version 2"},
	{name: "version_trap", module: "load_version_trap", export: "run", phase: atLoad, what: "callbox_abi_version divides by zero", kind: host.DivideByZero},
	{name: "reserved_export", module: "load_reserved_export", export: "run", phase: atLoad, what: "exports callbox_meter_budget, a name the instrumentation reserves", kind: host.ABIViolation, msg: "export callbox_meter_budget uses the prefix callbox_meter_, which the host reserves"},
	{name: "missing_exports", module: "load_missing_exports", export: "run", phase: atLoad, what: "exports neither memory, callbox_alloc nor the callback", kind: host.ABIViolation, msg: "missing required export callbox_alloc"},
	{name: "wrong_signatures", module: "load_wrong_signatures", export: "run", phase: atLoad, what: "callback, callbox_alloc and callbox_abi_version mistyped; callbox_free a global", kind: host.ABIViolation, msg: "export run has type (i32, i32) -> (i32), want (i32) -> (i32)"},
	{name: "unknown_import", module: "load_unknown_import", export: "run", phase: atLoad, what: "imports env.system", kind: host.ABIViolation, msg: "imports env.system, which the host does not provide"},
	{name: "import_wrong_type", module: "load_import_wrong_type", export: "run", phase: atLoad, what: "imports callbox.error with another type", kind: host.ABIViolation, msg: "imports callbox.error with type (i64) -> (i32)"},
	{name: "import_memory", module: "load_import_memory", export: "run", phase: atLoad, what: "imports its memory and a global", kind: host.ABIViolation, msg: "imports memory env.memory"},
	{name: "wasi_not_granted", module: "load_wasi_not_granted", export: "run", phase: atLoad, what: "imports WASI fd_write and path_open without the grant", kind: host.ABIViolation, msg: "imports wasi_snapshot_preview1.path_open, but WASI is not granted"},
	{name: "memory_huge", module: "load_memory_huge", export: "run", phase: atLoad, what: "declares an initial memory of 4 GiB", kind: host.MemoryLimit, msg: "declares a minimum memory of 4GiB, above the callback's max_memory of 1MiB"},
	{name: "memory_shared", module: "load_memory_shared", export: "run", phase: atLoad, what: "a shared memory, and two memories", kind: host.ABIViolation, msg: "has 2 memories"},
	{name: "table_huge", module: "load_table_huge", export: "run", phase: atLoad, what: "declares a table of 10 million elements", kind: host.ABIViolation, msg: "table 0 declares 10000000 elements"},
	{name: "tables_many", module: "load_tables_many", export: "run", phase: atLoad, what: "four tables of 900,000 elements each", kind: host.ABIViolation, msg: "its 4 tables declare 3600000 elements in all"},
	{name: "start_loop", module: "load_start_loop", export: "run", phase: atLoad, what: "start function never returns", kind: host.Timeout},
	{name: "initialize_loop", module: "load_initialize_loop", export: "run", phase: atLoad, what: "_initialize never returns", kind: host.Timeout},
	{name: "start_recurse", module: "load_start_trap", export: "run", phase: atLoad, what: "start function recurses forever", kind: host.StackOverflow, msg: "instantiate: stack overflow"},
	{name: "start_unreachable", module: "load_start_unreachable", export: "run", phase: atLoad, what: "start function executes unreachable", kind: host.Unreachable, msg: "instantiate: unreachable"},
	{name: "start_log", module: "load_start_log", export: "run", phase: atLoad, what: "calls callbox.log from its start function and _initialize (valid)", kind: ok},
	{name: "start_grow", module: "load_start_grow", export: "run", phase: atLoad, what: "start function grows memory until refused, then traps", kind: host.MemoryLimit},
	{name: "data_oob", module: "load_data_oob", export: "run", phase: atLoad, what: "an active data segment past the end of memory", kind: host.MemoryOutOfBounds},
	{name: "elem_oob", module: "load_elem_oob", export: "run", phase: atLoad, what: "an active element segment past the end of its table", kind: host.TableOutOfBounds,
		differs: map[string]host.Kind{config.EngineWazero: ok},
		why:     "wazero v1.12 deliberately skips an active element segment that does not fit its table (and every later segment) instead of failing instantiation, so the module loads with those table entries left null; nothing is written out of bounds. wasmtime refuses it, as the spec requires"},
	{name: "signatures_oob", module: "load_signatures_oob", export: "run", phase: atLoad, what: "callbox_signatures points outside memory", kind: host.ABIViolation, msg: "callbox_signatures length at guest offset 4294967294"},
	{name: "signatures_huge", module: "load_signatures_huge", export: "run", phase: atLoad, what: "callbox_signatures claims a 4 GiB table", kind: host.ABIViolation, msg: "table of 4294967295 bytes exceeds 65536"},
	{name: "signatures_loop", module: "load_signatures_loop", export: "run", phase: atLoad, what: "callbox_signatures never returns", kind: host.Timeout},
	{name: "signatures_garbage", module: "load_signatures_garbage", export: "run", phase: atLoad, what: "callbox_signatures returns binary junk", kind: host.ABIViolation, msg: "signature table line 1 (run)"},
	{name: "locals_bomb", build: localsBomb, export: "run", phase: atLoad, what: "a 100-byte module declaring 2^32-16 locals in one function", kind: host.ABIViolation, msg: "declares more than 50000 locals"},
	{name: "data_count_bomb", build: vectorBomb(11), export: "run", phase: atLoad, what: "a data section claiming 2^32-1 segments", kind: host.ABIViolation, msg: "count 4294967295 exceeds"},
	{name: "blocks_bomb", build: nestingBomb, export: "run", phase: atLoad, what: "a 120 KB function of 40,000 nested empty blocks (6-7 s to compile on wazero)", kind: host.ABIViolation, msg: "too many blocks in one function: more than 4096",
		differs: map[string]host.Kind{config.EngineWasmtime: ok},
		why:     "wazero's compile time grows with the square of a function's blocks, so that engine refuses a function with more than 4096 (real compilers emit a few hundred at most); wasmtime compiles the module in about 0.1 s and loads it"},
	{name: "names_bomb", build: namesBomb, export: "run", phase: atLoad, what: "a name section claiming 2^32-1 function names", kind: host.ABIViolation, msg: "count 4294967295 exceeds"},
}

// hostileResult is what one case did on one engine.
type hostileResult struct {
	kind    host.Kind
	elapsed time.Duration
	// head is the error message up to its first parenthesis: the words
	// that must not depend on the engine (engine detail may follow).
	head string
}

func messageHead(err error) string {
	head, _, _ := strings.Cut(err.Error(), " (")
	return head
}

var (
	hostileMu      sync.Mutex
	hostileResults = map[string]map[string]hostileResult{}
)

func TestHostile(t *testing.T) {
	names := map[string]bool{}
	for _, hc := range hostileCases {
		require.False(t, names[hc.name], "duplicate case %s", hc.name)
		names[hc.name] = true
		for _, engine := range engineNames() {
			t.Run(hc.name+"/"+engine, func(t *testing.T) { runHostile(t, engine, hc) })
		}
	}
	hostileTable(t)
}

// guestLog records the bytes of guest log lines per callback.
type guestLog struct {
	mu    sync.Mutex
	bytes map[string]int
}

func (g *guestLog) Enabled(context.Context, slog.Level) bool { return true }
func (g *guestLog) Handle(_ context.Context, r slog.Record) error {
	name := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "callback" {
			name = a.Value.String()
		}
		return true
	})
	g.mu.Lock()
	g.bytes[name] += len(r.Message)
	g.mu.Unlock()
	return nil
}
func (g *guestLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &guestLogAttrs{g: g, attrs: attrs}
}
func (g *guestLog) WithGroup(string) slog.Handler { return g }

type guestLogAttrs struct {
	g     *guestLog
	attrs []slog.Attr
}

func (a *guestLogAttrs) Enabled(context.Context, slog.Level) bool { return true }
func (a *guestLogAttrs) Handle(ctx context.Context, r slog.Record) error {
	r.AddAttrs(a.attrs...)
	return a.g.Handle(ctx, r)
}
func (a *guestLogAttrs) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &guestLogAttrs{g: a.g, attrs: append(slices.Clone(a.attrs), attrs...)}
}
func (a *guestLogAttrs) WithGroup(string) slog.Handler { return a }

func hostileWasm(t testing.TB, hc hostileCase) []byte {
	t.Helper()
	if hc.build != nil {
		return hc.build()
	}
	src, err := os.ReadFile(filepath.Join("testdata", "hostile", hc.module+".wat"))
	require.NoError(t, err)
	b, err := wat.Compile(string(src))
	require.NoError(t, err, hc.module)
	return b
}

func hostileCallback(hc hostileCase, engine string) config.Callback {
	cb := config.DefaultCallback()
	cb.Name, cb.Export, cb.Engine = hc.name, hc.export, engine
	if cb.Export == "" {
		cb.Export = hc.name
	}
	cb.Signature = "(x: f32[n]) -> f32[n]"
	cb.MaxInstances = 1
	cb.Limits.Timeout = hostileTimeout
	cb.Limits.MaxMemory = hostileMaxMemory
	if strings.HasPrefix(hc.module, "imports") {
		cb.Limits.MaxMemory = 8 << 20
	}
	if hc.tweak != nil {
		hc.tweak(&cb)
	}
	return cb
}

func runHostile(t *testing.T, engine string, hc hostileCase) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	logs := &guestLog{bytes: map[string]int{}}
	h, err := host.New(ctx, nil, host.WithLogger(slog.New(logs)))
	require.NoError(t, err)
	closed := false
	defer func() {
		if !closed {
			_ = h.Close(ctx)
		}
	}()
	healthy := config.DefaultCallback()
	healthy.Name, healthy.Export, healthy.Signature, healthy.Engine = "healthy", "scale", testkitSigs["scale"], engine
	require.NoError(t, h.LoadModule(ctx, healthy, testkitWasm(t)))

	wasm := hostileWasm(t, hc)
	cb := hostileCallback(hc, engine)
	want := hc.expected(engine)
	res := hostileResult{}

	var loadErr error
	if hc.phase == atLoad {
		start := time.Now()
		loadErr = h.LoadModule(ctx, cb, wasm)
		res.elapsed = time.Since(start)
		if want == ok {
			require.NoError(t, loadErr, "this engine loads the module")
		}
	}
	if hc.phase == atLoad && want != ok {
		err := loadErr
		require.Error(t, err, "the module must be refused at load")
		var le *host.LoadError
		require.ErrorAs(t, err, &le, "a load failure is a *host.LoadError: %v", err)
		res.kind, res.head = le.Kind(), messageHead(err)
		assert.Equal(t, want.Ident(), le.Kind().Ident(), "kind; error: %v", err)
		assert.ErrorIs(t, err, want)
		assert.Equal(t, hc.name, le.Callback)
		assert.Contains(t, err.Error(), fmt.Sprintf("callback %q", hc.name))
		if hc.msg != "" {
			assert.Contains(t, err.Error(), hc.msg)
		}
		_, loaded := h.Callback(hc.name)
		assert.False(t, loaded, "a refused callback is not registered")
	} else if hc.phase == atCall {
		require.NoError(t, h.LoadModule(ctx, cb, wasm))
		x := []float32{0, 1, 2, 3}
		for i := 0; i < hc.before; i++ {
			outs, err := h.Invoke(ctx, hc.name, abi.From(slices.Clone(x)))
			require.NoError(t, err, "call %d before the hostile one", i+1)
			require.Equal(t, x, abi.MustView[float32](outs[0]))
		}
		if hc.grow {
			x = make([]float32, 4096)
		}
		before, _ := h.PoolStats(hc.name)
		input := abi.From(slices.Clone(x))
		out := abi.From(make([]float32, len(x)))
		for i := range out.Data {
			out.Data[i] = 0x7e
		}
		outBefore := bytes.Clone(out.Data)
		start := time.Now()
		_, err := h.InvokeInto(ctx, hc.name, []host.Tensor{input}, []host.Tensor{out})
		res.elapsed = time.Since(start)
		assert.Equal(t, x, abi.MustView[float32](input), "the caller's input must never change")
		after, _ := h.PoolStats(hc.name)
		if want == ok {
			require.NoError(t, err)
			wantOut := slices.Clone(x)
			if hc.want != nil {
				wantOut = hc.want(x)
			}
			assert.Equal(t, wantOut, abi.MustView[float32](out))
			assert.Equal(t, before.Discarded, after.Discarded, "a successful call keeps its instance")
		} else {
			require.Error(t, err)
			var ce *host.CallbackError
			require.ErrorAs(t, err, &ce, "a call failure is a *host.CallbackError: %v", err)
			res.kind, res.head = ce.Kind(), messageHead(err)
			assert.Equal(t, want.Ident(), ce.Kind().Ident(), "kind; error: %v", err)
			assert.ErrorIs(t, err, want)
			assert.Equal(t, hc.name, ce.Callback)
			assert.Contains(t, err.Error(), fmt.Sprintf("callback %q", hc.name))
			if hc.msg != "" {
				assert.Contains(t, err.Error(), hc.msg)
			}
			assert.Equal(t, outBefore, out.Data, "a failed call must leave the output buffer untouched")
			assert.LessOrEqual(t, len(ce.GuestMessage), int(cb.Limits.MaxError)+64, "guest message above max_error")
			// The ABI keeps an instance only after a valid non-zero status.
			kept := ce.Kind() == host.GuestError && ce.Status.Valid() && ce.Status != abi.StatusOK
			if kept {
				assert.Equal(t, before.Discarded, after.Discarded, "an instance that returned a status is kept")
				assert.Equal(t, 1, after.Live)
			} else {
				assert.Equal(t, before.Discarded+1, after.Discarded, "a broken instance is discarded")
				assert.Equal(t, 0, after.Live, "no instance of %s is left alive", hc.name)
			}
		}
	}
	assert.Less(t, res.elapsed, cb.Limits.Timeout+hostileSlack, "the hostile %s must end within its timeout plus %v", map[phase]string{atCall: "call", atLoad: "load"}[hc.phase], hostileSlack)

	// The host keeps serving.
	outs, err := h.Invoke(ctx, "healthy", abi.From([]float32{1, 2}), abi.Scalar[float32](3))
	require.NoError(t, err)
	assert.Equal(t, []float32{3, 6}, abi.MustView[float32](outs[0]))

	require.NoError(t, h.Close(ctx))
	closed = true
	logs.mu.Lock()
	logged := logs.bytes[hc.name]
	logs.mu.Unlock()
	assert.LessOrEqual(t, logged, int(cb.Limits.MaxLog)+4096, "guest log output above max_log")

	if !t.Failed() {
		hostileMu.Lock()
		if hostileResults[hc.name] == nil {
			hostileResults[hc.name] = map[string]hostileResult{}
		}
		hostileResults[hc.name][engine] = res
		hostileMu.Unlock()
	}
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

// hostileTable renders the results as the SECURITY.md table, then writes it
// (-security-doc) or checks the committed one.
func hostileTable(t *testing.T) {
	engines := []string{config.EngineWazero, config.EngineWasmtime}
	complete := true
	hostileMu.Lock()
	for _, hc := range hostileCases {
		for _, e := range engineNames() {
			if _, done := hostileResults[hc.name][e]; !done {
				complete = false
			}
		}
	}
	hostileMu.Unlock()
	if !complete {
		t.Log("hostile table: not every case ran (or passed) on every engine; docs/SECURITY.md not checked")
		return
	}
	// One message per kind, whatever the engine: where both engines
	// report the same kind, the message reads the same up to any engine
	// detail in parentheses.
	for _, hc := range hostileCases {
		r := hostileResults[hc.name]
		if a, b := r[config.EngineWazero], r[config.EngineWasmtime]; len(r) == 2 && a.kind == b.kind {
			assert.Equal(t, a.head, b.head, "%s: the engines word the same %s differently", hc.name, a.kind.Ident())
		}
	}
	cell := func(k host.Kind) string {
		if k == ok {
			return "ok"
		}
		return k.Ident()
	}
	ms := func(d time.Duration) string {
		if d < time.Millisecond {
			return "<1ms"
		}
		return d.Round(time.Millisecond).String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Generated by `go test ./host -run TestHostile -args -security-doc` (%s); every callback runs with a %v timeout and %s max_memory (8 MiB where noted), and must end within its timeout plus %v.\n\n",
		machine(), hostileTimeout, "1 MiB", hostileSlack)
	b.WriteString("| Case | What the guest does | Expected | wazero | wasmtime | Time to fail (wazero / wasmtime) |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	var notes []string
	for _, hc := range hostileCases {
		expected := cell(hc.kind)
		if hc.phase == atLoad {
			expected += " at load"
		}
		cells := make([]string, 2)
		times := make([]string, 2)
		for i, e := range engines {
			r, ran := hostileResults[hc.name][e]
			if !ran {
				cells[i], times[i] = "not run", "—"
				continue
			}
			cells[i] = cell(r.kind)
			if _, d := hc.differs[e]; d {
				cells[i] += fmt.Sprintf(" [%d]", len(notes)+1)
			}
			times[i] = ms(r.elapsed)
		}
		if hc.differs != nil {
			notes = append(notes, hc.why)
		}
		what := hc.what
		if hc.module == "wasi" {
			what += " (WASI granted)"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s / %s |\n", hc.name, what, expected, cells[0], cells[1], times[0], times[1])
	}
	if len(notes) > 0 {
		b.WriteString("\nWhere the engines differ:\n\n")
		for i, n := range notes {
			fmt.Fprintf(&b, "%d. %s.\n", i+1, n)
		}
	}
	table := b.String()

	if *securityDoc {
		require.NoError(t, writeDocRegion("hostile cases", table))
		t.Logf("rewrote the hostile-case table of %s", securityDocPath)
		return
	}
	committed, err := readDocRegion("hostile cases")
	require.NoError(t, err, "run: go test ./host -run TestHostile -args -security-doc")
	// Compare everything but measured times (and the wasmtime column when
	// this build has no wasmtime).
	mask := func(rows [][]string) [][]string {
		out := make([][]string, len(rows))
		for i, r := range rows {
			r = slices.Clone(r)
			if len(r) == 6 {
				r[5] = "*"
				if !wasmtime.Available {
					r[4] = "*"
				}
			}
			out[i] = r
		}
		return out
	}
	if !assert.Equal(t, mask(tableRows(table)), mask(tableRows(committed)),
		"docs/SECURITY.md's hostile-case table is stale: run go test ./host -run TestHostile -args -security-doc") {
		t.Log(table)
	}
}

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
//     no call.
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
// Adding imports shifts the index of every defined function, so every
// reference to a function index is rewritten: call, return_call and ref.func
// in code and constant expressions, element segments, exports, the start
// function, and the name section. Anything the rewriter does not understand
// (an unknown opcode, the GC proposal's type encodings) makes Instrument
// fail; the caller then runs the module with the engine's own interruption.
//
// The input must be a valid module, as its author built it: callers
// validate it first (internal/sandbox/internal/validate; engine.Compile
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
	"slices"
)

// Version changes whenever the rewrite's output changes; caches of
// rewritten or compiled modules include it in their keys.
const Version = 5

// Names of the injected imports and exports.
const (
	RefillModule = "callbox_meter"
	RefillName   = "refill"
	OverflowName = "overflow"
	// GrowDeniedName is called with the pages a refused memory.grow asked
	// for.
	GrowDeniedName = "grow_denied"
	BudgetExport   = ExportPrefix + "budget"
	StackExport    = ExportPrefix + "stack"
)

// Fuel rates of operations whose work grows with an operand. The
// instruction itself costs one unit like any other; these are charged on
// top, from the operand's value at run time, before the operation runs
// (after it, and only when it succeeds, for the two grows). They are set so
// that a unit of each buys about as much CPU as a unit of plain compiled
// code (0.1-0.2 ns) and never more than about a nanosecond, on either
// engine (BenchmarkFuelRate in internal/sandbox/internal/engine; docs/SECURITY.md gives the
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
	// MaxBlocks, when positive, refuses a function with more structured
	// control instructions (block, loop, if, try, try_table) than this:
	// wazero's compile time grows with their square (ErrTooManyBlocks).
	MaxBlocks int

	// inline keeps every loop's check inline (the shape before Version
	// 5), for tests that compare the two shapes.
	inline bool
}

// ErrUnsupported wraps every reason a module cannot be instrumented.
var ErrUnsupported = errors.New("module not instrumentable")

func unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsupported, fmt.Sprintf(format, args...))
}

// Section ids.
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
	secTag       = 13
)

// order is the position of each known section in a module.
var order = map[byte]int{secType: 1, secImport: 2, secFunction: 3, secTable: 4, secMemory: 5, secTag: 6,
	secGlobal: 7, secExport: 8, secStart: 9, secElement: 10, secDataCount: 11, secCode: 12, secData: 13}

type section struct {
	id   byte
	body []byte
}

type funcType struct {
	params  uint32
	ptypes  []byte // each parameter's type's first byte
	results []byte // raw value type encodings, one entry each
}

// Instrument returns the metered module.
func Instrument(wasm []byte, opts Options) ([]byte, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" || wasm[4] != 1 {
		return nil, unsupported("not a core module")
	}
	var secs []section
	r := &reader{b: wasm, pos: 8}
	for r.more() {
		id := r.byte()
		body := r.bytes(uint64(r.u32()))
		if r.err != nil {
			return nil, r.err
		}
		secs = append(secs, section{id, body})
	}
	m := &rewriter{opts: opts}
	if err := m.scan(secs); err != nil {
		return nil, err
	}
	return m.emit(secs)
}

// rewriter holds what the rewrite needs to know about the module.
type rewriter struct {
	opts           Options
	types          []funcType
	extraTypes     [][]byte // types appended by the rewrite, encoded
	funcTypes      []uint32 // type index of each defined function
	numFuncImports uint32
	numGlobals     uint32 // imported + defined
	addedImports   uint32
	refillType     uint32
	overflowType   uint32
	deniedType     uint32
	hookType       uint32
	refillFunc     uint32
	overflowFunc   uint32
	deniedFunc     uint32
	hookFunc       uint32 // the injected grow wrapper (a defined function)
	hasCode        bool
	hasMemory      bool
	hook           bool // GrowHook and there is code and a memory to hook
	budgetGlobal   uint32
	stackGlobal    uint32
	blockTypes     map[string]uint32 // type index of () -> results, by results

	// Reused across functions: the body being written and pass 1's check
	// points, so rewriting a large module allocates little.
	body   writer
	points []int
	costs  []int64
	frames []int
	ltypes []byte
}

// shift maps an original function index to its index after the rewrite.
func (m *rewriter) shift(idx uint32) uint32 {
	if idx >= m.numFuncImports {
		return idx + m.addedImports
	}
	return idx
}

func (m *rewriter) scan(secs []section) error {
	exports := map[string]bool{}
	for _, s := range secs {
		r := &reader{b: s.body}
		switch s.id {
		case secType:
			for n := r.u32(); n > 0 && r.err == nil; n-- {
				if form := r.byte(); form != 0x60 {
					return unsupported("type section uses form 0x%02x (GC proposal)", form)
				}
				var t funcType
				for k := r.u32(); k > 0 && r.err == nil; k-- {
					if r.pos < len(r.b) {
						t.ptypes = append(t.ptypes, r.b[r.pos])
					}
					r.skipValType()
					t.params++
				}
				for k := r.u32(); k > 0 && r.err == nil; k-- {
					start := r.pos
					r.skipValType()
					t.results = append(t.results, r.b[start:r.pos]...)
					if r.pos-start != 1 {
						return unsupported("reference result types")
					}
				}
				m.types = append(m.types, t)
			}
		case secImport:
			for n := r.u32(); n > 0 && r.err == nil; n-- {
				r.name()
				r.name()
				switch kind := r.byte(); kind {
				case 0x00:
					r.u32()
					m.numFuncImports++
				case 0x01:
					r.skipRefType()
					if r.skipLimits()&4 != 0 {
						return unsupported("64-bit table")
					}
				case 0x02:
					m.hasMemory = true
					if r.skipLimits()&4 != 0 {
						return unsupported("64-bit memory")
					}
				case 0x03:
					r.skipValType()
					r.byte()
					m.numGlobals++
				case 0x04:
					r.byte()
					r.u32()
				default:
					return unsupported("import kind 0x%02x", kind)
				}
			}
		case secFunction:
			for n := r.u32(); n > 0 && r.err == nil; n-- {
				m.funcTypes = append(m.funcTypes, r.u32())
			}
		case secCode:
			m.hasCode = true
		case secMemory:
			// Bulk operations are charged by their i32 length operand: a
			// 64-bit memory's would be i64.
			for n := r.u32(); n > 0 && r.err == nil; n-- {
				m.hasMemory = true
				if r.skipLimits()&4 != 0 {
					return unsupported("64-bit memory")
				}
			}
		case secTable:
			for n := r.u32(); n > 0 && r.err == nil; n-- {
				if r.pos < len(r.b) && r.b[r.pos] == 0x40 { // table with an initializer
					return unsupported("table with an initializer expression")
				}
				r.skipRefType()
				if r.skipLimits()&4 != 0 {
					return unsupported("64-bit table")
				}
			}
		case secGlobal:
			m.numGlobals += r.u32()
		case secExport:
			for n := r.u32(); n > 0 && r.err == nil; n-- {
				exports[r.name()] = true
				r.byte()
				r.u32()
			}
		}
		if r.err != nil {
			return fmt.Errorf("section %d: %w", s.id, r.err)
		}
	}
	for _, name := range []string{BudgetExport, StackExport} {
		if exports[name] {
			return unsupported("module already exports %q", name)
		}
	}
	for _, ti := range m.funcTypes {
		if ti >= uint32(len(m.types)) {
			return unsupported("function type index %d out of range", ti)
		}
	}
	m.blockTypes = map[string]uint32{}
	next := m.numFuncImports
	if m.opts.Meter {
		m.refillType = m.addType([]byte{0x60, 1, 0x7e, 1, 0x7e}) // (i64) -> i64
		m.overflowType = m.addType([]byte{0x60, 0, 0})           // () -> ()
		m.refillFunc, m.overflowFunc = next, next+1
		next += 2
		m.budgetGlobal = m.numGlobals
		m.stackGlobal = m.numGlobals + 1
	}
	m.hook = m.opts.GrowHook && m.hasCode && m.hasMemory
	if m.hook {
		m.deniedType = m.addType([]byte{0x60, 1, 0x7f, 0})     // (i32) -> ()
		m.hookType = m.addType([]byte{0x60, 1, 0x7f, 1, 0x7f}) // (i32) -> i32
		m.deniedFunc = next
		next++
	}
	m.addedImports = next - m.numFuncImports
	m.hookFunc = next + uint32(len(m.funcTypes))
	return nil
}

func (m *rewriter) addType(enc []byte) uint32 {
	m.extraTypes = append(m.extraTypes, enc)
	return uint32(len(m.types) + len(m.extraTypes) - 1)
}

// blockType returns the block type encoding for a block yielding results.
func (m *rewriter) blockType(results []byte) []byte {
	switch len(results) {
	case 0:
		return []byte{0x40}
	case 1:
		return results
	}
	key := string(results)
	idx, ok := m.blockTypes[key]
	if !ok {
		w := &writer{}
		w.byte(0x60)
		w.u32(0)
		w.u32(uint32(len(results)))
		w.raw(results)
		idx = m.addType(w.b)
		m.blockTypes[key] = idx
	}
	w := &writer{}
	w.s64(int64(idx))
	return w.b
}

// emit writes the rewritten module, creating the type, import, global and
// export sections when the module has none. Code is rewritten first, since
// it may append block types to the type section.
func (m *rewriter) emit(secs []section) ([]byte, error) {
	bodies := make([][]byte, len(secs))
	for i, s := range secs {
		if s.id == secCode {
			b, err := m.rewriteCode(s.body)
			if err != nil {
				return nil, err
			}
			bodies[i] = b
		}
	}
	out := &writer{}
	out.raw([]byte("\x00asm\x01\x00\x00\x00"))
	need := map[byte]bool{secType: true, secImport: m.addedImports > 0, secGlobal: m.opts.Meter, secExport: m.opts.Meter}
	flushMissing := func(before int) error {
		for _, id := range []byte{secType, secImport, secGlobal, secExport} {
			if need[id] && order[id] < before {
				body, err := m.rewrite(id, nil)
				if err != nil {
					return err
				}
				out.section(id, body)
				need[id] = false
			}
		}
		return nil
	}
	for i, s := range secs {
		if s.id != secCustom {
			pos, ok := order[s.id]
			if !ok {
				return nil, unsupported("unknown section %d", s.id)
			}
			if err := flushMissing(pos); err != nil {
				return nil, err
			}
		}
		body := bodies[i]
		if body == nil {
			var err error
			if body, err = m.rewrite(s.id, s.body); err != nil {
				return nil, fmt.Errorf("section %d: %w", s.id, err)
			}
		}
		if s.id == secCustom && body == nil {
			continue
		}
		out.section(s.id, body)
		need[s.id] = false
	}
	if !m.needed() {
		return nil, unsupported("nothing to instrument")
	}
	if err := flushMissing(len(order) + 1); err != nil {
		return nil, err
	}
	return out.b, nil
}

// needed reports whether the rewrite changes anything.
func (m *rewriter) needed() bool { return m.opts.Meter || m.hook }

// rewrite returns a section's new body; body is nil for a section the
// module lacks.
func (m *rewriter) rewrite(id byte, body []byte) ([]byte, error) {
	switch id {
	case secType:
		return m.rewriteTypes(body), nil
	case secImport:
		return m.rewriteImports(body), nil
	case secGlobal:
		return m.rewriteGlobals(body)
	case secExport:
		return m.rewriteExports(body)
	case secStart:
		r := &reader{b: body}
		idx := r.u32()
		if r.err != nil {
			return nil, r.err
		}
		w := &writer{}
		w.u32(m.shift(idx))
		return w.b, nil
	case secElement:
		return m.rewriteElements(body)
	case secFunction:
		return m.rewriteFunctions(body), nil
	case secCustom:
		return m.rewriteCustom(body), nil
	}
	return body, nil
}

func (m *rewriter) rewriteTypes(body []byte) []byte {
	w := &writer{}
	w.u32(uint32(len(m.types) + len(m.extraTypes)))
	if body != nil {
		r := &reader{b: body}
		r.u32()
		w.raw(body[r.pos:])
	}
	for _, t := range m.extraTypes {
		w.raw(t)
	}
	return w.b
}

func (m *rewriter) rewriteImports(body []byte) []byte {
	w := &writer{}
	var rest []byte
	n := uint32(0)
	if body != nil {
		r := &reader{b: body}
		n = r.u32()
		rest = body[r.pos:]
	}
	type imp struct {
		name string
		typ  uint32
	}
	var added []imp
	if m.opts.Meter {
		added = append(added, imp{RefillName, m.refillType}, imp{OverflowName, m.overflowType})
	}
	if m.hook {
		added = append(added, imp{GrowDeniedName, m.deniedType})
	}
	w.u32(n + uint32(len(added)))
	w.raw(rest)
	for _, a := range added {
		w.name(RefillModule)
		w.name(a.name)
		w.byte(0x00)
		w.u32(a.typ)
	}
	return w.b
}

// rewriteFunctions declares the grow wrapper after the module's functions.
func (m *rewriter) rewriteFunctions(body []byte) []byte {
	if !m.hook {
		return body
	}
	r := &reader{b: body}
	n := r.u32()
	w := &writer{}
	w.u32(n + 1)
	w.raw(body[r.pos:])
	w.u32(m.hookType)
	return w.b
}

// growHookBody is the injected wrapper around memory.grow:
//
//	(func (param $pages i32) (result i32) (local $r i32)
//	  (local.tee $r (memory.grow (local.get $pages)))
//	  (if (i32.eq (i32.const -1)) (then (call $grow_denied (local.get $pages))))
//	  (local.get $r))
func (m *rewriter) growHookBody() []byte {
	w := &writer{}
	w.raw([]byte{1, 1, 0x7f})       // one i32 local
	w.raw([]byte{0x20, 0, 0x40, 0}) // local.get 0; memory.grow 0
	w.raw([]byte{0x22, 1})          // local.tee 1
	w.raw([]byte{0x41, 0x7f, 0x46}) // i32.const -1; i32.eq
	w.raw([]byte{0x04, 0x40, 0x20, 0, 0x10})
	w.u32(m.deniedFunc) // if; local.get 0; call $grow_denied
	w.raw([]byte{0x0b, 0x20, 1, 0x0b})
	return w.b
}

func (m *rewriter) rewriteGlobals(body []byte) ([]byte, error) {
	w := &writer{}
	n := uint32(0)
	var r *reader
	if body != nil {
		r = &reader{b: body}
		n = r.u32()
	}
	if !m.opts.Meter {
		return body, nil
	}
	w.u32(n + 2)
	for i := uint32(0); i < n; i++ {
		start := r.pos
		r.skipValType()
		r.byte()
		w.raw(body[start:r.pos])
		if err := m.copyConstExpr(r, w); err != nil {
			return nil, err
		}
	}
	if r != nil && r.err != nil {
		return nil, r.err
	}
	w.raw([]byte{0x7e, 0x01, 0x42, 0x00, 0x0b}) // budget: (mut i64) (i64.const 0)
	w.raw([]byte{0x7e, 0x01, 0x42})             // stack: (mut i64) (i64.const -limit)
	w.s64(-m.opts.StackLimit)
	w.byte(0x0b)
	return w.b, nil
}

func (m *rewriter) rewriteExports(body []byte) ([]byte, error) {
	if !m.opts.Meter && m.addedImports == 0 {
		return body, nil
	}
	w := &writer{}
	n := uint32(0)
	var r *reader
	if body != nil {
		r = &reader{b: body}
		n = r.u32()
	}
	added := uint32(0)
	if m.opts.Meter {
		added = 2
	}
	w.u32(n + added)
	for i := uint32(0); i < n; i++ {
		w.name(r.name())
		kind := r.byte()
		idx := r.u32()
		if kind == 0x00 {
			idx = m.shift(idx)
		}
		w.byte(kind)
		w.u32(idx)
	}
	if r != nil && r.err != nil {
		return nil, r.err
	}
	if m.opts.Meter {
		w.name(BudgetExport)
		w.byte(0x03)
		w.u32(m.budgetGlobal)
		w.name(StackExport)
		w.byte(0x03)
		w.u32(m.stackGlobal)
	}
	return w.b, nil
}

// rewriteElements remaps function indices in all eight element segment
// forms.
func (m *rewriter) rewriteElements(body []byte) ([]byte, error) {
	r := &reader{b: body}
	w := &writer{}
	n := r.u32()
	w.u32(n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		flags := r.u32()
		w.u32(flags)
		if flags > 7 {
			return nil, unsupported("element segment flags %d", flags)
		}
		if flags&1 == 0 { // active
			if flags&2 != 0 {
				w.u32(r.u32()) // table index
			}
			if err := m.copyConstExpr(r, w); err != nil {
				return nil, err
			}
		}
		exprs := flags&4 != 0
		if flags&3 != 0 { // elemkind or reftype
			if exprs {
				start := r.pos
				r.skipRefType()
				w.raw(r.b[start:r.pos])
			} else {
				w.byte(r.byte())
			}
		}
		count := r.u32()
		w.u32(count)
		for j := uint32(0); j < count && r.err == nil; j++ {
			if exprs {
				if err := m.copyConstExpr(r, w); err != nil {
					return nil, err
				}
			} else {
				w.u32(m.shift(r.u32()))
			}
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return w.b, nil
}

// copyConstExpr copies a constant expression up to and including its end,
// remapping ref.func.
func (m *rewriter) copyConstExpr(r *reader, w *writer) error {
	for r.err == nil {
		start := r.pos
		op := r.byte()
		switch op {
		case 0x0b:
			w.byte(op)
			return nil
		case 0xd2:
			w.byte(op)
			w.u32(m.shift(r.u32()))
			continue
		}
		r.pos = start
		if err := r.skipInstr(); err != nil {
			return err
		}
		w.raw(r.b[start:r.pos])
	}
	return r.err
}

// rewriteCustom rewrites the function indices of the name section and keeps
// every other custom section as is. A name section it cannot parse is
// dropped (nil): it only feeds stack traces.
func (m *rewriter) rewriteCustom(body []byte) []byte {
	r := &reader{b: body}
	name := r.name()
	if r.err != nil || name != "name" {
		return body
	}
	w := &writer{}
	w.name(name)
	for r.more() {
		id := r.byte()
		sub := r.bytes(uint64(r.u32()))
		if r.err != nil {
			return nil
		}
		if id != 1 && id != 2 {
			w.byte(id)
			w.u32(uint32(len(sub)))
			w.raw(sub)
			continue
		}
		sr := &reader{b: sub}
		sw := &writer{}
		n := sr.u32()
		sw.u32(n)
		for i := uint32(0); i < n && sr.err == nil; i++ {
			sw.u32(m.shift(sr.u32()))
			if id == 1 {
				sw.name(sr.name())
				continue
			}
			k := sr.u32() // local names: a name map per function
			sw.u32(k)
			for j := uint32(0); j < k && sr.err == nil; j++ {
				sw.u32(sr.u32())
				sw.name(sr.name())
			}
		}
		if sr.err != nil {
			return nil
		}
		w.byte(id)
		w.u32(uint32(len(sw.b)))
		w.raw(sw.b)
	}
	return w.b
}

// rewriteCode instruments every function body.
func (m *rewriter) rewriteCode(body []byte) ([]byte, error) {
	r := &reader{b: body}
	w := &writer{b: make([]byte, 0, len(body)+len(body)/4+64)}
	n := r.u32()
	if n != uint32(len(m.funcTypes)) {
		return nil, unsupported("%d function bodies for %d functions", n, len(m.funcTypes))
	}
	hook := m.hook
	if hook {
		w.u32(n + 1)
	} else {
		w.u32(n)
	}
	for i := uint32(0); i < n && r.err == nil; i++ {
		fn := r.bytes(uint64(r.u32()))
		if r.err != nil {
			break
		}
		out, err := m.instrumentFunc(fn, m.types[m.funcTypes[i]])
		if err != nil {
			return nil, fmt.Errorf("function %d: %w", m.numFuncImports+i, err)
		}
		w.u32(uint32(len(out)))
		w.raw(out)
	}
	if r.err != nil {
		return nil, r.err
	}
	if hook {
		body := m.growHookBody()
		w.u32(uint32(len(body)))
		w.raw(body)
	}
	return w.b, nil
}

// instrumentFunc rewrites one body:
//
//	<locals>
//	<stack check: counter += frame; trap when positive>
//	<budget check: charge segment 0>
//	block (result T...)  <original code, with a budget check after every
//	                      loop header, a stack release before every return
//	                      and tail call, and function indices remapped>
//	end
//	<stack release: counter -= frame>
//	end
func (m *rewriter) instrumentFunc(fn []byte, typ funcType) ([]byte, error) {
	r := &reader{b: fn}
	numLocals := uint64(typ.params)
	groups := r.u32()
	ltypes := append(m.ltypes[:0], typ.ptypes...)
	defer func() { m.ltypes = ltypes }()
	for n := groups; n > 0 && r.err == nil; n-- {
		k := r.u32()
		numLocals += uint64(k)
		if r.pos < len(r.b) && len(ltypes)+int(k) <= 1<<16 {
			for c := r.b[r.pos]; k > 0; k-- {
				ltypes = append(ltypes, c)
			}
		}
		r.skipValType()
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(fn) == r.pos || fn[len(fn)-1] != 0x0b {
		return nil, unsupported("function body does not end with end")
	}
	locals := fn[:r.pos]
	code, last := r.pos, len(fn)-1 // the final end is fn[last]
	frame := int64(min(numLocals, 1<<40))*8 + FrameOverhead

	// Pass 1: find check points (entry, and after each loop header) and the
	// instruction count of the segment each one starts.
	// It also counts blocks and notes bulk operations.
	points := append(m.points[:0], code)
	costs := append(m.costs[:0], 0)
	defer func() { m.points, m.costs = points, costs }()
	blocks, bulk, handlers := 0, false, false
	for r.pos < last && r.err == nil {
		start := r.pos
		op := r.b[r.pos]
		if err := r.skipInstr(); err != nil {
			return nil, err
		}
		costs[len(costs)-1]++
		switch op {
		case 0x02, 0x03, 0x04, 0x06, 0x1f: // block, loop, if, try, try_table
			if blocks++; m.opts.MaxBlocks > 0 && blocks > m.opts.MaxBlocks {
				return nil, fmt.Errorf("%w: more than %d", ErrTooManyBlocks, m.opts.MaxBlocks)
			}
			if op == 0x03 { // loop: a new segment starts after its block type
				points = append(points, r.pos)
				costs = append(costs, 0)
			}
			if op == 0x06 || op == 0x1f {
				handlers = true
			}
		case 0x40: // memory.grow
			bulk = true
		case 0xfc:
			if bulkCharge(fn, start) != chargeNone {
				bulk = true
			}
		}
	}
	if r.pos != last {
		return nil, unsupported("function body runs past its end")
	}

	// Pass 2: copy, inserting checks and remapping indices. A function
	// with loops keeps the budget in an added local while it runs, so the
	// check inside a loop touches a register, not the global in memory;
	// the global is written back before calls and exits and reloaded after
	// calls. The result is valid until the next call of instrumentFunc.
	w := &m.body
	w.b = w.b[:0]
	meter := m.opts.Meter
	ins := &inserter{m: m, frame: frame, local: -1, tmp: -1, frames: m.frames[:0], ltypes: ltypes}
	defer func() { m.frames = ins.frames }()
	// Loops get the retry shape (inserter.copyControl) unless the function
	// has exception handlers, whose labels (catch clauses, delegate,
	// rethrow) the relabeling does not follow, or the shape's two extra
	// blocks per loop would take it past MaxBlocks: wazero's compile time
	// grows with the square of a function's blocks, and this keeps the
	// rewrite's worst case where the inline shape had it.
	loops := len(points) - 1
	ins.retry = meter && !handlers && !m.opts.inline && (m.opts.MaxBlocks <= 0 || blocks+2*loops <= m.opts.MaxBlocks)
	if meter && (len(points) > 1 || bulk) {
		ins.local = int64(numLocals)
		lr := &reader{b: fn}
		lr.u32()
		added := uint32(1)
		if bulk {
			added++
		}
		w.u32(groups + added)
		w.raw(fn[lr.pos:code])
		w.raw([]byte{1, 0x7e}) // one i64: the budget
		if bulk {
			// Two i32s: a bulk operation's length, a grow's result.
			ins.tmp = int64(numLocals) + 1
			w.raw([]byte{2, 0x7f})
		}
	} else {
		w.raw(locals)
	}
	if meter {
		m.stackCheck(w, frame)
		if ins.local >= 0 {
			w.byte(0x23)
			w.u32(m.budgetGlobal)
			w.byte(0x21)
			w.u32(uint32(ins.local))
		}
		ins.budgetCheck(w, costs[0])
		w.byte(0x02) // block
		w.raw(m.blockType(typ.results))
	}
	r = &reader{b: fn, pos: code}
	next := 1
	for r.pos < last {
		if ins.retry {
			copied, checked, err := ins.copyControl(r, w, costs, next)
			if err != nil {
				return nil, err
			}
			if checked {
				next++
			}
			if copied {
				continue
			}
		}
		if err := ins.copyInstr(r, w); err != nil {
			return nil, err
		}
		if meter && next < len(points) && r.pos == points[next] {
			ins.budgetCheck(w, costs[next])
			next++
		}
	}
	if meter {
		w.byte(0x0b) // end of the wrapping block
		ins.leave(w)
	}
	w.byte(0x0b)
	return w.b, r.err
}

// inserter emits the per-function instrumentation around copied code.
type inserter struct {
	m     *rewriter
	frame int64
	local int64 // the budget's local index, or -1 when the global is used directly
	tmp   int64 // the first of two i32 scratch locals for bulk charges, or -1
	// retry: loops get the retry shape, and branch labels are renumbered
	// past the added loops.
	retry bool
	// frames holds, for each open block of the original code, the labels
	// added around it (1 for a loop in the retry shape, else 0).
	frames []int
	// ltypes is the first byte of each local's type, parameters first
	// (may be short for functions with more than 65,536 locals).
	ltypes []byte
}

// copyControl copies the instruction at r when it is a control
// instruction whose labels the retry shape affects, and reports whether
// it was a loop given that shape (whose check it emitted, charging
// costs[next]). Other instructions are left for copyInstr.
//
// A loop with no parameters becomes
//
//	loop $retry (bt)                      ;; added, same block type
//	  (if (i64.lt_s (local.get $b) (i64.const 0))
//	    (local.set $b (i64.add (call $refill (local.get $b)) (i64.const cost))))
//	  loop $l (bt)                         ;; the original
//	    (local.set $b (i64.sub (local.get $b) (i64.const cost)))
//	    (br_if $retry (i64.lt_s (local.get $b) (i64.const 0)))
//	    ...body...
//	  end
//	end
//
// so the hot loop holds no call: compilers that spill every value live
// across a call (wazero's register allocator) keep the loop's values in
// registers. Leaving the loop at its header and entering it again is
// exact — a loop without parameters carries its state in locals — and the
// refilled budget gets the iteration's cost back, since the loop charges
// it again: fuel counts are those of the inline shape.
func (in *inserter) copyControl(r *reader, w *writer, costs []int64, next int) (copied, checked bool, err error) {
	start := r.pos
	switch op := r.b[r.pos]; op {
	case 0x02, 0x04: // block, if
		in.frames = append(in.frames, 0)
	case 0x03: // loop
		r.pos++
		bt := r.pos
		r.skipBlockType()
		if r.err != nil {
			return false, false, r.err
		}
		if in.local < 0 || next >= len(costs) || in.blockParams(r.b[bt:r.pos]) {
			in.frames = append(in.frames, 0)
			r.pos = start
			return false, false, nil
		}
		cost := costs[next]
		l := uint32(in.local)
		w.byte(0x03)
		w.raw(r.b[bt:r.pos])
		w.raw([]byte{0x02, 0x40}) // block
		w.byte(0x20)
		w.u32(l)
		w.raw([]byte{0x42, 0x00, 0x59, 0x0d, 0x00}) // i64.const 0; i64.ge_s; br_if 0
		w.byte(0x20)
		w.u32(l)
		w.byte(0x10)
		w.u32(in.m.refillFunc)
		w.byte(0x42)
		w.s64(cost)
		w.byte(0x7c) // i64.add
		w.byte(0x21)
		w.u32(l)
		w.byte(0x0b)
		if !slices.Contains(in.frames, 1) {
			in.touch(w, r.b, r.pos, l)
		}
		w.byte(0x03)
		w.raw(r.b[bt:r.pos])
		w.byte(0x20)
		w.u32(l)
		w.byte(0x42)
		w.s64(cost)
		w.byte(0x7d) // i64.sub
		w.byte(0x22)
		w.u32(l)                                                      // local.tee
		w.raw([]byte{0x42, 0x00, 0x53, 0x04, 0x40, 0x0c, 0x02, 0x0b}) // i64.const 0; i64.lt_s; if; br 2; end
		in.frames = append(in.frames, 1)
		return true, true, nil
	case 0x0b: // end of a block (the function's own end is not copied here)
		if len(in.frames) == 0 {
			return false, false, unsupported("unbalanced end")
		}
		added := in.frames[len(in.frames)-1]
		in.frames = in.frames[:len(in.frames)-1]
		w.byte(0x0b)
		for ; added > 0; added-- {
			w.byte(0x0b)
		}
		r.pos++
		return true, false, nil
	case 0x0c, 0x0d: // br, br_if
		r.pos++
		d := r.u32()
		w.byte(op)
		w.u32(in.label(d))
		return true, false, r.err
	case 0x0e: // br_table
		r.pos++
		n := r.u32()
		if r.err != nil {
			return false, false, r.err
		}
		w.byte(op)
		w.u32(n)
		for k := uint64(0); k <= uint64(n) && r.err == nil; k++ {
			w.u32(in.label(r.u32()))
		}
		return true, false, r.err
	}
	return false, false, nil
}

// maxTouched bounds the locals touch reads before one loop.
const maxTouched = 12

// touch emits, before a loop whose body starts at b[pos], a read of each
// scalar local the loop reads (at most maxTouched, in order of first
// read), folded into nothing: (local.set $b (i64.add (local.get $b)
// (i64.extend_i32_u (i32.and (i32.or x...) (i32.const 0))))). It runs once
// per entry into the loop, not per iteration. Its purpose is the register
// allocator's: wazero's reloads a value that lives across a call (the
// refill just before) at each use, and a loop header inherits the
// registers of the block before it, so a value first used inside the loop
// would be reloaded from the stack on every iteration; read once here, it
// enters the loop in a register.
func (in *inserter) touch(w *writer, b []byte, pos int, budget uint32) {
	r := &reader{b: b, pos: pos}
	var seen [maxTouched]uint32
	n := 0
	for depth := 1; depth > 0 && r.more() && n < maxTouched; {
		op := r.b[r.pos]
		start := r.pos
		if r.skipInstr() != nil {
			return
		}
		switch op {
		case 0x02, 0x03, 0x04, 0x06, 0x1f:
			depth++
		case 0x0b:
			depth--
		case 0x20, 0x22: // local.get, local.tee
			lr := &reader{b: b, pos: start + 1}
			x := lr.u32()
			if int(x) >= len(in.ltypes) || uint32(x) == budget || slices.Contains(seen[:n], x) {
				continue
			}
			switch in.ltypes[x] {
			case 0x7f, 0x7e, 0x7d, 0x7c:
				seen[n] = x
				n++
			}
		}
	}
	if n == 0 {
		return
	}
	for k, x := range seen[:n] {
		w.byte(0x20)
		w.u32(x)
		switch in.ltypes[x] {
		case 0x7e:
			w.byte(0xa7) // i32.wrap_i64
		case 0x7d:
			w.byte(0xbc) // i32.reinterpret_f32
		case 0x7c:
			w.byte(0xbd) // i64.reinterpret_f64
			w.byte(0xa7)
		}
		if k > 0 {
			w.byte(0x72) // i32.or
		}
	}
	w.raw([]byte{0x41, 0x00, 0x71, 0xad}) // i32.const 0; i32.and; i64.extend_i32_u
	w.byte(0x20)
	w.u32(budget)
	w.byte(0x7c) // i64.add
	w.byte(0x21)
	w.u32(budget)
}

// label renumbers a branch's label depth past the labels added inside it.
func (in *inserter) label(d uint32) uint32 {
	out := d
	for k := 0; k < int(d) && k < len(in.frames); k++ {
		out += uint32(in.frames[len(in.frames)-1-k])
	}
	return out
}

// blockParams reports whether a block type (its encoding) takes
// parameters.
func (in *inserter) blockParams(bt []byte) bool {
	if len(bt) == 1 && (bt[0] == 0x40 || bt[0] >= 0x6f) || len(bt) > 0 && (bt[0] == 0x63 || bt[0] == 0x64) {
		return false
	}
	r := &reader{b: bt}
	idx := int64(r.leb(5)) // s33, non-negative for a type index
	return idx < 0 || int(idx) >= len(in.m.types) || in.m.types[idx].params > 0
}

// How a 0xfc-prefixed operation is charged beyond its one unit.
type chargeKind int

const (
	chargeNone     chargeKind = iota
	chargeBytes               // its length operand in bytes, at BytesPerFuel
	chargeElements            // its length operand in table elements
	chargeGrow                // table.grow: its delta, when it succeeds
)

// bulkCharge classifies the 0xfc-prefixed instruction at fn[pos].
func bulkCharge(fn []byte, pos int) chargeKind {
	r := &reader{b: fn, pos: pos + 1}
	switch r.u32() {
	case 8, 10, 11: // memory.init, memory.copy, memory.fill
		return chargeBytes
	case 12, 14, 17: // table.init, table.copy, table.fill
		return chargeElements
	case 15: // table.grow
		return chargeGrow
	}
	return chargeNone
}

// copyInstr copies one instruction, remapping function indices, syncing a
// cached budget around calls, and releasing the frame before anything that
// leaves the function directly.
func (in *inserter) copyInstr(r *reader, w *writer) error {
	m := in.m
	start := r.pos
	switch op := r.byte(); op {
	case 0x10: // call
		in.store(w)
		w.byte(op)
		w.u32(m.shift(r.u32()))
		in.load(w)
		return r.err
	case 0xd2: // ref.func
		w.byte(op)
		w.u32(m.shift(r.u32()))
		return r.err
	case 0x11, 0x14: // call_indirect, call_ref
		r.pos = start
		if err := r.skipInstr(); err != nil {
			return err
		}
		in.store(w)
		w.raw(r.b[start:r.pos])
		in.load(w)
		return nil
	case 0x12: // return_call
		in.leave(w)
		w.byte(op)
		w.u32(m.shift(r.u32()))
		return r.err
	case 0x0f, 0x13, 0x15: // return, return_call_indirect, return_call_ref
		in.leave(w)
	case 0x08, 0x09, 0x0a: // throw, rethrow, throw_ref
		in.store(w)
	case 0x40: // memory.grow
		if in.tmp >= 0 {
			in.setTmp(w, 0)
		}
		if m.hook {
			if mem := r.u32(); mem != 0 {
				return unsupported("memory.grow of memory %d", mem)
			}
			w.byte(0x10)
			w.u32(m.hookFunc)
		} else {
			r.pos = start
			if err := r.skipInstr(); err != nil {
				return err
			}
			w.raw(r.b[start:r.pos])
		}
		if in.tmp >= 0 {
			in.chargeIfGrown(w, chargeGrowPages)
		}
		return r.err
	case 0xfc:
		if in.tmp < 0 {
			break
		}
		switch kind := bulkCharge(r.b, start); kind {
		case chargeBytes, chargeElements:
			in.setTmp(w, 0)
			in.charge(w, kind)
		case chargeGrow:
			in.setTmp(w, 0)
			r.pos = start
			if err := r.skipInstr(); err != nil {
				return err
			}
			w.raw(r.b[start:r.pos])
			in.chargeIfGrown(w, chargeElements)
			return nil
		}
	}
	r.pos = start
	if err := r.skipInstr(); err != nil {
		return err
	}
	w.raw(r.b[start:r.pos])
	return nil
}

// chargeGrowPages charges memory.grow's pages at PageFuel (only the inserter
// uses it).
const chargeGrowPages chargeKind = 100

// setTmp copies the operand on top of the stack (a length or delta) into
// scratch local k, leaving it on the stack.
func (in *inserter) setTmp(w *writer, k int64) {
	w.byte(0x22) // local.tee
	w.u32(uint32(in.tmp + k))
}

// charge subtracts the cost of the length in scratch local 0 from the
// cached budget, refilling when it runs out.
func (in *inserter) charge(w *writer, kind chargeKind) {
	l := uint32(in.local)
	w.byte(0x20)
	w.u32(l)
	w.byte(0x20)
	w.u32(uint32(in.tmp))
	w.byte(0xad) // i64.extend_i32_u
	switch kind {
	case chargeBytes: // (n + BytesPerFuel-1) / BytesPerFuel
		w.byte(0x42)
		w.s64(BytesPerFuel - 1)
		w.byte(0x7c) // i64.add
		w.byte(0x42)
		w.s64(BytesPerFuel)
		w.byte(0x80) // i64.div_u (a power of two: compiled as a shift)
	case chargeElements:
		if ElementFuel != 1 {
			w.byte(0x42)
			w.s64(ElementFuel)
			w.byte(0x7e) // i64.mul
		}
	case chargeGrowPages:
		w.byte(0x42)
		w.s64(PageFuel)
		w.byte(0x7e) // i64.mul
	}
	w.byte(0x7d) // i64.sub
	in.m.refillLocalIfSpent(w, l)
}

// chargeIfGrown follows a grow whose delta is in scratch local 0 and whose
// result (-1 when refused) is on the stack: it charges the delta when the
// grow succeeded and leaves the result on the stack.
func (in *inserter) chargeIfGrown(w *writer, kind chargeKind) {
	in.setTmp(w, 1)
	w.raw([]byte{0x41, 0x7f, 0x47, 0x04, 0x40}) // i32.const -1; i32.ne; if
	in.charge(w, kind)
	w.byte(0x0b)
	w.byte(0x20)
	w.u32(uint32(in.tmp + 1))
}

// store writes a cached budget back to the global.
func (in *inserter) store(w *writer) {
	if in.local >= 0 {
		w.byte(0x20)
		w.u32(uint32(in.local))
		w.byte(0x24)
		w.u32(in.m.budgetGlobal)
	}
}

// load refreshes a cached budget from the global after a call.
func (in *inserter) load(w *writer) {
	if in.local >= 0 {
		w.byte(0x23)
		w.u32(in.m.budgetGlobal)
		w.byte(0x21)
		w.u32(uint32(in.local))
	}
}

// leave runs before the function returns: budget written back, frame
// released.
func (in *inserter) leave(w *writer) {
	in.store(w)
	in.m.stackRelease(w, in.frame)
}

// budgetCheck charges cost and refills the budget when it runs out, on the
// cached local when there is one.
func (in *inserter) budgetCheck(w *writer, cost int64) {
	if in.local < 0 {
		in.m.budgetCheck(w, cost)
		return
	}
	l := uint32(in.local)
	w.byte(0x20)
	w.u32(l)
	w.byte(0x42)
	w.s64(-cost)
	w.byte(0x7c) // i64.add
	in.m.refillLocalIfSpent(w, l)
}

// refillLocalIfSpent follows a budget value on the stack: it stores it in
// local l and, when it is negative, calls the refill import with it and
// stores the refilled budget back.
func (m *rewriter) refillLocalIfSpent(w *writer, l uint32) {
	w.byte(0x22)
	w.u32(l)                                    // local.tee
	w.raw([]byte{0x42, 0x00, 0x53, 0x04, 0x40}) // i64.const 0; i64.lt_s; if
	w.byte(0x20)
	w.u32(l) // local.get
	w.byte(0x10)
	w.u32(m.refillFunc) // call refill
	w.byte(0x21)
	w.u32(l) // local.set
	w.byte(0x0b)
}

// budgetCheck emits the budget check charging cost.
func (m *rewriter) budgetCheck(w *writer, cost int64) {
	g := m.budgetGlobal
	m.addToGlobal(w, g, -cost)
	w.byte(0x23)
	w.u32(g)
	w.raw([]byte{0x42, 0x00, 0x53, 0x04, 0x40}) // i64.const 0; i64.lt_s; if
	w.byte(0x23)
	w.u32(g)
	w.byte(0x10)
	w.u32(m.refillFunc)
	w.byte(0x24)
	w.u32(g)
	w.byte(0x0b)
}

// stackCheck charges a frame and calls overflow when the limit is passed.
func (m *rewriter) stackCheck(w *writer, frame int64) {
	g := m.stackGlobal
	m.addToGlobal(w, g, frame)
	w.byte(0x23)
	w.u32(g)
	w.raw([]byte{0x42, 0x00, 0x55, 0x04, 0x40}) // i64.const 0; i64.gt_s; if
	w.byte(0x10)
	w.u32(m.overflowFunc)
	w.byte(0x0b)
}

// stackRelease returns a frame's bytes.
func (m *rewriter) stackRelease(w *writer, frame int64) {
	if m.opts.Meter {
		m.addToGlobal(w, m.stackGlobal, -frame)
	}
}

// addToGlobal emits global.get g; i64.const delta; i64.add; global.set g.
func (m *rewriter) addToGlobal(w *writer, g uint32, delta int64) {
	w.byte(0x23)
	w.u32(g)
	w.byte(0x42)
	w.s64(delta)
	w.byte(0x7c) // i64.add
	w.byte(0x24)
	w.u32(g)
}

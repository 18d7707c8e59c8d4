// Package meter instruments a WebAssembly module at load time with a budget
// counter, so an engine without cheap interruption (wazero) can enforce
// timeouts and fuel from inside the guest's own thread.
//
// The rewrite adds one mutable i64 global, the budget, exported as
// BudgetExport, and one imported function, RefillModule.RefillName of type
// (i64) -> i64. At every function entry and at the top of every loop body
// it inserts
//
//	global.get $budget; i64.const cost; i64.sub; global.set $budget
//	global.get $budget; i64.const 0; i64.lt_s
//	if  global.get $budget; call $refill; global.set $budget  end
//
// where cost is the number of instructions of the straight-line segment that
// starts there (up to the next loop header or the end of the function): an
// upper bound of the instructions that run before the next check. Every
// path that can run for long passes a check — a loop iterates through its
// header, recursion through function entries — so the host's refill, which
// reads the clock and the fuel left, runs at least every budget's worth of
// instructions, on the guest's own thread, with no goroutine, signal or
// scheduler involved.
//
// Adding an import shifts the index of every defined function by one, so
// every reference to a function index is rewritten: call, return_call and
// ref.func in code and constant expressions, element segments, exports, the
// start function, and the name section. Anything the rewriter does not
// understand (an unknown opcode, the GC proposal's type encodings) makes
// Instrument fail; the caller then runs the module uninstrumented with the
// engine's own interruption instead.
package meter

import (
	"errors"
	"fmt"
)

// Names of the injected import and export.
const (
	RefillModule = "callbox_meter"
	RefillName   = "refill"
	BudgetExport = "callbox_meter_budget"
)

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

// Instrument returns the metered module.
func Instrument(wasm []byte) ([]byte, error) {
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
	m := &rewriter{}
	if err := m.scan(secs); err != nil {
		return nil, err
	}
	return m.emit(secs)
}

// rewriter holds what the rewrite needs to know about the module.
type rewriter struct {
	numTypes       uint32
	numFuncImports uint32
	numGlobals     uint32 // imported + defined
	refillType     uint32 // index of the (i64) -> i64 type (appended)
	refillFunc     uint32 // index of the injected import
	budgetGlobal   uint32 // index of the injected global
	exportNames    map[string]bool
}

// shift maps an original function index to its index after the rewrite.
func (m *rewriter) shift(idx uint32) uint32 {
	if idx >= m.numFuncImports {
		return idx + 1
	}
	return idx
}

func (m *rewriter) scan(secs []section) error {
	m.exportNames = map[string]bool{}
	for _, s := range secs {
		r := &reader{b: s.body}
		switch s.id {
		case secType:
			n := r.u32()
			for i := uint32(0); i < n && r.err == nil; i++ {
				if form := r.byte(); form != 0x60 {
					return unsupported("type section uses form 0x%02x (GC proposal)", form)
				}
				r.skipValTypes()
				r.skipValTypes()
			}
			m.numTypes = n
		case secImport:
			for n := r.u32(); n > 0 && r.err == nil; n-- {
				r.name()
				r.name()
				kind := r.byte()
				switch kind {
				case 0x00:
					r.u32()
					m.numFuncImports++
				case 0x01:
					r.skipRefType()
					r.skipLimits()
				case 0x02:
					r.skipLimits()
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
		case secGlobal:
			m.numGlobals += r.u32()
		case secExport:
			for n := r.u32(); n > 0 && r.err == nil; n-- {
				m.exportNames[r.name()] = true
				r.byte()
				r.u32()
			}
		}
		if r.err != nil {
			return fmt.Errorf("section %d: %w", s.id, r.err)
		}
	}
	if m.exportNames[BudgetExport] {
		return unsupported("module already exports %q", BudgetExport)
	}
	m.refillType = m.numTypes
	m.refillFunc = m.numFuncImports
	m.budgetGlobal = m.numGlobals
	return nil
}

// emit writes the rewritten module, creating the type, import and global
// sections when the module has none.
func (m *rewriter) emit(secs []section) ([]byte, error) {
	out := &writer{}
	out.raw([]byte("\x00asm\x01\x00\x00\x00"))
	need := map[byte]bool{secType: true, secImport: true, secGlobal: true, secExport: true}
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
	for _, s := range secs {
		if s.id != secCustom {
			pos, ok := order[s.id]
			if !ok {
				return nil, unsupported("unknown section %d", s.id)
			}
			if err := flushMissing(pos); err != nil {
				return nil, err
			}
		}
		body, err := m.rewrite(s.id, s.body)
		if err != nil {
			return nil, fmt.Errorf("section %d: %w", s.id, err)
		}
		if s.id == secCustom && body == nil {
			continue
		}
		out.section(s.id, body)
		need[s.id] = false
	}
	if err := flushMissing(len(order) + 1); err != nil {
		return nil, err
	}
	return out.b, nil
}

// rewrite returns a section's new body; body is nil for a section the
// module lacks.
func (m *rewriter) rewrite(id byte, body []byte) ([]byte, error) {
	switch id {
	case secType:
		return m.rewriteTypes(body)
	case secImport:
		return m.rewriteImports(body)
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
	case secCode:
		return m.rewriteCode(body)
	case secCustom:
		return m.rewriteCustom(body)
	}
	return body, nil
}

func (m *rewriter) rewriteTypes(body []byte) ([]byte, error) {
	w := &writer{}
	w.u32(m.numTypes + 1)
	if body != nil {
		r := &reader{b: body}
		r.u32()
		w.raw(body[r.pos:])
	}
	w.raw([]byte{0x60, 1, 0x7e, 1, 0x7e}) // (i64) -> i64
	return w.b, nil
}

func (m *rewriter) rewriteImports(body []byte) ([]byte, error) {
	w := &writer{}
	var rest []byte
	n := uint32(0)
	if body != nil {
		r := &reader{b: body}
		n = r.u32()
		rest = body[r.pos:]
	}
	w.u32(n + 1)
	w.raw(rest)
	w.name(RefillModule)
	w.name(RefillName)
	w.byte(0x00)
	w.u32(m.refillType)
	return w.b, nil
}

func (m *rewriter) rewriteGlobals(body []byte) ([]byte, error) {
	w := &writer{}
	n := uint32(0)
	if body != nil {
		r := &reader{b: body}
		n = r.u32()
		w.u32(n + 1)
		for i := uint32(0); i < n; i++ {
			start := r.pos
			r.skipValType()
			r.byte()
			w.raw(body[start:r.pos])
			if err := m.copyConstExpr(r, w); err != nil {
				return nil, err
			}
		}
		if r.err != nil {
			return nil, r.err
		}
	} else {
		w.u32(1)
	}
	w.raw([]byte{0x7e, 0x01, 0x42, 0x00, 0x0b}) // (mut i64) (i64.const 0)
	return w.b, nil
}

func (m *rewriter) rewriteExports(body []byte) ([]byte, error) {
	w := &writer{}
	n := uint32(0)
	var r *reader
	if body != nil {
		r = &reader{b: body}
		n = r.u32()
	}
	w.u32(n + 1)
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
	w.name(BudgetExport)
	w.byte(0x03)
	w.u32(m.budgetGlobal)
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
// dropped (it only feeds stack traces).
func (m *rewriter) rewriteCustom(body []byte) ([]byte, error) {
	r := &reader{b: body}
	name := r.name()
	if r.err != nil || name != "name" {
		return body, nil
	}
	w := &writer{}
	w.name(name)
	for r.more() {
		id := r.byte()
		sub := r.bytes(uint64(r.u32()))
		if r.err != nil {
			return nil, nil
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
			return nil, nil
		}
		w.byte(id)
		w.u32(uint32(len(sw.b)))
		w.raw(sw.b)
	}
	return w.b, nil
}

// rewriteCode instruments every function body.
func (m *rewriter) rewriteCode(body []byte) ([]byte, error) {
	r := &reader{b: body}
	w := &writer{}
	n := r.u32()
	w.u32(n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		fn := r.bytes(uint64(r.u32()))
		if r.err != nil {
			break
		}
		out, err := m.instrumentFunc(fn)
		if err != nil {
			return nil, fmt.Errorf("function %d: %w", m.numFuncImports+i, err)
		}
		w.u32(uint32(len(out)))
		w.raw(out)
	}
	if r.err != nil {
		return nil, r.err
	}
	return w.b, nil
}

// instrumentFunc rewrites one body: locals are copied, a check is inserted
// at entry and after every loop's block type, and function indices are
// remapped. Each check charges the instruction count of the segment it
// starts.
func (m *rewriter) instrumentFunc(fn []byte) ([]byte, error) {
	r := &reader{b: fn}
	for n := r.u32(); n > 0 && r.err == nil; n-- {
		r.u32()
		r.skipValType()
	}
	if r.err != nil {
		return nil, r.err
	}
	locals := fn[:r.pos]
	code := r.pos

	// Pass 1: find check points (entry, and after each loop header) and the
	// instruction count of the segment each one starts.
	points := []int{code}
	costs := []int64{0}
	for r.more() {
		op := r.b[r.pos]
		if err := r.skipInstr(); err != nil {
			return nil, err
		}
		costs[len(costs)-1]++
		if op == 0x03 { // loop: a new segment starts after its block type
			points = append(points, r.pos)
			costs = append(costs, 0)
		}
	}

	// Pass 2: copy, inserting checks and remapping indices.
	w := &writer{}
	w.raw(locals)
	r = &reader{b: fn, pos: code}
	next := 0
	for {
		if next < len(points) && r.pos == points[next] {
			m.check(w, costs[next])
			next++
		}
		if !r.more() {
			break
		}
		start := r.pos
		op := r.byte()
		switch op {
		case 0x10, 0x12, 0xd2: // call, return_call, ref.func
			w.byte(op)
			w.u32(m.shift(r.u32()))
			continue
		}
		r.pos = start
		if err := r.skipInstr(); err != nil {
			return nil, err
		}
		w.raw(fn[start:r.pos])
	}
	return w.b, r.err
}

// check emits the budget check charging cost.
func (m *rewriter) check(w *writer, cost int64) {
	g := m.budgetGlobal
	w.byte(0x23)
	w.u32(g)
	w.byte(0x42)
	w.s64(cost)
	w.byte(0x7d) // i64.sub
	w.byte(0x24)
	w.u32(g)
	w.byte(0x23)
	w.u32(g)
	w.raw([]byte{0x42, 0x00, 0x53, 0x04, 0x40}) // i64.const 0; i64.lt_s; if
	w.byte(0x23)
	w.u32(g)
	w.byte(0x10)
	w.u32(m.refillFunc)
	w.byte(0x24)
	w.u32(g)
	w.byte(0x0b) // end
}

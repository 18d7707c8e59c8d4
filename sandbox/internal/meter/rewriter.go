// rewriter.go: the rewriter: what it learns of the module (scan), the
// indices and types the rewrite adds, and the output (emit), which hands
// each section to its rewrite (rewrite; sections.go, code.go).

package meter

import "fmt"

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
	enterType      uint32
	exitType       uint32
	enterFunc      uint32 // the profiler's imports (Options.Profile)
	exitFunc       uint32
	hasCode        bool
	hasMemory      bool
	hook           bool // GrowHook and there is code and a memory to hook
	budgetGlobal   uint32
	stackGlobal    uint32
	blockTypes     map[string]uint32 // type index of () -> results, by results

	// smap, when set, collects the source map (InstrumentMapped); places
	// holds the function being copied's pairs.
	smap   *SourceMap
	places []uint64

	// Reused across functions: the body being written and pass 1's check
	// points, so rewriting a large module allocates little.
	body   writer
	points []int
	costs  []int64
	frames []int
	ltypes []byte
	// labelResults is inserter.results's storage.
	labelResults []bool
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
	if m.opts.Profile {
		if !m.opts.Meter {
			return unsupported("profiling needs the meter")
		}
		m.enterType = m.addType([]byte{0x60, 2, 0x7f, 0x7e, 0}) // (i32, i64) -> ()
		m.exitType = m.addType([]byte{0x60, 1, 0x7e, 0})        // (i64) -> ()
		m.enterFunc, m.exitFunc = next, next+1
		next += 2
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
		if s.id == secCode && m.smap != nil {
			m.smap.codeStart[0] = uint64(len(out.b) + 1 + ulebLen(uint64(len(body))))
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
func (m *rewriter) needed() bool { return m.opts.Meter || m.hook || m.opts.CanonicalNaN }

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

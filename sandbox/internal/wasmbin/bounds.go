package wasmbin

import "fmt"

// MaxFunctionLocals is the most locals one function may declare. It is the
// limit of wasmtime's validator (and of V8); wazero has none of its own.
const MaxFunctionLocals = 50000

// Decoder bombs. wazero's binary decoder allocates every vector at the
// length the module declares before reading a single element (make(T, n)
// for n up to 2^32-1), and sizes a function's locals by their declared sum.
// A module of a few hundred bytes can therefore make it allocate gigabytes,
// and a failed Go allocation of that size is a fatal error that no recover
// catches: the whole host process dies. Parse checks every count wazero
// allocates by against the bytes that remain (each element takes at least
// one byte), and the locals of every function against MaxFunctionLocals, so
// that no module that passes Parse can drive such an allocation. The checks
// below cover the sections Parse does not otherwise read.

// skipLEB skips one LEB128 number of at most maxBytes bytes.
func (r *reader) skipLEB(maxBytes int) {
	for i := 0; i < maxBytes; i++ {
		if r.byte()&0x80 == 0 || r.err != nil {
			return
		}
	}
	r.fail("LEB128 integer too long")
}

// constExpr skips a constant expression up to and including its end. It
// reports false, having consumed an unknown opcode, when the expression
// uses one it does not know; an engine that knows no more than ABI v1
// needs rejects that module before allocating anything after it. A
// global.get must read an imported immutable global (r.constGlobals), as
// WebAssembly 2.0 requires: wazero's validator does not check it, and
// callbox's validation must not depend on which engines a build has.
func (r *reader) constExpr() bool {
	for r.err == nil {
		switch op := r.byte(); op {
		case 0x0b: // end
			return true
		case 0x23: // global.get
			at := r.pos
			i := r.u32()
			switch {
			case r.err != nil:
			case uint64(i) >= uint64(len(r.constGlobals)):
				r.pos = at
				r.fail("a constant expression reads global %d, which is not an imported global (constant expression required)", i)
			case r.constGlobals[i]:
				r.pos = at
				r.fail("a constant expression reads global %d, which is mutable (constant expression required)", i)
			}
		case 0x41, 0xd2: // i32.const, ref.func
			r.skipLEB(5)
		case 0x42: // i64.const
			r.skipLEB(10)
		case 0x43: // f32.const
			r.bytes(4)
		case 0x44: // f64.const
			r.bytes(8)
		case 0xd0: // ref.null heaptype
			r.skipLEB(5)
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // extended-const add, sub, mul
		case 0xfd: // v128.const
			if r.u32() != 12 {
				return false
			}
			r.bytes(16)
		default:
			return false
		}
	}
	return false
}

// checkGlobals bounds the global section's count (type, mutability and an
// expression of at least one instruction and end: 4 bytes each) and reads
// every global's initialiser.
func checkGlobals(s *reader) {
	for n := s.count(4); n > 0 && s.err == nil; n-- {
		s.valType()
		s.byte()
		if !s.constExpr() {
			return
		}
	}
}

// checkElements bounds the element section's count and every segment's
// init vector.
func checkElements(s *reader) {
	for n := s.count(1); n > 0 && s.err == nil; n-- {
		flags := s.u32()
		if flags > 7 {
			s.fail("bad element segment flags %d", flags)
			return
		}
		if flags&2 != 0 && flags&1 == 0 { // explicit table index
			s.u32()
		}
		if flags&1 == 0 && !s.constExpr() { // active: offset expression
			return
		}
		if flags&3 != 0 { // elemkind or reftype
			if flags&4 != 0 {
				s.valType()
			} else {
				s.byte()
			}
		}
		items := s.count(1)
		for ; items > 0 && s.err == nil; items-- {
			if flags&4 == 0 {
				s.u32() // function index
			} else if !s.constExpr() {
				return
			}
		}
	}
}

// checkCode bounds the code section's count and every function's locals.
// imported is the number of imported functions (for the function index in
// messages).
func checkCode(s *reader, imported int) (bodies [][2]uint64) {
	n := s.count(1)
	for i := uint32(0); i < n && s.err == nil; i++ {
		size := s.u32()
		start := s.pos
		b := &reader{b: s.bytes(uint64(size))}
		if s.err != nil {
			return nil
		}
		bodies = append(bodies, [2]uint64{uint64(start), uint64(s.pos)})
		var sum uint64
		for decls := b.count(2); decls > 0 && b.err == nil; decls-- {
			sum += uint64(b.u32())
			b.valType()
			if sum > MaxFunctionLocals {
				s.pos = start
				s.fail("function %d declares more than %d locals", imported+int(i), MaxFunctionLocals)
				return nil
			}
		}
		if b.err != nil {
			s.pos = start + b.pos
			s.fail("function %d: %v", imported+int(i), b.err.(*Error).Msg)
			return nil
		}
	}
	return bodies
}

// checkData bounds the data section's count and every segment's bytes.
func checkData(s *reader) {
	for n := s.count(1); n > 0 && s.err == nil; n-- {
		switch flags := s.u32(); flags {
		case 0:
			if !s.constExpr() {
				return
			}
		case 1:
		case 2:
			s.u32()
			if !s.constExpr() {
				return
			}
		default:
			s.fail("bad data segment flags %d", flags)
			return
		}
		s.bytes(uint64(s.u32()))
	}
}

// checkNames bounds the name section, which wazero decodes: the module
// name, and the function and local name maps.
func checkNames(s *reader) {
	for s.err == nil && s.pos < len(s.b) {
		id := s.byte()
		sub := &reader{b: s.bytes(uint64(s.u32()))}
		if s.err != nil {
			return
		}
		switch id {
		case 0:
			sub.name()
		case 1:
			for n := sub.count(2); n > 0 && sub.err == nil; n-- {
				sub.u32()
				sub.name()
			}
		case 2:
			for n := sub.count(2); n > 0 && sub.err == nil; n-- {
				sub.u32()
				for k := sub.count(2); k > 0 && sub.err == nil; k-- {
					sub.u32()
					sub.name()
				}
			}
		}
		if sub.err != nil {
			s.fail("name subsection %d: %v", id, sub.err.(*Error).Msg)
			return
		}
		// wazero's decoder reads a known subsection's content from the
		// section itself, not from a reader of the subsection's declared
		// size: bytes left over would be read as the next subsection, where
		// a count of 4 billion local names made it allocate 39 GB and kill
		// the process (a 40-byte module, found by FuzzParse). The content
		// must fill the size exactly.
		if id <= 2 && sub.pos != len(sub.b) {
			s.fail("name subsection %d: %d bytes after its content (an engine would read them as the next subsection)", id, len(sub.b)-sub.pos)
			return
		}
	}
}

// LimitTables returns wasm with every table the module defines given a
// maximum, so that table.grow cannot allocate without bound on an engine
// that enforces no table limit of its own (wazero grows a table without a
// maximum up to 2^32-1 elements, 32 GiB of host memory). The maxima let all
// tables together hold at most total elements: a table keeps its declared
// maximum where that is lower, else gets its minimum plus an even share of
// what the minimums leave of total. Only the table section changes; the
// result is wasm itself when no table needs a new maximum.
//
// wasm must have been validated (this re-encodes the table section, and
// would write a malformed one back well-formed) and have passed Parse, and
// the tables' minimums must sum to at most total. Tables this function
// does not understand (table64, tables with an initialiser expression) are
// left as they are: neither is valid in ABI v1, and the engines reject or
// bound them.
func LimitTables(wasm []byte, total uint64) ([]byte, error) {
	if len(wasm) < 8 {
		return nil, ErrNotWasm
	}
	r := &reader{b: wasm, pos: 8}
	imported := uint64(0) // minimums of imported tables
	var types []*FuncType // for the imports' checked type indices
	for r.err == nil && r.pos < len(wasm) {
		start := r.pos
		id := r.byte()
		size := r.u32()
		bodyStart := r.pos
		body := r.bytes(uint64(size))
		if r.err != nil {
			return nil, r.err
		}
		switch id {
		case 1:
			types, _ = parseTypes(&reader{b: body})
		case 2:
			m := &Module{}
			s := &reader{b: body}
			parseImports(s, m, types, nil)
			if s.err != nil {
				return nil, s.err
			}
			// An imported table can grow to its declared maximum, which
			// counts against the total as it stands; one without a maximum
			// has no bound at all. (The host provides no tables, so such
			// modules are refused at load anyway; this keeps the bound true
			// of LimitTables alone.)
			for _, t := range m.Tables {
				if !t.HasMax {
					return nil, fmt.Errorf("imports a table without a maximum, which could grow past the limit of %d elements", total)
				}
				imported += t.Max
			}
		case 4:
			out, changed, err := limitTableSection(body, total, imported)
			if err != nil || !changed {
				return wasm, err
			}
			res := make([]byte, 0, len(wasm)+len(out))
			res = append(res, wasm[:start]...)
			res = append(res, id)
			res = appendULEB(res, uint64(len(out)))
			res = append(res, out...)
			res = append(res, wasm[bodyStart+len(body):]...)
			return res, nil
		}
	}
	return wasm, r.err
}

func limitTableSection(body []byte, total, imported uint64) ([]byte, bool, error) {
	type entry struct {
		ref      []byte
		min, max uint64
		hasMax   bool
	}
	s := &reader{b: body}
	n := s.count(2)
	entries := make([]entry, 0, n)
	sum := imported
	for ; n > 0 && s.err == nil; n-- {
		refStart := s.pos
		if s.pos < len(s.b) && s.b[s.pos] == 0x40 { // table with an initialiser
			return nil, false, nil
		}
		s.valType()
		ref := s.b[refStart:s.pos]
		flags := s.byte()
		if flags != 0 && flags != 1 { // table64 or malformed: not ours to fix
			return nil, false, nil
		}
		e := entry{ref: ref, min: s.uleb(32), hasMax: flags == 1}
		if e.hasMax {
			e.max = s.uleb(32)
		}
		sum += e.min
		entries = append(entries, e)
	}
	if s.err != nil {
		return nil, false, s.err
	}
	if len(entries) == 0 {
		return nil, false, nil
	}
	if sum > total {
		return nil, false, fmt.Errorf("tables declare %d elements in all, above the limit of %d", sum, total)
	}
	share := (total - sum) / uint64(len(entries))
	changed := false
	out := appendULEB(nil, uint64(len(entries)))
	for _, e := range entries {
		limit := e.min + share
		if !e.hasMax || e.max > limit {
			e.max, e.hasMax, changed = limit, true, true
		}
		out = append(out, e.ref...)
		out = append(out, 1)
		out = appendULEB(out, e.min)
		out = appendULEB(out, e.max)
	}
	return out, changed, nil
}

func appendULEB(b []byte, v uint64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

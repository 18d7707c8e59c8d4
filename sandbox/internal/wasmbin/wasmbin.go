// Package wasmbin reads the parts of a WebAssembly binary the host checks
// before handing it to an engine: imports, exports with their function
// types, memories, tables and custom sections. It does not validate code,
// so it accepts modules using features it does not itself understand, and it
// is written for hostile input: every length and count is checked against
// the bytes that remain — also in the sections it does not otherwise read
// (globals, elements, code, data, names), because an engine's decoder may
// allocate by them before reading (bounds.go).
package wasmbin

import (
	"errors"
	"fmt"
	"math"
)

// ExternKind is the kind of an import or export.
type ExternKind byte

// Import and export kinds.
const (
	KindFunc   ExternKind = 0
	KindTable  ExternKind = 1
	KindMemory ExternKind = 2
	KindGlobal ExternKind = 3
	KindTag    ExternKind = 4
)

func (k ExternKind) String() string {
	switch k {
	case KindFunc:
		return "func"
	case KindTable:
		return "table"
	case KindMemory:
		return "memory"
	case KindGlobal:
		return "global"
	case KindTag:
		return "tag"
	}
	return fmt.Sprintf("kind(%d)", byte(k))
}

// FuncType is a function signature; value types are the binary codes
// (0x7f i32, 0x7e i64, 0x7d f32, 0x7c f64, 0x7b v128, ...).
type FuncType struct {
	Params  []byte
	Results []byte
}

// String formats as "(i32, i32) -> i32".
func (t FuncType) String() string {
	return "(" + valTypes(t.Params) + ") -> (" + valTypes(t.Results) + ")"
}

func valTypes(vs []byte) string {
	s := ""
	for i, v := range vs {
		if i > 0 {
			s += ", "
		}
		s += ValTypeName(v)
	}
	return s
}

// ValTypeName names a value type code.
func ValTypeName(v byte) string {
	switch v {
	case 0x7f:
		return "i32"
	case 0x7e:
		return "i64"
	case 0x7d:
		return "f32"
	case 0x7c:
		return "f64"
	case 0x7b:
		return "v128"
	case 0x70:
		return "funcref"
	case 0x6f:
		return "externref"
	case 0x63:
		return "(ref null _)"
	case 0x64:
		return "(ref _)"
	}
	return fmt.Sprintf("type(0x%02x)", v)
}

// Limits are the bounds of a memory (in pages) or a table (in elements).
type Limits struct {
	Min    uint64
	Max    uint64
	HasMax bool
	Shared bool
	Is64   bool
}

// Import is one import of the module.
type Import struct {
	Module string
	Name   string
	Kind   ExternKind
	Func   *FuncType // for function imports whose type is known
	Limits *Limits   // for memory and table imports
	// Mutable is set for an imported mutable global.
	Mutable bool
}

// Export is one export of the module.
type Export struct {
	Name  string
	Kind  ExternKind
	Index uint32
	Func  *FuncType // for function exports whose type is known
}

// Module is what Parse reads from a binary.
type Module struct {
	Imports  []Import
	Exports  []Export
	Memories []Limits // imported memories first, then defined ones
	Tables   []Limits // imported tables first, then defined ones
	HasStart bool
	// GCTypes reports that the type section uses a form of the GC
	// proposal (a recursion group, a subtype, a struct or an array type),
	// which callbox does not enable.
	GCTypes bool
	// Custom maps a custom section name to the contents of every section of
	// that name, in order.
	Custom map[string][][]byte
	// CodeStart is the byte offset of the code section's contents in the
	// module, and Bodies each defined function's body, [start, end)
	// relative to it (the offsets DWARF and the engines' frames use).
	CodeStart uint64
	Bodies    [][2]uint64
}

// Export returns the export with the given name.
func (m *Module) Export(name string) (Export, bool) {
	for _, e := range m.Exports {
		if e.Name == name {
			return e, true
		}
	}
	return Export{}, false
}

// ErrNotWasm is returned for input that is not a WebAssembly core module.
var ErrNotWasm = errors.New("not a WebAssembly module (bad magic or version)")

// Error is a malformed binary; Offset is a byte offset into the file.
type Error struct {
	Offset int
	Msg    string
}

func (e *Error) Error() string { return fmt.Sprintf("malformed wasm at byte %d: %s", e.Offset, e.Msg) }

type reader struct {
	b   []byte
	pos int
	err error
	// constGlobals is the mutability of each global a constant
	// expression may read: the imported ones (WebAssembly 2.0; callbox
	// enables neither GC nor anything else that widens the rule).
	constGlobals []bool
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = &Error{Offset: r.pos, Msg: fmt.Sprintf(format, args...)}
	}
}

// peek returns the next byte without consuming it (0 at the end: the read
// that follows reports it).
func (r *reader) peek() byte {
	if r.err != nil || r.pos >= len(r.b) {
		return 0
	}
	return r.b[r.pos]
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.pos >= len(r.b) {
		r.fail("unexpected end of data")
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *reader) uleb(bits uint) uint64 {
	var v uint64
	var shift uint
	for {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if shift >= bits || shift == 63 && c > 1 {
			r.fail("LEB128 integer too long")
			return 0
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			if bits < 64 && v >= 1<<bits {
				r.fail("LEB128 integer out of range")
				return 0
			}
			return v
		}
		shift += 7
	}
}

func (r *reader) u32() uint32 { return uint32(r.uleb(32)) }

func (r *reader) bytes(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)-r.pos) {
		r.fail("length %d runs past the end of data", n)
		return nil
	}
	out := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return out
}

func (r *reader) name() string { return string(r.bytes(uint64(r.u32()))) }

// count reads a vector length and checks that at least min bytes per
// element remain, so a hostile count cannot drive a huge allocation.
func (r *reader) count(minBytes int) uint32 {
	n := r.u32()
	if r.err == nil && uint64(n)*uint64(minBytes) > uint64(len(r.b)-r.pos) {
		r.fail("count %d exceeds the remaining %d bytes", n, len(r.b)-r.pos)
		return 0
	}
	return n
}

func (r *reader) limits() Limits {
	flags := r.byte()
	var l Limits
	if flags > 0x07 {
		r.fail("bad limits flags 0x%02x", flags)
		return l
	}
	l.HasMax = flags&1 != 0
	l.Shared = flags&2 != 0
	l.Is64 = flags&4 != 0
	bits := uint(32)
	if l.Is64 {
		bits = 64
	}
	l.Min = r.uleb(bits)
	if l.HasMax {
		l.Max = r.uleb(bits)
	}
	return l
}

func (r *reader) tableType() Limits {
	r.valType() // the element type: a reference type
	return r.limits()
}

// sectionRank is the order of the known non-custom sections: type, import,
// function, table, memory, tag, global, export, start, element, data
// count, code, data.
var sectionRank = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

// Parse reads a module's structure. It does not validate code.
func Parse(wasm []byte) (*Module, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" || wasm[4] != 1 || wasm[5] != 0 || wasm[6] != 0 || wasm[7] != 0 {
		return nil, ErrNotWasm
	}
	m := &Module{Custom: map[string][][]byte{}}
	var types []*FuncType
	var funcTypes []uint32 // type index per function (imports first)
	r := &reader{b: wasm, pos: 8}
	lastRank := 0
	for r.err == nil && r.pos < len(wasm) {
		start := r.pos
		id := r.byte()
		size := r.u32()
		body := r.bytes(uint64(size))
		if r.err != nil {
			break
		}
		// Known sections appear at most once, in the spec's order, as
		// every engine requires; checking it here keeps a duplicated
		// section from hiding from these checks (and from LimitTables,
		// which rewrites the table section it finds).
		if rank := sectionRank[id]; rank != 0 {
			if rank <= lastRank {
				return nil, &Error{Offset: start, Msg: fmt.Sprintf("section %d is out of order or repeated", id)}
			}
			lastRank = rank
		}
		s := &reader{b: body}
		base := r.pos - len(body)
		switch id {
		case 0:
			name := s.name()
			if s.err == nil {
				m.Custom[name] = append(m.Custom[name], body[s.pos:])
			}
			if name == "name" {
				checkNames(s)
			}
		case 1:
			types, m.GCTypes = parseTypes(s)
		case 2:
			funcTypes = parseImports(s, m, types, funcTypes)
		case 3:
			for n := s.count(1); n > 0 && s.err == nil; n-- {
				funcTypes = append(funcTypes, s.funcTypeIndex(types))
			}
		case 4:
			for n := s.count(2); n > 0 && s.err == nil; n-- {
				m.Tables = append(m.Tables, s.tableType())
			}
		case 5:
			for n := s.count(2); n > 0 && s.err == nil; n-- {
				m.Memories = append(m.Memories, s.limits())
			}
		case 7:
			for n := s.count(3); n > 0 && s.err == nil; n-- {
				e := Export{Name: s.name(), Kind: ExternKind(s.byte()), Index: s.u32()}
				m.Exports = append(m.Exports, e)
			}
		case 6:
			s.constGlobals = importedGlobals(m)
			checkGlobals(s)
		case 8:
			s.u32()
			m.HasStart = true
		case 9:
			s.constGlobals = importedGlobals(m)
			checkElements(s)
		case 10:
			imported := 0
			for _, imp := range m.Imports {
				if imp.Kind == KindFunc {
					imported++
				}
			}
			m.CodeStart = uint64(base)
			m.Bodies = checkCode(s, imported)
		case 11:
			s.constGlobals = importedGlobals(m)
			checkData(s)
		case 13:
			s.count(2) // tags: attribute and type index
		}
		if s.err != nil {
			var we *Error
			if errors.As(s.err, &we) {
				return nil, &Error{Offset: base + we.Offset, Msg: fmt.Sprintf("section %d: %s", id, we.Msg)}
			}
			return nil, s.err
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	// Resolve the function types of exports.
	for i := range m.Exports {
		e := &m.Exports[i]
		if e.Kind == KindFunc && uint64(e.Index) < uint64(len(funcTypes)) {
			e.Func = typeAt(types, funcTypes[e.Index])
		}
	}
	return m, nil
}

// parseTypes reads the type section as the spec (and wazero) reads it:
// plain function types, recursion groups (0x4e) and subtypes (0x50, 0x4f)
// of the GC proposal, with reference value types (ref null? heaptype). It
// returns one entry per type index; a struct or array type's is nil, as it
// is no function's type. gc reports any form but a plain function type.
func parseTypes(s *reader) (types []*FuncType, gc bool) {
	n := s.count(2)
	types = make([]*FuncType, 0, min(n, math.MaxUint16))
	for ; n > 0 && s.err == nil; n-- {
		if s.peek() != 0x4e {
			if s.peek() != 0x60 {
				gc = true
			}
			types = append(types, s.subType())
			continue
		}
		gc = true
		s.byte()
		for k := s.count(1); k > 0 && s.err == nil; k-- {
			types = append(types, s.subType())
		}
	}
	return types, gc
}

// subType reads one subtype: (sub final? supertypes comptype) or a bare
// comptype.
func (r *reader) subType() *FuncType {
	if b := r.peek(); b == 0x50 || b == 0x4f {
		r.byte()
		for k := r.count(1); k > 0 && r.err == nil; k-- {
			r.u32()
		}
	}
	switch form := r.byte(); form {
	case 0x60: // func
		t := &FuncType{}
		for k := r.count(1); k > 0 && r.err == nil; k-- {
			t.Params = append(t.Params, r.valType())
		}
		for k := r.count(1); k > 0 && r.err == nil; k-- {
			t.Results = append(t.Results, r.valType())
		}
		return t
	case 0x5e: // array
		r.fieldType()
	case 0x5f: // struct
		for k := r.count(2); k > 0 && r.err == nil; k-- {
			r.fieldType()
		}
	default:
		r.fail("unknown type form 0x%02x", form)
	}
	return nil
}

// fieldType reads a struct or array field: a storage type (a value type or
// a packed i8 / i16) and its mutability.
func (r *reader) fieldType() {
	if b := r.peek(); b == 0x78 || b == 0x77 {
		r.byte()
	} else {
		r.valType()
	}
	r.byte()
}

// valType reads a value type (or a table's or element segment's reference
// type) and returns its code. A (ref null? heaptype)
// is returned as its prefix (0x63 or 0x64), its heap type skipped: no
// callbox ABI type is a reference, so the prefix is all a check compares.
func (r *reader) valType() byte {
	t := r.byte()
	if t == 0x63 || t == 0x64 {
		r.skipLEB(5)
	}
	return t
}

// funcTypeIndex reads a function's type index and checks that it names a
// function type. wazero indexes its type table with it unchecked when it
// validates a call (it panics on one out of range), and its metering rewrite
// with it too.
func (r *reader) funcTypeIndex(types []*FuncType) uint32 {
	at := r.pos
	i := r.u32()
	if r.err == nil && (uint64(i) >= uint64(len(types)) || types[i] == nil) {
		r.pos = at
		r.fail("function type index %d names no function type (the module has %d types)", i, len(types))
	}
	return i
}

// typeAt returns a copy of the function type at index i, nil when i is out
// of range or names a struct or array type.
func typeAt(types []*FuncType, i uint32) *FuncType {
	if uint64(i) >= uint64(len(types)) || types[i] == nil {
		return nil
	}
	t := *types[i]
	return &t
}

// importedGlobals is the mutability of each imported global, in index
// order: the globals a constant expression may read.
func importedGlobals(m *Module) []bool {
	var out []bool
	for _, imp := range m.Imports {
		if imp.Kind == KindGlobal {
			out = append(out, imp.Mutable)
		}
	}
	return out
}

func parseImports(s *reader, m *Module, types []*FuncType, funcTypes []uint32) []uint32 {
	for n := s.count(4); n > 0 && s.err == nil; n-- {
		imp := Import{Module: s.name(), Name: s.name(), Kind: ExternKind(s.byte())}
		switch imp.Kind {
		case KindFunc:
			ti := s.funcTypeIndex(types)
			funcTypes = append(funcTypes, ti)
			imp.Func = typeAt(types, ti)
		case KindTable:
			l := s.tableType()
			imp.Limits = &l
			m.Tables = append(m.Tables, l)
		case KindMemory:
			l := s.limits()
			imp.Limits = &l
			m.Memories = append(m.Memories, l)
		case KindGlobal:
			s.valType()
			imp.Mutable = s.byte() == 1
		case KindTag:
			s.byte()
			s.u32()
		default:
			s.fail("unknown import kind 0x%02x", byte(imp.Kind))
		}
		m.Imports = append(m.Imports, imp)
	}
	return funcTypes
}

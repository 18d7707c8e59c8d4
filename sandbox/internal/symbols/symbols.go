// Package symbols reads what a module says about its own code — the name
// section's function names and the DWARF line table — so that a trap's
// frames can name the author's functions, files and lines.
//
// Everything it reads is guest-controlled. It never fails a load: what it
// cannot read (a malformed name section, DWARF Go's reader refuses, a
// table past its bounds) it leaves out, and frames then say less. Names
// and file paths are cut to MaxText bytes; at most MaxLines rows of line
// table are kept.
package symbols

import (
	"debug/dwarf"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/ianlancetaylor/demangle"

	"github.com/seed4b3e0ccb/callbox/sandbox/internal/wasmbin"
)

// Bounds on what a module's own tables can make the host keep.
const (
	// MaxText is the longest function name or file path kept, in bytes.
	MaxText = 256
	// MaxLines is the most line-table rows kept for one module.
	MaxLines = 1 << 20
	// MaxNames is the most function names kept for one module.
	MaxNames = 1 << 20
)

// Table is what a module says about its code.
type Table struct {
	funcImports uint32
	codeStart   uint64      // byte offset of the code section's contents
	imports     []string    // "module.name" of each imported function
	bodies      [][2]uint64 // each defined function's body, code-relative [start, end)
	names       map[uint32]string
	exports     map[uint32]string // the first export name of each exported function
	lines       []row             // ascending by addr
	files       []string
	subprograms []subprogram // ascending by lo
}

// subprogram is a DWARF function's code range, code-relative [lo, hi).
type subprogram struct {
	lo, hi uint64
	name   string
}

// row is one line-table row: the code at addr and on, up to the next row,
// is file:line:col; file -1 marks the end of a sequence (no source).
type row struct {
	addr      uint64
	file      int32
	line, col uint32
}

// Source is a place in the author's source.
type Source struct {
	File         string
	Line, Column uint32
}

// Read reads a module's tables. wasm must be a module the host has
// validated; nothing in it is trusted beyond that (wasmbin reads the
// sections, bounds-checked).
func Read(wasm []byte) *Table {
	t := &Table{names: map[uint32]string{}}
	m, err := wasmbin.Parse(wasm)
	if err != nil {
		return t
	}
	for _, imp := range m.Imports {
		if imp.Kind == wasmbin.KindFunc {
			t.imports = append(t.imports, Clip(imp.Module+"."+imp.Name))
			t.funcImports++
		}
	}
	t.codeStart, t.bodies = m.CodeStart, m.Bodies
	t.exports = map[uint32]string{}
	for _, e := range m.Exports {
		if _, seen := t.exports[e.Index]; e.Kind == wasmbin.KindFunc && !seen {
			t.exports[e.Index] = Clip(e.Name)
		}
	}
	for _, body := range m.Custom["name"] {
		t.readNames(body)
	}
	debug := map[string][]byte{}
	for name, bodies := range m.Custom {
		if strings.HasPrefix(name, ".debug_") {
			debug[name] = bodies[0]
		}
	}
	t.readLines(debug)
	return t
}

// readNames reads the name section's function names (subsection 1).
func (t *Table) readNames(body []byte) {
	r := &reader{b: body}
	for r.more() {
		id := r.byte()
		sub := r.bytes(uint64(r.u32()))
		if !r.ok() {
			return
		}
		if id != 1 {
			continue
		}
		sr := &reader{b: sub}
		for n := sr.u32(); n > 0 && sr.ok() && len(t.names) < MaxNames; n-- {
			idx := sr.u32()
			name := sr.name()
			if sr.ok() {
				t.names[idx] = name
			}
		}
	}
}

// readLines reads every compilation unit's line table into one sorted
// table of rows.
func (t *Table) readLines(debug map[string][]byte) {
	if debug[".debug_info"] == nil || debug[".debug_line"] == nil {
		return
	}
	defer func() { _ = recover() }() // a reader bug on hostile DWARF costs the lines, never the host
	d, err := dwarf.New(debug[".debug_abbrev"], nil, nil, debug[".debug_info"], debug[".debug_line"], nil, debug[".debug_ranges"], debug[".debug_str"])
	if err != nil {
		return
	}
	for _, name := range []string{".debug_addr", ".debug_line_str", ".debug_str_offsets", ".debug_rnglists"} {
		if b := debug[name]; b != nil {
			_ = d.AddSection(name, b)
		}
	}
	fileIndex := map[string]int32{}
	rd := d.Reader()
	for len(t.lines) < MaxLines {
		e, err := rd.Next()
		if err != nil || e == nil {
			break
		}
		switch e.Tag {
		case dwarf.TagSubprogram:
			t.readSubprogram(d, e)
			continue
		case dwarf.TagCompileUnit:
		default:
			continue
		}
		lr, err := d.LineReader(e)
		if err != nil || lr == nil {
			continue
		}
		var le dwarf.LineEntry
		for len(t.lines) < MaxLines && lr.Next(&le) == nil {
			if tombstone(le.Address) {
				continue
			}
			if le.EndSequence || le.File == nil {
				t.lines = append(t.lines, row{addr: le.Address, file: -1})
				continue
			}
			name := Clip(le.File.Name)
			k, ok := fileIndex[name]
			if !ok {
				k = int32(len(t.files))
				fileIndex[name] = k
				t.files = append(t.files, name)
			}
			t.lines = append(t.lines, row{addr: le.Address, file: k, line: uint32(le.Line), col: uint32(le.Column)})
		}
	}
	// Stable: a sequence's end and the next sequence's start may share an
	// address; the later row (the start) wins the search below.
	sort.SliceStable(t.lines, func(i, j int) bool { return t.lines[i].addr < t.lines[j].addr })
	sort.Slice(t.subprograms, func(i, j int) bool { return t.subprograms[i].lo < t.subprograms[j].lo })
}

// readSubprogram notes a function's code range and name (its linkage
// name where it has one, demangled later), for modules whose name
// section is gone (an optimiser's pass) but whose DWARF is not.
func (t *Table) readSubprogram(d *dwarf.Data, e *dwarf.Entry) {
	if len(t.subprograms) >= MaxNames {
		return
	}
	name, _ := e.Val(dwarf.AttrLinkageName).(string)
	if name == "" {
		name, _ = e.Val(dwarf.AttrName).(string)
	}
	if name == "" {
		return
	}
	ranges, err := d.Ranges(e)
	if err != nil {
		return
	}
	for _, r := range ranges {
		if !tombstone(r[0]) && r[1] > r[0] && len(t.subprograms) < MaxNames {
			t.subprograms = append(t.subprograms, subprogram{lo: r[0], hi: r[1], name: Clip(name)})
		}
	}
}

// tombstone reports an address a linker marked dead (DWARF for wasm
// uses -1 or -2; some tools leave 0 for a removed function).
func tombstone(addr uint64) bool {
	a := int32(addr)
	return a == -1 || a == -2 || addr == 0
}

// CodeStart is the byte offset of the code section's contents in the
// module: a module offset minus CodeStart is a code-relative offset.
func (t *Table) CodeStart() uint64 { return t.codeStart }

// FuncImports is the number of imported functions.
func (t *Table) FuncImports() uint32 { return t.funcImports }

// FuncAt is the index of the function whose body holds the code-relative
// offset off.
func (t *Table) FuncAt(off uint64) (uint32, bool) {
	k := sort.Search(len(t.bodies), func(i int) bool { return t.bodies[i][1] > off })
	if k == len(t.bodies) || off < t.bodies[k][0] {
		return 0, false
	}
	return t.funcImports + uint32(k), true
}

// ExportName is the name function idx is exported under (its first), or
// "".
func (t *Table) ExportName(idx uint32) string { return t.exports[idx] }

// Body is the code-relative offset of defined function idx's body (its
// locals' declarations first); false for an import or an index past the
// module's functions.
func (t *Table) Body(idx uint32) (uint64, bool) {
	if idx < t.funcImports || idx-t.funcImports >= uint32(len(t.bodies)) {
		return 0, false
	}
	return t.bodies[idx-t.funcImports][0], true
}

// BodySource is the source place of the first line-table row inside
// defined function idx's body, where the module's DWARF has one.
func (t *Table) BodySource(idx uint32) (Source, bool) {
	start, ok := t.Body(idx)
	if !ok {
		return Source{}, false
	}
	end := t.bodies[idx-t.funcImports][1]
	k := sort.Search(len(t.lines), func(i int) bool { return t.lines[i].addr >= start })
	for ; k < len(t.lines) && t.lines[k].addr < end; k++ {
		if r := t.lines[k]; r.file >= 0 && r.line > 0 {
			return Source{File: t.files[r.file], Line: r.line, Column: r.col}, true
		}
	}
	return Source{}, false
}

// Name is function idx's name: the name section's, demangled (Rust and
// C++), else an import's "module.name", else "".
func (t *Table) Name(idx uint32) string {
	if n, ok := t.names[idx]; ok {
		return Demangle(n)
	}
	if idx < uint32(len(t.imports)) {
		return t.imports[idx]
	}
	return ""
}

// NameAt is the name DWARF gives the function whose code holds the
// code-relative offset off (demangled), for a module without a name
// section; "" when it gives none.
func (t *Table) NameAt(off uint64) string {
	k := sort.Search(len(t.subprograms), func(i int) bool { return t.subprograms[i].lo > off }) - 1
	if k < 0 || off >= t.subprograms[k].hi {
		return ""
	}
	return Demangle(t.subprograms[k].name)
}

// Source is the source place of the code-relative offset off, where the
// module's DWARF says.
func (t *Table) Source(off uint64) (Source, bool) {
	k := sort.Search(len(t.lines), func(i int) bool { return t.lines[i].addr > off }) - 1
	if k < 0 || t.lines[k].file < 0 {
		return Source{}, false
	}
	r := t.lines[k]
	return Source{File: t.files[r.file], Line: r.line, Column: r.col}, true
}

// Demangle turns a Rust (legacy or v0) or C++ symbol into its source
// form without parameters or the Rust hash ("callbox::frame::deep");
// any other name is returned as it is. Cut to MaxText bytes.
func Demangle(name string) string {
	if len(name) > 4*MaxText {
		return Clip(name)
	}
	out := name
	func() {
		defer func() { _ = recover() }()
		out = demangle.Filter(name, demangle.NoParams, demangle.NoClones)
	}()
	return Clip(out)
}

// Clip cuts s to MaxText bytes on a rune boundary and replaces invalid
// UTF-8 and control characters, so that a name is safe to print.
func Clip(s string) string {
	if len(s) > MaxText {
		s = s[:MaxText]
		for len(s) > 0 && !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	if !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r == utf8.RuneError }) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}

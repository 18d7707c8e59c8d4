// sourcemap.go: where each instruction of the rewritten module came from,
// so that an engine's frames (function indices and offsets of the module
// it ran) can name the places of the module its author built.

package meter

import "sort"

// SourceMap maps function indices and code offsets of a rewritten module
// back to the module the rewrite was given. Offsets are relative to the
// start of the code section's contents, as DWARF and wazero count them;
// CodeStart converts them to and from offsets in the module's bytes, as
// wasmtime counts them.
type SourceMap struct {
	funcImports uint32 // the original module's imported functions
	added       uint32 // the imports the rewrite added after them
	defined     uint32 // the original module's defined functions
	// codeStart is the byte offset of the code section's contents in the
	// rewritten module ([0]) and in the original ([1]).
	codeStart [2]uint64
	funcs     []funcPlaces
}

// funcPlaces holds one function's copied instructions: pairs of (offset
// in the rewritten code, offset in the original code), ascending, the
// first at the function's first instruction. Code the rewrite inserted
// maps to the original instruction it precedes or follows in the pairs'
// order (a loop's check to the loop, a call's budget sync to the call).
type funcPlaces struct {
	start, end uint64 // the rewritten body, code-relative
	pairs      []uint64
}

// InjectedFunc names a function the rewrite added (an import or the
// memory.grow wrapper), as frames show it.
const InjectedFunc = "callbox_meter"

// InstrumentMapped is Instrument, also returning where each rewritten
// instruction came from. It costs a slice of two offsets per instruction;
// engines build it only when they need to explain a trap.
func InstrumentMapped(wasm []byte, opts Options) ([]byte, *SourceMap, error) {
	return instrument(wasm, opts, true)
}

// Function maps a function index of the rewritten module to the
// original's. ok is false for a function the rewrite added.
func (s *SourceMap) Function(idx uint32) (orig uint32, ok bool) {
	switch {
	case idx < s.funcImports:
		return idx, true
	case idx < s.funcImports+s.added:
		return 0, false
	case idx-s.added < s.funcImports+s.defined:
		return idx - s.added, true
	}
	return 0, false
}

// CodeStart is the byte offset of the code section's contents in the
// rewritten module (rewritten true) or the original.
func (s *SourceMap) CodeStart(rewritten bool) uint64 {
	if rewritten {
		return s.codeStart[0]
	}
	return s.codeStart[1]
}

// CodeOffset maps a code-relative offset of the rewritten module to the
// original's: the instruction it was copied from, or the original
// instruction nearest before the inserted code it falls in. ok is false
// outside every original function's body (the memory.grow wrapper).
func (s *SourceMap) CodeOffset(off uint64) (orig uint64, ok bool) {
	k := sort.Search(len(s.funcs), func(i int) bool { return s.funcs[i].end > off })
	if k == len(s.funcs) || off < s.funcs[k].start {
		return 0, false
	}
	p := s.funcs[k].pairs
	n := len(p) / 2
	j := sort.Search(n, func(i int) bool { return p[2*i] > off }) - 1
	if j < 0 {
		j = 0
	}
	return p[2*j+1], true
}

// record notes, while a body is copied, that the rewritten code at
// position newPos (relative to the body) holds the original instruction
// at origPos (relative to the original body).
func (m *rewriter) record(newPos, origPos int) {
	if m.smap == nil {
		return
	}
	m.places = append(m.places, uint64(newPos), uint64(origPos))
}

package wazero

import (
	"encoding/binary"
	"strings"
)

// Line anchors: how frames on wazero get their offsets.
//
// wazero's trap errors name each frame's function but give its
// instruction's offset only as the prefix of a DWARF source line
// ("0x2a: file:line"), and track offsets only for modules with DWARF.
// It would also read a module's own DWARF against the rewritten code,
// whose offsets the meter moved. So the module wazero compiles has its
// .debug_* sections replaced by a minimal line table: one compilation
// unit covering the code section, one line. Every frame then comes with
// the offset in the code wazero ran, which the backtrace maps back
// through the rewrite and resolves against the module's own DWARF
// (core.Backtrace). The cost is wazero's offset table for the compiled
// code, a few bytes per instruction.

// anchorFile is the file name of the one line; frames never show it.
const anchorFile = "callbox-anchor"

// withLineAnchors returns wasm with its .debug_* custom sections
// replaced by the minimal line table. wasm must be valid.
func withLineAnchors(wasm []byte) []byte {
	out := make([]byte, 0, len(wasm)+256)
	out = append(out, wasm[:8]...)
	var codeSize uint64
	pos := 8
	for pos < len(wasm) {
		start := pos
		id := wasm[pos]
		size, n := binary.Uvarint(wasm[pos+1:])
		if n <= 0 || uint64(len(wasm)-pos-1-n) < size {
			return wasm // not what validation passed: leave it alone
		}
		body := wasm[pos+1+n : pos+1+n+int(size)]
		pos += 1 + n + int(size)
		if id == 0 {
			l, m := binary.Uvarint(body)
			if m > 0 && uint64(len(body)-m) >= l && strings.HasPrefix(string(body[m:m+int(l)]), ".debug_") {
				continue
			}
		}
		if id == 10 {
			codeSize = size
		}
		out = append(out, wasm[start:pos]...)
	}
	if codeSize < 2 {
		return out
	}
	out = customSection(out, ".debug_abbrev", anchorAbbrev())
	out = customSection(out, ".debug_info", anchorInfo(uint32(codeSize)))
	out = customSection(out, ".debug_line", anchorLine(uint32(codeSize)))
	return out
}

func customSection(out []byte, name string, data []byte) []byte {
	payload := binary.AppendUvarint(nil, uint64(len(name)))
	payload = append(payload, name...)
	payload = append(payload, data...)
	out = append(out, 0)
	out = binary.AppendUvarint(out, uint64(len(payload)))
	return append(out, payload...)
}

// DWARF 4 encodings used below.
const (
	dwTagCompileUnit = 0x11
	dwAtName         = 0x03
	dwAtStmtList     = 0x10
	dwAtLowPC        = 0x11
	dwAtHighPC       = 0x12
	dwFormAddr       = 0x01
	dwFormData4      = 0x06
	dwFormString     = 0x08
	dwFormSecOffset  = 0x17
)

// anchorAbbrev declares the one DIE: a compilation unit with a name, a
// line table and a pc range, no children.
func anchorAbbrev() []byte {
	return []byte{
		1, dwTagCompileUnit, 0,
		dwAtName, dwFormString,
		dwAtStmtList, dwFormSecOffset,
		dwAtLowPC, dwFormAddr,
		dwAtHighPC, dwFormData4,
		0, 0,
		0,
	}
}

// anchorInfo is the compilation unit covering code offsets [1, codeSize)
// (wazero treats a range starting at 0 as a linker's tombstone; no
// instruction is at offset 0, which holds the function count).
func anchorInfo(codeSize uint32) []byte {
	var die []byte
	die = append(die, 1)
	die = append(die, anchorFile...)
	die = append(die, 0)
	die = binary.LittleEndian.AppendUint32(die, 0)          // stmt_list
	die = binary.LittleEndian.AppendUint32(die, 1)          // low_pc
	die = binary.LittleEndian.AppendUint32(die, codeSize-1) // high_pc, as a length
	hdr := binary.LittleEndian.AppendUint16(nil, 4)         // version
	hdr = binary.LittleEndian.AppendUint32(hdr, 0)          // abbrev offset
	hdr = append(hdr, 4)                                    // address size
	unit := append(hdr, die...)
	return append(binary.LittleEndian.AppendUint32(nil, uint32(len(unit))), unit...)
}

// anchorLine is a line program of one sequence: line 1 from offset 1 to
// codeSize.
func anchorLine(codeSize uint32) []byte {
	var h []byte
	h = append(h, 1, 1, 1, 0xfb, 14, 13)              // min inst length, max ops, default_is_stmt, line_base -5, line_range, opcode_base
	h = append(h, 0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1) // standard opcode lengths
	h = append(h, 0)                                  // no include directories
	h = append(h, anchorFile...)
	h = append(h, 0, 0, 0, 0) // its name's end, directory, mtime, length
	h = append(h, 0)          // end of file names
	var prog []byte
	prog = append(prog, 0, 5, 2) // DW_LNE_set_address 1
	prog = binary.LittleEndian.AppendUint32(prog, 1)
	prog = append(prog, 1) // DW_LNS_copy
	prog = append(prog, 2) // DW_LNS_advance_pc
	prog = binary.AppendUvarint(prog, uint64(codeSize-1))
	prog = append(prog, 0, 1, 1) // DW_LNE_end_sequence
	unit := binary.LittleEndian.AppendUint16(nil, 4)
	unit = binary.LittleEndian.AppendUint32(unit, uint32(len(h)))
	unit = append(unit, h...)
	unit = append(unit, prog...)
	return append(binary.LittleEndian.AppendUint32(nil, uint32(len(unit))), unit...)
}

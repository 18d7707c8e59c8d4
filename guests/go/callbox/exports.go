//go:build wasip1

package callbox

import (
	"strconv"
	"strings"
	"unsafe"
)

// ABIVersion is the ABI version this SDK implements.
const ABIVersion = 1

//go:wasmexport callbox_abi_version
func abiVersion() int32 { return ABIVersion }

// maxAlign is the largest alignment callbox_alloc must honour (ABI.md §1).
const maxAlign = 1 << 16

// blocks are the regions callbox_alloc handed out, by guest address. The
// host holds only their addresses, which the garbage collector cannot see:
// this map is what keeps them alive until callbox_free. (Go's collector
// never moves memory, so an address stays valid as long as its block is
// referenced.) Each slice is the aligned region; its backing array is the
// whole over-allocated buffer.
var blocks = map[uint32][]byte{}

// alloc returns size bytes aligned to align, or 0 for an invalid request.
// It over-allocates by align bytes and hands out the aligned part. When the
// memory limit stops the heap from growing, the Go runtime exits with
// "out of memory" (it cannot return nil), which the host reports as
// MemoryLimit.
//
//go:wasmexport callbox_alloc
func alloc(size, align uint32) (addr uint32) {
	if align == 0 || align&(align-1) != 0 || align > maxAlign {
		return 0
	}
	// A size the runtime refuses outright ("len out of range") panics.
	defer func() {
		if recover() != nil {
			addr = 0
		}
	}()
	buf := make([]byte, int(size)+int(align))
	base := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	off := int(-base & uintptr(align-1))
	addr = uint32(base) + uint32(off)
	blocks[addr] = buf[off : off+int(size)]
	return addr
}

// free releases a block alloc returned. The host's arguments are checked
// against the block; a mismatch is logged and the block kept.
//
//go:wasmexport callbox_free
func free(ptr, size, align uint32) {
	mem, ok := blocks[ptr]
	if !ok || uint32(len(mem)) != size {
		Log.Warn("callbox_free(" + strconv.FormatUint(uint64(ptr), 10) + ", " + strconv.FormatUint(uint64(size), 10) +
			", " + strconv.FormatUint(uint64(align), 10) + "): no such block; ignored")
		return
	}
	delete(blocks, ptr)
}

// blockAt returns the bytes from guest address addr to the end of the
// block that contains them, or nil when no live block contains addr.
func blockAt(addr uint32) []byte {
	for start, mem := range blocks {
		if addr >= start && uint64(addr) < uint64(start)+uint64(len(mem)) {
			return mem[addr-start:]
		}
	}
	return nil
}

// The signature table (ABI.md §5). Go cannot emit the callbox.signatures
// custom section, so callbacks register their lines with Signature, and the
// callbox_signatures export hands the host the assembled table.
var (
	signatures []string
	table      []byte // u32 length, then the text; built once, kept alive here
)

// Signature declares the signature of the callback exported as export.
// Call it from an init function next to the export:
//
//	func init() { callbox.Signature("scale", "(x: f32[n], factor: f32[]) -> f32[n]") }
//
// The host checks every call's inputs against it and derives the output
// shapes from it before the callback runs.
func Signature(export, signature string) {
	signatures = append(signatures, export+" = "+signature+"\n")
	table = nil
}

//go:wasmexport callbox_signatures
func signatureTable() uint32 {
	if table == nil {
		text := strings.Join(signatures, "")
		n := len(text)
		table = make([]byte, 4+n)
		table[0], table[1], table[2], table[3] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
		copy(table[4:], text)
	}
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(table))))
}

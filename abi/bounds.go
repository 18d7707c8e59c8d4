package abi

import "fmt"

// Violation is a guest that broke the ABI: a pointer or length outside its
// memory, a rewritten call frame, a write past an output buffer. Offset is a
// byte offset in guest memory.
type Violation struct {
	What   string // what was being read or checked, e.g. "error message"
	Offset uint64 // guest address involved
	Len    uint64 // length involved, when meaningful
	Msg    string // what was wrong
}

func (v *Violation) Error() string {
	return fmt.Sprintf("%s at guest offset %d: %s", v.What, v.Offset, v.Msg)
}

// GuestBytes is the one place the host turns a guest-supplied pointer and
// length into a slice of guest memory. Every guest-controlled address goes
// through it (or through CheckRange). ptr and n come straight from the guest:
// they are untrusted, may be any u32 (or, sign-extended, any i32), and the
// sum may overflow 32 bits.
func GuestBytes(mem []byte, ptr, n uint64, what string) ([]byte, error) {
	if err := CheckRange(uint64(len(mem)), ptr, n, what); err != nil {
		return nil, err
	}
	return mem[ptr : ptr+n : ptr+n], nil
}

// CheckRange verifies that [ptr, ptr+n) lies inside a memory of memLen bytes.
func CheckRange(memLen, ptr, n uint64, what string) error {
	if ptr > memLen || n > memLen-ptr {
		return &Violation{What: what, Offset: ptr, Len: n,
			Msg: fmt.Sprintf("range [%d, %d+%d) is outside guest memory of %d bytes", ptr, ptr, n, memLen)}
	}
	return nil
}

// CheckAligned verifies a guest pointer is aligned to align (a power of two).
func CheckAligned(ptr, align uint64, what string) error {
	if ptr&(align-1) != 0 {
		return &Violation{What: what, Offset: ptr, Msg: fmt.Sprintf("pointer %d is not %d-byte aligned", ptr, align)}
	}
	return nil
}

// PageSize is the WebAssembly page size; linear memory grows in pages and
// max_memory is a whole number of them.
const PageSize = 64 << 10

// MaxTableElements bounds the elements of all of a module's tables
// together, as declared and as grown. The host refuses modules that declare
// more and gives every table a maximum at load, on every engine (wazero has
// no table limit of its own and would let table.grow allocate up to 32 GiB
// of host memory).
const MaxTableElements = 1 << 20

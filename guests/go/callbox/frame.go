//go:build wasip1

package callbox

import (
	"math"
	"strconv"
	"unsafe"
)

// ABI v1 frame layout (ABI.md §3).
const (
	frameMagic   = 0x31584243 // "CBX1"
	frameVersion = 1
	headerSize   = 32
	descSize     = 32
	maxRank      = 32
	dataAlign    = 16 // what ABI v1 promises for data buffers
	flagOutput   = 1
	flagAlias    = 2
)

// Frame is the call frame a callback receives: its inputs, then its
// outputs, as the signature declares them. Run validates it before the
// callback sees it; it and everything read from it are valid only during
// the call.
type Frame struct {
	mem     []byte // frame_size bytes from the header
	addr    uint32 // guest address of mem[0]
	nIn     int
	nOut    int
	tensors int // offset of the descriptor array in mem
}

// NumInputs is the number of inputs.
func (f *Frame) NumInputs() int { return f.nIn }

// NumOutputs is the number of outputs, aliased ones included.
func (f *Frame) NumOutputs() int { return f.nOut }

// CallID is the host's sequence number of this call on this instance.
func (f *Frame) CallID() uint64 { return le64(f.mem, 24) }

// Tensor is one tensor of the frame, untyped. Shape and Data alias the
// frame: Data may be read (and, for an output, written), Shape must not be
// changed (the host checks the frame's dims after the call).
type Tensor struct {
	DType DType
	Shape []int  // dimensions, major to minor; empty for a scalar
	Data  []byte // the dense row-major data
	Alias int    // for an output passing an input through, that input; else -1
}

// Len is the number of elements (1 for a scalar).
func (t Tensor) Len() int { return len(t.Data) / t.DType.Size() }

// Type is the tensor's type as a signature writes it, e.g. "f32[3,4]".
func (t Tensor) Type() string {
	s := t.DType.String() + "["
	for i, d := range t.Shape {
		if i > 0 {
			s += ","
		}
		s += strconv.Itoa(d)
	}
	return s + "]"
}

// View is a tensor's data as a []T over guest memory: no copy.
type View[T Element] struct {
	Data  []T   // the elements, row-major: (i0, …, ik) is Σ ij * Π_{l>j} Shape[l]
	Shape []int // dimensions, major to minor (read-only, see Tensor)
}

// Input returns input i untyped; it panics when there is no input i.
func (f *Frame) Input(i int) Tensor {
	if uint(i) >= uint(f.nIn) {
		panic("callbox: input " + strconv.Itoa(i) + " of a frame with " + strconv.Itoa(f.nIn))
	}
	return f.tensor(i)
}

// Output returns output i untyped; it panics when there is no output i.
func (f *Frame) Output(i int) Tensor {
	if uint(i) >= uint(f.nOut) {
		panic("callbox: output " + strconv.Itoa(i) + " of a frame with " + strconv.Itoa(f.nOut))
	}
	return f.tensor(f.nIn + i)
}

// Input returns input i as T elements; it panics when there is no input i
// or it is not a T tensor.
func Input[T Element](f *Frame, i int) View[T] {
	return typed[T](f.Input(i), "input", i)
}

// Output returns output i as T elements, all of which the callback must
// write. It panics when there is no output i, when it is not a T tensor,
// or when it passes an input through (an aliased output is not written).
func Output[T Element](f *Frame, i int) View[T] {
	t := f.Output(i)
	if t.Alias >= 0 {
		panic("callbox: output " + strconv.Itoa(i) + " passes input " + strconv.Itoa(t.Alias) + " through and must not be written")
	}
	return typed[T](t, "output", i)
}

// ViewOf returns t's data as T elements; it panics when t is not a T tensor.
func ViewOf[T Element](t Tensor) View[T] { return typed[T](t, "tensor", -1) }

// typed views t as T elements; what and i name it if it is not a T tensor.
func typed[T Element](t Tensor, what string, i int) View[T] {
	if want := DTypeOf[T](); t.DType != want {
		if i >= 0 {
			what += " " + strconv.Itoa(i)
		}
		panic("callbox: " + what + " is " + t.Type() + ", not " + want.String())
	}
	n := len(t.Data) / t.DType.Size()
	if n == 0 {
		return View[T]{Data: []T{}, Shape: t.Shape}
	}
	// Data is at least 16-byte aligned (checked in openFrame): aligned for T.
	return View[T]{Data: unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(t.Data))), n), Shape: t.Shape}
}

// tensor decodes descriptor k, which openFrame validated.
func (f *Frame) tensor(k int) Tensor {
	d := f.tensors + k*descSize
	t := Tensor{DType: DType(le32(f.mem, d)), Alias: -1}
	if rank := int(le32(f.mem, d+4)); rank > 0 {
		dims := int(le32(f.mem, d+8) - f.addr)
		// int is 64 bits on wasm, as the dims are.
		t.Shape = unsafe.Slice((*int)(unsafe.Pointer(&f.mem[dims])), rank)
	}
	t.Data = f.bytes(le32(f.mem, d+16), le32(f.mem, d+20))
	if le32(f.mem, d+12)&flagAlias != 0 {
		t.Alias = int(le32(f.mem, d+24))
	}
	return t
}

// bytes returns the n bytes at guest address addr as a slice of the frame
// when they lie in it, else of the callbox_alloc block that holds them (an
// input the host's zero-copy API placed), or nil when neither holds them.
func (f *Frame) bytes(addr, n uint32) []byte {
	if n == 0 {
		return []byte{}
	}
	mem, off := f.mem, int64(addr)-int64(f.addr)
	if off < 0 || off >= int64(len(mem)) {
		mem, off = blockAt(addr), 0
	}
	if int64(n) > int64(len(mem))-off {
		return nil
	}
	return mem[off : off+int64(n) : off+int64(n)]
}

// openFrame checks every number the host wrote into the frame against
// ABI v1, so that the accessors above can trust them: header, counts,
// dtypes, ranks, flags, byte lengths that match the shapes, and where
// everything lies. The frame is in a block callbox_alloc handed out; the
// metadata (header, descriptors, dims) is in the frame; an output's data is
// in the frame after the metadata; an input's data (which the host's
// zero-copy API may place elsewhere) is in the frame after the metadata or
// in another callbox_alloc block; an aliased output is its input's buffer.
// Data is 16-byte aligned.
func openFrame(addr uint32) (Frame, error) {
	mem := blockAt(addr)
	if len(mem) < headerSize || addr%8 != 0 {
		return Frame{}, malformed("frame pointer " + utoa(addr) + " is not in a block callbox_alloc returned")
	}
	if m := le32(mem, 0); m != frameMagic {
		return Frame{}, malformed("magic 0x" + strconv.FormatUint(uint64(m), 16) + ", want 0x" + strconv.FormatUint(frameMagic, 16))
	}
	if v := le32(mem, 4); v != frameVersion {
		return Frame{}, malformed("version " + utoa(v) + ", this SDK implements " + utoa(frameVersion))
	}
	size := le32(mem, 20)
	if size < headerSize || uint64(size) > uint64(len(mem)) {
		return Frame{}, malformed("frame_size " + utoa(size) + " with " + strconv.Itoa(len(mem)) + " bytes allocated")
	}
	mem = mem[:size:size]
	nIn, nOut := le32(mem, 8), le32(mem, 12)
	n := int(nIn) + int(nOut)
	tensors := uint64(le32(mem, 16)) - uint64(addr) // offsets in mem from here on
	if tensors%8 != 0 || tensors < headerSize || tensors+uint64(n)*descSize > uint64(size) {
		return Frame{}, malformed("descriptor array at " + utoa(le32(mem, 16)))
	}
	f := Frame{mem: mem, addr: addr, nIn: int(nIn), nOut: int(nOut), tensors: int(tensors)}
	name := func(k int) string {
		if k < f.nIn {
			return "input " + strconv.Itoa(k)
		}
		return "output " + strconv.Itoa(k-f.nIn)
	}

	// The metadata: each descriptor, and the end of everything the host
	// checks is unchanged after the call.
	metaEnd := tensors + uint64(n)*descSize
	for k := range n {
		d := f.tensors + k*descSize
		if dt := DType(le32(mem, d)); dt.Size() == 0 {
			return Frame{}, malformed(name(k) + ": unknown dtype " + utoa(uint32(dt)))
		}
		rank := uint64(le32(mem, d+4))
		if rank > maxRank {
			return Frame{}, malformed(name(k) + ": rank " + strconv.FormatUint(rank, 10))
		}
		flags, want := le32(mem, d+12), uint32(0)
		if k >= f.nIn {
			want = flagOutput
		}
		if flags&^flagAlias != want || (want == 0 && flags != 0) {
			return Frame{}, malformed(name(k) + ": flags " + utoa(flags))
		}
		if rank > 0 {
			dims := uint64(le32(mem, d+8)) - uint64(addr)
			if dims%8 != 0 || dims < headerSize || dims+rank*8 > uint64(size) {
				return Frame{}, malformed(name(k) + ": dims pointer " + utoa(le32(mem, d+8)))
			}
			metaEnd = max(metaEnd, dims+rank*8)
		}
	}

	// The shapes and the buffers.
	for k := range n {
		d := f.tensors + k*descSize
		dims := int(le32(mem, d+8) - addr)
		// Both factors stay below 2^32, so the product cannot overflow; a
		// larger one is only remembered as too large (unless a later
		// dimension is 0).
		elems, empty := uint64(1), false
		for j := range int(le32(mem, d+4)) {
			dim := int64(le64(mem, dims+8*j))
			switch {
			case dim < 0:
				return Frame{}, malformed(name(k) + ": dimension " + strconv.Itoa(j) + " is " + strconv.FormatInt(dim, 10))
			case dim == 0:
				empty = true
			case elems > math.MaxUint32 || dim > math.MaxUint32:
				elems = math.MaxUint32 + 1
			default:
				elems *= uint64(dim)
			}
		}
		if empty {
			elems = 0
		}
		byteLen := le32(mem, d+20)
		if elems > math.MaxUint32 || elems*uint64(DType(le32(mem, d)).Size()) != uint64(byteLen) {
			return Frame{}, malformed(name(k) + ": byte_len " + utoa(byteLen) + " does not match its dtype and shape")
		}
		data := le32(mem, d+16)
		if data%dataAlign != 0 {
			return Frame{}, malformed(name(k) + ": data pointer " + utoa(data) + " is not " + strconv.Itoa(dataAlign) + "-byte aligned")
		}
		off := int64(data) - int64(addr)
		if le32(mem, d+12)&flagAlias != 0 {
			a := le32(mem, d+24)
			if a >= nIn || le32(mem, f.tensors+int(a)*descSize+16) != data || le32(mem, f.tensors+int(a)*descSize+20) != byteLen {
				return Frame{}, malformed(name(k) + ": alias of input " + utoa(a) + " does not match that input")
			}
		} else if k >= f.nIn && (off < int64(metaEnd) || off+int64(byteLen) > int64(size)) {
			return Frame{}, malformed(name(k) + ": data at " + utoa(data) + " (" + utoa(byteLen) + " bytes) is outside the frame's buffers")
		} else if k < f.nIn && byteLen > 0 && ((off < int64(metaEnd) && off+int64(byteLen) > 0) || f.bytes(data, byteLen) == nil) {
			return Frame{}, malformed(name(k) + ": data at " + utoa(data) + " (" + utoa(byteLen) + " bytes) is over the frame's metadata or outside the blocks callbox_alloc returned")
		}
	}
	return f, nil
}

func malformed(reason string) error {
	return Fail(Internal, "callbox: malformed call frame: "+reason)
}

func utoa(v uint32) string { return strconv.FormatUint(uint64(v), 10) }

func le32(b []byte, off int) uint32 {
	b = b[off : off+4]
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func le64(b []byte, off int) uint64 {
	return uint64(le32(b, off)) | uint64(le32(b, off+4))<<32
}

package abi

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
)

// Version is the ABI version this package implements. A guest's
// callbox_abi_version export must return it.
const Version = 1

// Frame layout constants of ABI v1 (see ABI.md, "Call frame").
const (
	FrameMagic      uint32 = 0x31584243 // "CBX1" as little-endian bytes
	FrameHeaderSize        = 32
	DescriptorSize         = 32
	DimSize                = 8
	DataAlign              = 64 // every data buffer starts on a 64-byte boundary
	GuardSize              = 64 // canary bytes after every output buffer
)

// Descriptor flags.
const (
	FlagOutput uint32 = 1 << 0 // the descriptor is an output
	FlagAlias  uint32 = 1 << 1 // the output passes an input through; see Descriptor.Alias
)

// guardPattern fills the guard region after each output buffer. It is not a
// single repeated byte so that a guest's memset of the output cannot match
// it by accident.
var guardPattern = func() []byte {
	p := make([]byte, GuardSize)
	seed := [8]byte{0xCB, 0x0C, 0xA1, 0x1B, 0x0A, 0xDE, 0xAD, 0x5A}
	for i := range p {
		p[i] = seed[i%8] ^ byte(i)
	}
	return p
}()

// Region is a byte range in guest memory: an offset from the frame base,
// or, when Abs is set, an absolute guest address (an input the caller placed
// in guest memory itself).
type Region struct {
	Off uint32
	Len uint32
	Abs bool
}

// Addr is the region's guest address for a frame at base.
func (r Region) Addr(base uint32) uint32 {
	if r.Abs {
		return r.Off
	}
	return base + r.Off
}

// End is Off+Len.
func (r Region) End() uint64 { return uint64(r.Off) + uint64(r.Len) }

// FrameLayout is where every part of one call frame lives, relative to the
// frame's base address. planFrame computes it from the call's types alone, so
// the host knows every output's location without reading anything back from
// the guest.
type FrameLayout struct {
	Size      uint32   // scratch bytes the whole frame needs
	MetaLen   uint32   // header + descriptors + dims: bytes the guest must not change
	NumInputs int      // inputs, then outputs, in the descriptor array
	Inputs    []Region // input data
	Outputs   []Region // output data; an aliased output has its input's region
	Guards    []Region // canary after each non-aliased output (Len 0 for aliases)

	inputs  []TensorMeta
	outputs []OutputSpec
}

func alignUp(v, a uint64) uint64 { return (v + a - 1) &^ (a - 1) }

// planFrame lays out a frame for the given input types and resolved outputs,
// every data buffer 64-byte aligned.
func planFrame(inputs []TensorMeta, outputs []OutputSpec) (*FrameLayout, error) {
	return Plan(inputs, outputs, PlanOptions{})
}

// planFrameSkewed lays out a frame whose data buffers sit exactly 16 bytes
// past a 64-byte boundary: the least alignment ABI v1 promises.
func planFrameSkewed(inputs []TensorMeta, outputs []OutputSpec) (*FrameLayout, error) {
	return Plan(inputs, outputs, PlanOptions{Skewed: true})
}

// MinDataAlign is the alignment of data buffers a guest may rely on.
const MinDataAlign = 16

// PlanOptions adjust a frame layout.
type PlanOptions struct {
	// Skewed places data buffers exactly 16 bytes past a 64-byte boundary:
	// the least alignment ABI v1 promises. The host uses it to test that
	// guest SDKs assume no more than the ABI guarantees.
	Skewed bool
	// InputAt gives, per input, the guest address where the caller already
	// placed its data (zero-copy), or 0 to place it in the frame. Such an
	// address must be aligned to at least MinDataAlign.
	InputAt []uint32
}

// Plan lays out a frame for the given input types and resolved outputs.
func Plan(inputs []TensorMeta, outputs []OutputSpec, opts PlanOptions) (*FrameLayout, error) {
	l := &FrameLayout{NumInputs: len(inputs), inputs: inputs, outputs: outputs}
	skew := uint64(0)
	if opts.Skewed {
		skew = MinDataAlign
	}
	n := uint64(len(inputs) + len(outputs))
	dims := uint64(0)
	for _, in := range inputs {
		dims += uint64(len(in.Shape))
	}
	for _, out := range outputs {
		dims += uint64(len(out.Shape))
	}
	off := uint64(FrameHeaderSize) + n*DescriptorSize + dims*DimSize
	l.MetaLen = uint32(min(off, math.MaxUint32))
	place := func(off uint64) uint64 { return alignUp(off, DataAlign) + skew }
	off = place(off)
	l.Inputs = make([]Region, len(inputs))
	for i, in := range inputs {
		size, err := in.Shape.ByteLen(in.DType)
		if err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
		if i < len(opts.InputAt) && opts.InputAt[i] != 0 {
			at := uint64(opts.InputAt[i])
			if at%MinDataAlign != 0 || at+size > math.MaxUint32 {
				return nil, fmt.Errorf("input %d: guest address %d is misaligned or out of range", i, at)
			}
			l.Inputs[i] = Region{Off: uint32(at), Len: uint32(size), Abs: true}
			continue
		}
		l.Inputs[i] = Region{Off: uint32(min(off, math.MaxUint32)), Len: uint32(min(size, math.MaxUint32))}
		off = place(off + size)
		if off > math.MaxUint32 || size > MaxTensorBytes {
			return nil, fmt.Errorf("input %d: frame exceeds the 4 GiB guest address space", i)
		}
	}
	l.Outputs = make([]Region, len(outputs))
	l.Guards = make([]Region, len(outputs))
	for i, out := range outputs {
		if out.Alias >= 0 {
			if out.Alias >= len(inputs) {
				return nil, fmt.Errorf("output %d aliases input %d of %d", i, out.Alias, len(inputs))
			}
			l.Outputs[i] = l.Inputs[out.Alias]
			continue
		}
		size, err := out.Shape.ByteLen(out.DType)
		if err != nil {
			return nil, fmt.Errorf("output %d: %w", i, err)
		}
		l.Outputs[i] = Region{Off: uint32(min(off, math.MaxUint32)), Len: uint32(min(size, math.MaxUint32))}
		l.Guards[i] = Region{Off: uint32(min(off+size, math.MaxUint32)), Len: GuardSize}
		off = place(off + size + GuardSize)
		if off > math.MaxUint32 || size > MaxTensorBytes {
			return nil, fmt.Errorf("output %d: frame exceeds the 4 GiB guest address space", i)
		}
	}
	l.Size = uint32(off)
	return l, nil
}

// WriteMeta writes the frame header, descriptors, dims and output guards
// into frame, the l.Size bytes of guest memory at guest address base. Data
// buffers are left for the caller to fill.
func (l *FrameLayout) WriteMeta(frame []byte, base uint32, callID uint64) error {
	if uint64(len(frame)) < uint64(l.Size) {
		return fmt.Errorf("frame buffer of %d bytes is smaller than the layout's %d", len(frame), l.Size)
	}
	if uint64(base)+uint64(l.Size) > math.MaxUint32 {
		return fmt.Errorf("frame at %d of %d bytes passes the 4 GiB guest address space", base, l.Size)
	}
	le := binary.LittleEndian
	n := len(l.inputs) + len(l.outputs)
	descs := uint32(FrameHeaderSize)
	le.PutUint32(frame[0:], FrameMagic)
	le.PutUint32(frame[4:], Version)
	le.PutUint32(frame[8:], uint32(len(l.inputs)))
	le.PutUint32(frame[12:], uint32(len(l.outputs)))
	le.PutUint32(frame[16:], base+descs)
	le.PutUint32(frame[20:], l.Size)
	le.PutUint64(frame[24:], callID)

	dimOff := descs + uint32(n)*DescriptorSize
	put := func(i int, d DType, shape Shape, flags uint32, data Region, alias uint32) {
		p := frame[descs+uint32(i)*DescriptorSize:]
		le.PutUint32(p[0:], uint32(d))
		le.PutUint32(p[4:], uint32(len(shape)))
		le.PutUint32(p[8:], base+dimOff)
		le.PutUint32(p[12:], flags)
		le.PutUint32(p[16:], data.Addr(base))
		le.PutUint32(p[20:], data.Len)
		le.PutUint32(p[24:], alias)
		le.PutUint32(p[28:], 0)
		for _, dim := range shape {
			le.PutUint64(frame[dimOff:], uint64(dim))
			dimOff += DimSize
		}
	}
	for i, in := range l.inputs {
		put(i, in.DType, in.Shape, 0, l.Inputs[i], 0)
	}
	for i, out := range l.outputs {
		flags, alias := FlagOutput, uint32(0)
		if out.Alias >= 0 {
			flags |= FlagAlias
			alias = uint32(out.Alias)
		}
		put(len(l.inputs)+i, out.DType, out.Shape, flags, l.Outputs[i], alias)
	}
	// Zero the padding between the metadata and the first buffer so a frame
	// is fully determined by its inputs.
	firstData := uint64(l.Size)
	for _, regs := range [2][]Region{l.Inputs, l.Outputs} {
		for _, r := range regs {
			if !r.Abs {
				firstData = min(firstData, uint64(r.Off))
			}
		}
	}
	clear(frame[l.MetaLen:max(firstData, uint64(l.MetaLen))])
	for _, g := range l.Guards {
		if g.Len > 0 {
			copy(frame[g.Off:g.End()], guardPattern)
		}
	}
	return nil
}

// Verify checks, after the guest returned, that it left the frame metadata
// exactly as written (meta is the host's copy of frame[:MetaLen]) and did not
// write past the end of any output buffer. It names the first offending
// guest address.
func (l *FrameLayout) Verify(frame []byte, base uint32, meta []byte) error {
	if uint64(len(frame)) < uint64(l.Size) || len(meta) != int(l.MetaLen) {
		return fmt.Errorf("verify: frame buffer too small")
	}
	if !bytes.Equal(frame[:l.MetaLen], meta) {
		at := firstDiff(frame[:l.MetaLen], meta)
		return &Violation{What: "call frame", Offset: uint64(base) + uint64(at),
			Msg: "guest rewrote " + l.describeMetaOffset(uint32(at)) + "; the host never reads a frame back"}
	}
	for i, g := range l.Guards {
		if g.Len == 0 {
			continue
		}
		if !bytes.Equal(frame[g.Off:g.End()], guardPattern) {
			at := firstDiff(frame[g.Off:g.End()], guardPattern)
			return &Violation{What: fmt.Sprintf("output %d", i), Offset: uint64(base) + uint64(g.Off) + uint64(at),
				Msg: fmt.Sprintf("guest wrote past the end of its %d-byte buffer: the first changed byte is at end+%d", l.Outputs[i].Len, at)}
		}
	}
	return nil
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return len(a)
}

var descriptorFields = [...]string{"dtype", "dtype", "dtype", "dtype", "rank", "rank", "rank", "rank",
	"dims pointer", "dims pointer", "dims pointer", "dims pointer", "flags", "flags", "flags", "flags",
	"data pointer", "data pointer", "data pointer", "data pointer", "byte length", "byte length", "byte length", "byte length",
	"alias", "alias", "alias", "alias", "reserved", "reserved", "reserved", "reserved"}

func (l *FrameLayout) describeMetaOffset(at uint32) string {
	n := uint32(len(l.inputs) + len(l.outputs))
	switch {
	case at < FrameHeaderSize:
		return "the frame header"
	case at < FrameHeaderSize+n*DescriptorSize:
		idx := (at - FrameHeaderSize) / DescriptorSize
		field := descriptorFields[(at-FrameHeaderSize)%DescriptorSize]
		if int(idx) < len(l.inputs) {
			return fmt.Sprintf("the %s of input %d's descriptor", field, idx)
		}
		return fmt.Sprintf("the %s of output %d's descriptor", field, int(idx)-len(l.inputs))
	default:
		return "the dims array"
	}
}

// Descriptor is one decoded tensor descriptor of a call frame.
type Descriptor struct {
	DType   DType
	Shape   Shape
	Flags   uint32
	Data    uint32 // guest address of the data
	ByteLen uint32
	Alias   uint32
}

// Frame is a decoded call frame.
type Frame struct {
	CallID  uint64
	Size    uint32
	Inputs  []Descriptor
	Outputs []Descriptor
}

// DecodeFrame reads and validates the call frame at guest address ptr, as a
// guest SDK does on entry. Every field is untrusted: counts, ranks, pointers
// and lengths are bounds-checked against mem before use. It is the reference
// decoder the SDKs are tested against and the target of the ABI fuzzer.
func DecodeFrame(mem []byte, ptr uint32) (*Frame, error) {
	le := binary.LittleEndian
	hdr, err := GuestBytes(mem, uint64(ptr), FrameHeaderSize, "frame header")
	if err != nil {
		return nil, err
	}
	if m := le.Uint32(hdr[0:]); m != FrameMagic {
		return nil, &Violation{What: "frame header", Offset: uint64(ptr), Msg: fmt.Sprintf("magic %#x, want %#x", m, FrameMagic)}
	}
	if v := le.Uint32(hdr[4:]); v != Version {
		return nil, &Violation{What: "frame header", Offset: uint64(ptr) + 4, Msg: fmt.Sprintf("version %d, want %d", v, Version)}
	}
	nIn, nOut := uint64(le.Uint32(hdr[8:])), uint64(le.Uint32(hdr[12:]))
	descPtr := uint64(le.Uint32(hdr[16:]))
	f := &Frame{Size: le.Uint32(hdr[20:]), CallID: le.Uint64(hdr[24:])}
	descs, err := GuestBytes(mem, descPtr, (nIn+nOut)*DescriptorSize, "descriptor array")
	if err != nil {
		return nil, err
	}
	if err := CheckAligned(descPtr, 8, "descriptor array"); err != nil {
		return nil, err
	}
	for i := uint64(0); i < nIn+nOut; i++ {
		p := descs[i*DescriptorSize:]
		at := descPtr + i*DescriptorSize
		d := Descriptor{DType: DType(le.Uint32(p[0:])), Flags: le.Uint32(p[12:]),
			Data: le.Uint32(p[16:]), ByteLen: le.Uint32(p[20:]), Alias: le.Uint32(p[24:])}
		rank := uint64(le.Uint32(p[4:]))
		if !d.DType.Valid() {
			return nil, &Violation{What: "descriptor", Offset: at, Msg: fmt.Sprintf("dtype %d is not an ABI v1 type", uint32(d.DType))}
		}
		if rank > MaxRank {
			return nil, &Violation{What: "descriptor", Offset: at + 4, Msg: fmt.Sprintf("rank %d exceeds %d", rank, MaxRank)}
		}
		dimsPtr := uint64(le.Uint32(p[8:]))
		raw, err := GuestBytes(mem, dimsPtr, rank*DimSize, "dims array")
		if err != nil {
			return nil, err
		}
		d.Shape = make(Shape, rank)
		for j := range d.Shape {
			d.Shape[j] = int64(le.Uint64(raw[j*DimSize:]))
		}
		want, err := d.Shape.ByteLen(d.DType)
		if err != nil {
			return nil, &Violation{What: "descriptor", Offset: dimsPtr, Msg: err.Error()}
		}
		if want != uint64(d.ByteLen) {
			return nil, &Violation{What: "descriptor", Offset: at + 20, Msg: fmt.Sprintf("byte length %d does not match %s%s (%d bytes)", d.ByteLen, d.DType, d.Shape, want)}
		}
		if err := CheckRange(uint64(len(mem)), uint64(d.Data), uint64(d.ByteLen), "tensor data"); err != nil {
			return nil, err
		}
		if err := CheckAligned(uint64(d.Data), 16, "tensor data"); err != nil {
			return nil, err
		}
		isOut := i >= nIn
		if isOut != (d.Flags&FlagOutput != 0) {
			return nil, &Violation{What: "descriptor", Offset: at + 12, Msg: fmt.Sprintf("output flag is %v for descriptor %d of %d inputs", !isOut, i, nIn)}
		}
		if d.Flags&FlagAlias != 0 && (!isOut || uint64(d.Alias) >= nIn) {
			return nil, &Violation{What: "descriptor", Offset: at + 24, Msg: fmt.Sprintf("alias %d is not an input index", d.Alias)}
		}
		if isOut {
			f.Outputs = append(f.Outputs, d)
		} else {
			f.Inputs = append(f.Inputs, d)
		}
	}
	return f, nil
}

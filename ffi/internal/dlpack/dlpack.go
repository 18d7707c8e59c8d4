// Package dlpack is callbox's one DLPack layer: the Go mirror of the
// DLTensor layout that callbox_tensor has (include/callbox.h), the one
// table between DLPack element types and ABI dtypes, and the one check
// every foreign tensor passes before callbox reads or writes its memory,
// whether it comes through the C API on the CPU, or in CUDA memory
// through the GPU entries.
//
// Every number in a tensor is the foreign caller's and is untrusted: the
// checks here are the only place such a tensor is bounds-checked. A data
// pointer is checked as far as a pointer can be without touching it: not
// NULL (unless the tensor is empty), not in the lowest 64 KiB (which Linux
// never maps: vm.mmap_min_addr), and data + byte_offset + size inside the
// address space. What is NOT checked, because it cannot be without
// reading the memory, is that the pointer addresses that many readable
// (inputs) or writable (outputs) bytes: a C caller must guarantee that, as
// for memcpy.
//
// The package does no cgo: the structs are read in place through
// pointers the caller got from C.
package dlpack

import (
	"fmt"
	"math/bits"
	"unsafe"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// DeviceType is DLPack's DLDeviceType.
type DeviceType int32

// The device types callbox meets (DLPack's numbers).
const (
	CPU         DeviceType = 1
	CUDA        DeviceType = 2
	CUDAHost    DeviceType = 3
	CUDAManaged DeviceType = 13
)

// Device is DLPack's DLDevice.
type Device struct {
	Type DeviceType
	ID   int32
}

// Type codes (DLDataTypeCode).
const (
	CodeInt     = 0
	CodeUInt    = 1
	CodeFloat   = 2
	CodeBfloat  = 4
	CodeComplex = 5
	CodeBool    = 6
)

// DType is DLPack's DLDataType.
type DType struct {
	Code  uint8
	Bits  uint8
	Lanes uint16
}

// Tensor has the memory layout of DLPack's DLTensor (and so of
// callbox_tensor): 48 bytes on 64-bit platforms, read in place.
type Tensor struct {
	Data       unsafe.Pointer // host or device address; may be NULL when empty
	Device     Device
	NDim       int32
	DType      DType
	Shape      *int64
	Strides    *int64 // nil: dense row-major
	ByteOffset uint64
}

// Type is callbox_type: a result type without data.
type Type struct {
	DType DType
	NDim  int32
	Shape [abi.MaxRank]int64
}

// TensorSize is sizeof(DLTensor) on 64-bit platforms.
const TensorSize = 48

var (
	_ [TensorSize - unsafe.Sizeof(Tensor{})]struct{}
	_ [unsafe.Sizeof(Tensor{}) - TensorSize]struct{}
)

// table maps [code][bits/8] to an ABI dtype: the inverse of FromABI,
// built from it, so the encoding is written once.
var table = func() (t [CodeBool + 1][17]abi.DType) {
	for _, d := range abi.DTypes() {
		dl := FromABI(d)
		t[dl.Code][dl.Bits/8] = d
	}
	return t
}()

// FromABI is the DLPack encoding of an ABI dtype (its zero value for
// abi.Invalid). This switch is the one place the encoding is written.
func FromABI(d abi.DType) DType {
	bits := uint8(d.Size() * 8)
	switch d {
	case abi.PRED:
		return DType{CodeBool, 8, 1}
	case abi.S8, abi.S16, abi.S32, abi.S64:
		return DType{CodeInt, bits, 1}
	case abi.U8, abi.U16, abi.U32, abi.U64:
		return DType{CodeUInt, bits, 1}
	case abi.F16, abi.F32, abi.F64:
		return DType{CodeFloat, bits, 1}
	case abi.BF16:
		return DType{CodeBfloat, 16, 1}
	case abi.C64, abi.C128:
		return DType{CodeComplex, bits, 1}
	}
	return DType{}
}

// ToABI maps a DLPack element type onto an ABI dtype.
func ToABI(d DType) (abi.DType, bool) {
	if d.Lanes != 1 || d.Code >= uint8(len(table)) || d.Bits%8 != 0 || d.Bits/8 >= uint8(len(table[0])) {
		return abi.Invalid, false
	}
	t := table[d.Code][d.Bits/8]
	return t, t != abi.Invalid
}

// MinAddress is the lowest address a tensor's data may start at: Linux
// maps nothing below vm.mmap_min_addr (64 KiB by default), so a pointer
// there is NULL plus an offset, or a small integer passed as a pointer.
const MinAddress = 64 << 10

// MaxHostAddress bounds the end of host memory a tensor may name: user
// space ends below 2^47 on x86-64 (2^56 with five-level page tables) and
// below 2^52 on arm64, so an address past 2^57 is a kernel-half pointer
// (0xffff888000000000), a non-canonical one (0x0800000000000000) or a wild
// one. Reading it would fault inside the Go runtime and abort the caller's
// process; it is refused instead, as the lowest 64 KiB are. Device memory
// (the GPU entries) is not held to it.
const MaxHostAddress = 1 << 57

// Memory says which memory a caller can move bytes from: the C API reads
// host memory, the GPU entries device memory.
type Memory uint8

const (
	// OnHost is CPU memory, and CUDA-pinned host memory, which the CPU
	// reads directly.
	OnHost Memory = iota
	// OnDevice is CUDA device and managed memory, copied on a stream.
	OnDevice
)

// Accepts reports whether memory m is where a tensor on device d lives.
func (m Memory) Accepts(d DeviceType) bool {
	if m == OnHost {
		return d == CPU || d == CUDAHost
	}
	return d == CUDA || d == CUDAManaged
}

// View is a checked tensor: its element type, its shape (a view of the
// caller's shape array: copy it to keep it past the call), its data
// address (data + byte_offset) and its size in bytes.
type View struct {
	DType abi.DType
	Shape abi.Shape
	Addr  unsafe.Pointer // nil only when Bytes is 0
	Bytes uint64
}

// Data views a host-memory tensor's bytes in place (no copy). Its
// receiver is a pointer: a View is read right after CheckInto writes it,
// and copying it whole (16-byte loads over 8-byte stores) stalls on store
// forwarding, which a profile of the C door showed.
func (v *View) Data() []byte {
	if v.Bytes == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(v.Addr), v.Bytes)
}

// HostTensor points t at a host-memory view's bytes (no copy). It sets t
// field by field, for the reason Data takes a pointer: a whole-struct copy
// of a View just written by CheckInto stalls on store forwarding.
func (v *View) HostTensor(t *abi.Tensor) {
	t.DType = v.DType
	t.Shape = abi.Shape(unsafe.Slice(unsafe.SliceData(v.Shape), len(v.Shape)))
	t.Data = v.Data()
}

// Error is a tensor that fails Check, saying why; the caller names the
// argument. Its kind is InvalidArgument.
type Error struct{ Reason string }

func (e *Error) Error() string { return e.Reason }

// Kind is InvalidArgument (abi.Kinder).
func (e *Error) Kind() abi.Kind { return abi.InvalidArgument }

// Is matches InvalidArgument.
func (e *Error) Is(target error) bool { return abi.IsKind(abi.InvalidArgument, target) }

//go:noinline
func fail(format string, args ...any) error { return &Error{Reason: fmt.Sprintf(format, args...)} }

// Check validates t for memory m and views it, without copying: a tensor
// in m, of a dtype callbox has, rank at most abi.MaxRank, non-negative
// dimensions whose byte size fits abi.MaxTensorBytes, strides NULL or
// row-major (an empty tensor may have any strides: it has no element to
// misplace, and NumPy and PyTorch give empty tensors arbitrary ones), and
// data non-NULL unless the tensor is empty, with data + byte_offset inside
// the address space. It is on every call's path: the common case is one
// loop, and explain names what is wrong otherwise.
func Check(t *Tensor, m Memory) (View, error) {
	var v View
	err := CheckInto(&v, t, m)
	return v, err
}

// CheckInto is Check writing the view into *v (left zero on an error):
// the form the per-call paths use, which returns nothing by value.
func CheckInto(v *View, t *Tensor, m Memory) error {
	d, ok := ToABI(t.DType)
	ndim := t.NDim
	if !ok || !m.Accepts(t.Device.Type) || uint32(ndim) > abi.MaxRank || ndim > 0 && t.Shape == nil {
		return explain(t, m)
	}
	var shape abi.Shape
	n := uint64(d.Size())
	if ndim > 0 {
		shape = abi.Shape(unsafe.Slice(t.Shape, ndim))
		elems := uint64(1)
		for _, dim := range shape {
			hi, lo := bits.Mul64(elems, uint64(dim))
			if dim < 0 || hi != 0 {
				return explain(t, m)
			}
			elems = lo
		}
		hi, lo := bits.Mul64(elems, n)
		if hi != 0 {
			return explain(t, m)
		}
		n = lo
		if t.Strides != nil && n > 0 {
			if err := checkRowMajor(shape, unsafe.Slice(t.Strides, ndim)); err != nil {
				return err
			}
		}
	}
	if n > abi.MaxTensorBytes {
		return tooBig(d, shape, n)
	}
	var addr unsafe.Pointer
	if n > 0 {
		base := uintptr(t.Data)
		start := base + uintptr(t.ByteOffset)
		if base == 0 || start < base || t.ByteOffset > uint64(^uintptr(0)) || start+uintptr(n) < start || start < MinAddress ||
			m == OnHost && uint64(start)+n > MaxHostAddress {
			return badAddress(t, d, shape, n)
		}
		addr = unsafe.Add(t.Data, uintptr(t.ByteOffset))
	}
	v.DType, v.Shape, v.Addr, v.Bytes = d, shape, addr, n
	return nil
}

// The errors of Check's last steps, formatted out of line so that Check's
// common path carries no formatting arguments.

//go:noinline
func tooBig(d abi.DType, shape abi.Shape, n uint64) error {
	return fail("%s%s is %d bytes, above the maximum of %d", d, shape, n, uint64(abi.MaxTensorBytes))
}

//go:noinline
func badAddress(t *Tensor, d abi.DType, shape abi.Shape, n uint64) error {
	base := uintptr(t.Data)
	start := base + uintptr(t.ByteOffset)
	switch {
	case base == 0:
		return fail("data is NULL for %s%s (%d bytes)", d, shape, n)
	case start < base || t.ByteOffset > uint64(^uintptr(0)) || start+uintptr(n) < start:
		return fail("byte_offset %d and %d bytes overflow the address space from data %#x", t.ByteOffset, n, base)
	case start >= MinAddress:
		return fail("data %#x (+ byte_offset %d) and %d bytes pass %#x, where user space ends: a kernel, non-canonical or wild pointer", base, t.ByteOffset, n, uint64(MaxHostAddress))
	}
	return fail("data %#x (+ byte_offset %d) is in the lowest %d KiB of the address space, which is never mapped: a NULL or wild pointer", base, t.ByteOffset, MinAddress>>10)
}

// CheckType validates only t's dtype and shape (callbox_output_types: the
// data, strides and device are not read).
func CheckType(t *Tensor) (abi.DType, abi.Shape, error) {
	d, ok := ToABI(t.DType)
	if !ok {
		return abi.Invalid, nil, unknownDType(t.DType)
	}
	shape, err := shapeOf(t)
	return d, shape, err
}

func unknownDType(d DType) error {
	return fail("unknown dtype {code %d, bits %d, lanes %d}", d.Code, d.Bits, d.Lanes)
}

// explain names what is wrong with a tensor Check refused on its fast path.
func explain(t *Tensor, m Memory) error {
	if !m.Accepts(t.Device.Type) {
		switch {
		case m == OnHost && OnDevice.Accepts(t.Device.Type):
			// GPU tensors need the stream they are ordered on, which a
			// host-memory call does not take: guessing one (the legacy
			// default stream) would race with work on any other.
			return fail("device type %d is CUDA memory: call GPU tensors with callbox_cuda_call_dlpack, which takes the CUDA stream they are ordered on (it calls the default host, callbox_set_default_host)", t.Device.Type)
		case m == OnDevice && OnHost.Accepts(t.Device.Type):
			return fail("device type %d is host memory, not a CUDA device (call it with callbox_call)", t.Device.Type)
		case m == OnHost:
			return fail("device type %d is not host memory (want %d, CPU)", t.Device.Type, CPU)
		default:
			return fail("device type %d is not a CUDA device (want %d, CUDA)", t.Device.Type, CUDA)
		}
	}
	d, ok := ToABI(t.DType)
	if !ok {
		return unknownDType(t.DType)
	}
	shape, err := shapeOf(t)
	if err != nil {
		return err
	}
	if _, err := shape.ByteLen(d); err != nil {
		return fail("%v", err)
	}
	return fail("%s%s is refused", d, shape) // not reached: Check accepts what passes here
}

// shapeOf checks a tensor's rank and dimensions and views its shape.
func shapeOf(t *Tensor) (abi.Shape, error) {
	ndim := t.NDim
	switch {
	case ndim < 0:
		return nil, fail("rank %d is negative", ndim)
	case ndim > abi.MaxRank:
		return nil, fail("%v", abi.RankError(int(ndim)))
	case ndim == 0:
		return nil, nil
	case t.Shape == nil:
		return nil, fail("shape is NULL with rank %d", ndim)
	}
	s := abi.Shape(unsafe.Slice(t.Shape, ndim))
	for i, d := range s {
		if d < 0 {
			return nil, fail("dimension %d is negative (%d)", i, d)
		}
	}
	return s, nil
}

// checkRowMajor accepts strides (in elements) that describe the dense
// row-major layout of a non-empty shape; a dimension of size 1 may have
// any stride.
func checkRowMajor(shape abi.Shape, strides []int64) error {
	want := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		if shape[i] != 1 && strides[i] != want {
			return fail("strides %v are not row-major for shape %v (want NULL or %v; make the tensor contiguous first)", strides, []int64(shape), RowMajor(shape))
		}
		want *= shape[i]
	}
	return nil
}

// RowMajor is the dense row-major strides (in elements) of shape.
func RowMajor(shape abi.Shape) []int64 {
	out := make([]int64, len(shape))
	want := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		out[i] = want
		want *= shape[i]
	}
	return out
}

// DTypeInfo describes one dtype callbox has, for binding layers that
// must not keep a table of their own (callbox_dtypes).
type DTypeInfo struct {
	Name   string // "f32"
	DLPack DType
	XLA    int32 // the ABI / XLA PrimitiveType number
	Bytes  int
}

// DTypes lists every dtype callbox has with its encodings, in ABI order.
func DTypes() []DTypeInfo {
	var out []DTypeInfo
	for _, d := range abi.DTypes() {
		out = append(out, DTypeInfo{Name: d.String(), DLPack: FromABI(d), XLA: int32(d), Bytes: int(d.Size())})
	}
	return out
}

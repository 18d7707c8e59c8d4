package abi

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unsafe"
)

// MaxRank is the largest rank ABI v1 accepts. XLA itself has no hard limit;
// 32 is far above any real program and keeps every descriptor bounded.
const MaxRank = 32

// MaxTensorBytes is the largest tensor ABI v1 can describe: byte lengths are
// u32 in the call frame because guest memory is wasm32.
const MaxTensorBytes = math.MaxUint32

// RankError is the refusal of a tensor of rank above MaxRank, worded once
// for every door (the C library refuses one before reading its shape).
func RankError(rank int) error {
	return fmt.Errorf("rank %d exceeds the ABI maximum %d", rank, MaxRank)
}

// Shape is a dense, row-major (major-to-minor) tensor shape. A nil or empty
// shape is a rank-0 scalar.
type Shape []int64

// NumElements returns the element count, or an error when a dimension is
// negative or the product overflows.
func (s Shape) NumElements() (uint64, error) {
	if len(s) > MaxRank {
		return 0, RankError(len(s))
	}
	n := uint64(1)
	for i, d := range s {
		if d < 0 {
			return 0, fmt.Errorf("dimension %d is negative (%d)", i, d)
		}
		if d != 0 && n > math.MaxUint64/uint64(d) {
			return 0, fmt.Errorf("shape %v overflows", []int64(s))
		}
		n *= uint64(d)
	}
	return n, nil
}

// ByteLen returns the dense byte length of a tensor of this shape and type.
func (s Shape) ByteLen(d DType) (uint64, error) {
	if !d.Valid() {
		return 0, fmt.Errorf("unsupported dtype %s", d)
	}
	n, err := s.NumElements()
	if err != nil {
		return 0, err
	}
	if n > math.MaxUint64/uint64(d.Size()) {
		return 0, fmt.Errorf("shape %v of %s overflows", []int64(s), d)
	}
	return n * uint64(d.Size()), nil
}

// Equal reports whether two shapes have the same dimensions.
func (s Shape) Equal(o Shape) bool {
	if len(s) != len(o) {
		return false
	}
	for i := range s {
		if s[i] != o[i] {
			return false
		}
	}
	return true
}

// String formats the shape as "[2,3]" ("[]" for a scalar).
func (s Shape) String() string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range s {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(d, 10))
	}
	b.WriteByte(']')
	return b.String()
}

// Tensor is a dense row-major tensor on the host: an element type, a shape
// and the raw little-endian bytes. Data is not copied by the constructors in
// this package; a Tensor is a view.
type Tensor struct {
	DType DType
	Shape Shape
	Data  []byte
}

// Type formats the tensor's type as in a signature, e.g. "f32[2,3]".
func (t Tensor) Type() string { return t.DType.String() + t.Shape.String() }

// Validate checks that the dtype is supported and len(Data) matches the shape.
func (t Tensor) Validate() error {
	want, err := t.Shape.ByteLen(t.DType)
	if err != nil {
		return err
	}
	if want > MaxTensorBytes {
		return fmt.Errorf("%s is %d bytes, above the ABI maximum of %d", t.Type(), want, uint64(MaxTensorBytes))
	}
	if uint64(len(t.Data)) != want {
		return fmt.Errorf("%s needs %d bytes of data, has %d", t.Type(), want, len(t.Data))
	}
	if t.DType == PRED {
		for i, b := range t.Data {
			if b > 1 {
				return fmt.Errorf("%s element %d is %d; pred elements are 0 or 1", t.Type(), i, b)
			}
		}
	}
	return t.Shape.checkStrides(t.DType)
}

// checkStrides rejects shapes whose strides do not fit wasm32, which only
// matters for empty tensors: f32[0, 5000000000] holds no data, but the
// stride of its first dimension is 20 GB, and guests compute strides in
// 32 bits.
func (s Shape) checkStrides(d DType) error {
	stride := uint64(d.Size())
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == 0 {
			continue
		}
		if uint64(s[i]) > MaxTensorBytes/stride {
			return fmt.Errorf("shape %v of %s has strides beyond the 4 GiB wasm32 address space", s, d)
		}
		stride *= uint64(s[i])
	}
	return nil
}

// New allocates a zeroed tensor of the given type and shape. Its data is
// 8-byte aligned, so typed views (View) always succeed.
func New(d DType, shape ...int64) (Tensor, error) {
	n, err := Shape(shape).ByteLen(d)
	if err != nil {
		return Tensor{}, err
	}
	if n > MaxTensorBytes {
		return Tensor{}, fmt.Errorf("%s%v is %d bytes, above the ABI maximum", d, shape, n)
	}
	words := make([]uint64, (n+7)/8)
	var data []byte
	if len(words) > 0 {
		data = unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n)
	} else {
		data = []byte{}
	}
	return Tensor{DType: d, Shape: append(Shape(nil), shape...), Data: data}, nil
}

// Element is the set of Go types that map one-to-one onto an ABI dtype.
type Element interface {
	~bool | ~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64 | ~complex64 | ~complex128
}

// DTypeOf returns the dtype of a Go element type. uint16 maps to U16; F16
// and BF16 have no Go type: build those tensors with New and write their
// bits through View[uint16].
func DTypeOf[T Element]() DType {
	var z T
	switch any(z).(type) {
	case bool:
		return PRED
	case int8:
		return S8
	case int16:
		return S16
	case int32:
		return S32
	case int64:
		return S64
	case uint8:
		return U8
	case uint16:
		return U16
	case uint32:
		return U32
	case uint64:
		return U64
	case float32:
		return F32
	case float64:
		return F64
	case complex64:
		return C64
	case complex128:
		return C128
	}
	return Invalid
}

// From wraps a Go slice as a tensor of the given shape without copying.
// The shape defaults to [len(data)] when omitted. It panics when the shape
// does not match the slice length, as a slice index out of range would.
func From[T Element](data []T, shape ...int64) Tensor {
	if shape == nil {
		shape = []int64{int64(len(data))}
	}
	d := DTypeOf[T]()
	n, err := Shape(shape).NumElements()
	if err != nil || n != uint64(len(data)) {
		panic(fmt.Sprintf("abi.From: shape %v does not hold %d elements", shape, len(data)))
	}
	var raw []byte
	if len(data) > 0 {
		raw = unsafe.Slice((*byte)(unsafe.Pointer(&data[0])), len(data)*int(d.Size()))
	} else {
		raw = []byte{}
	}
	return Tensor{DType: d, Shape: shape, Data: raw}
}

// Scalar makes a rank-0 tensor holding v.
func Scalar[T Element](v T) Tensor {
	return From([]T{v}, []int64{}...)
}

// View returns the tensor's data as a []T without copying. It fails when T
// does not match the dtype or the data is not aligned for T.
func View[T Element](t Tensor) ([]T, error) {
	want := DTypeOf[T]()
	if want != t.DType && !(want == U16 && (t.DType == F16 || t.DType == BF16)) {
		return nil, fmt.Errorf("cannot view %s data as %s", t.DType, want)
	}
	size := int(want.Size())
	if len(t.Data)%size != 0 {
		return nil, fmt.Errorf("%s data length %d is not a multiple of %d", t.DType, len(t.Data), size)
	}
	if len(t.Data) == 0 {
		return []T{}, nil
	}
	var z T
	if align := unsafe.Alignof(z); uintptr(unsafe.Pointer(&t.Data[0]))%align != 0 {
		return nil, fmt.Errorf("%s data is not %d-byte aligned", t.DType, align)
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&t.Data[0])), len(t.Data)/size), nil
}

// MustView is View that panics on error, for tests and examples.
func MustView[T Element](t Tensor) []T {
	v, err := View[T](t)
	if err != nil {
		panic(err)
	}
	return v
}

//go:build wasip1

package callbox

import "strconv"

// DType is an element type code (ABI.md §3): XLA's PrimitiveType numbers.
type DType uint32

// The element types of ABI v1.
const (
	PRED DType = 1
	S8   DType = 2
	S16  DType = 3
	S32  DType = 4
	S64  DType = 5
	U8   DType = 6
	U16  DType = 7
	U32  DType = 8
	U64  DType = 9
	F16  DType = 10
	F32  DType = 11
	F64  DType = 12
	C64  DType = 15
	BF16 DType = 16
	C128 DType = 18
)

var dtypes = [...]struct {
	name string
	size int
}{
	PRED: {"pred", 1}, S8: {"s8", 1}, S16: {"s16", 2}, S32: {"s32", 4}, S64: {"s64", 8},
	U8: {"u8", 1}, U16: {"u16", 2}, U32: {"u32", 4}, U64: {"u64", 8},
	F16: {"f16", 2}, F32: {"f32", 4}, F64: {"f64", 8}, C64: {"c64", 8}, BF16: {"bf16", 2}, C128: {"c128", 16},
}

// Size is the size of one element in bytes, or 0 for a code ABI v1 does
// not define.
func (d DType) Size() int {
	if int(d) < len(dtypes) {
		return dtypes[d].size
	}
	return 0
}

// String is the name signatures use ("f32", "s64").
func (d DType) String() string {
	if d.Size() != 0 {
		return dtypes[d].name
	}
	return "dtype(" + strconv.FormatUint(uint64(d), 10) + ")"
}

// Element is the set of Go types a View can hold: each maps onto one dtype
// (bool is pred; f16 and bf16 have no Go type, read them as raw bytes
// through Tensor.Data).
type Element interface {
	bool | int8 | int16 | int32 | int64 | uint8 | uint16 | uint32 | uint64 |
		float32 | float64 | complex64 | complex128
}

// DTypeOf returns the dtype of the element type T.
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
	default: // complex128
		return C128
	}
}

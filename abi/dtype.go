package abi

import (
	"fmt"
	"strings"
)

// DType is an element type, numbered exactly as XLA's PrimitiveType and the
// XLA FFI DataType enum, so a descriptor can be handed to or from XLA without
// a translation table.
type DType uint32

// Element types of ABI v1. The numbers are XLA's and never change.
const (
	Invalid DType = 0
	PRED    DType = 1
	S8      DType = 2
	S16     DType = 3
	S32     DType = 4
	S64     DType = 5
	U8      DType = 6
	U16     DType = 7
	U32     DType = 8
	U64     DType = 9
	F16     DType = 10
	F32     DType = 11
	F64     DType = 12
	C64     DType = 15
	BF16    DType = 16
	C128    DType = 18
)

type dtypeInfo struct {
	name string
	size uint32
}

var dtypeTable = [...]dtypeInfo{
	PRED: {"pred", 1},
	S8:   {"s8", 1},
	S16:  {"s16", 2},
	S32:  {"s32", 4},
	S64:  {"s64", 8},
	U8:   {"u8", 1},
	U16:  {"u16", 2},
	U32:  {"u32", 4},
	U64:  {"u64", 8},
	F16:  {"f16", 2},
	F32:  {"f32", 4},
	F64:  {"f64", 8},
	C64:  {"c64", 8},
	BF16: {"bf16", 2},
	C128: {"c128", 16},
}

// Valid reports whether d is an element type ABI v1 supports.
func (d DType) Valid() bool {
	return int(d) < len(dtypeTable) && dtypeTable[d].size != 0
}

// Size is the size of one element in bytes; 0 for an unsupported type.
func (d DType) Size() uint32 {
	if !d.Valid() {
		return 0
	}
	return dtypeTable[d].size
}

// String is the lower-case XLA name of the type ("f32", "bf16", "pred").
func (d DType) String() string {
	if !d.Valid() {
		return fmt.Sprintf("dtype(%d)", uint32(d))
	}
	return dtypeTable[d].name
}

// ParseDType parses an XLA type name such as "f32", "s64" or "pred".
// The aliases "bool", "i8".."i64" are accepted for convenience.
func ParseDType(s string) (DType, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	switch name {
	case "bool":
		return PRED, nil
	case "i8", "i16", "i32", "i64":
		name = "s" + name[1:]
	}
	for d, info := range dtypeTable {
		if info.size != 0 && info.name == name {
			return DType(d), nil
		}
	}
	return Invalid, fmt.Errorf("unknown dtype %q (want one of pred, s8, s16, s32, s64, u8, u16, u32, u64, f16, bf16, f32, f64, c64, c128)", s)
}

// DTypes lists every element type ABI v1 supports, in XLA number order.
func DTypes() []DType {
	var out []DType
	for d := range dtypeTable {
		if DType(d).Valid() {
			out = append(out, DType(d))
		}
	}
	return out
}

//go:build cgo

package main

import (
	"fmt"
	"math/bits"
	"unsafe"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// The DLPack layout of callbox_tensor (include/callbox.h). capi.go checks
// at compile time that these mirror the C structs exactly.
type dlDevice struct {
	Type int32
	ID   int32
}

type dlDType struct {
	Code  uint8
	Bits  uint8
	Lanes uint16
}

type dlTensor struct {
	Data       unsafe.Pointer
	Device     dlDevice
	NDim       int32
	DType      dlDType
	Shape      *int64
	Strides    *int64
	ByteOffset uint64
}

// dlType is callbox_type: a result type without data.
type dlType struct {
	DType dlDType
	NDim  int32
	Shape [abi.MaxRank]int64
}

// DLPack codes and device types (include/callbox.h).
const (
	dlInt     = 0
	dlUInt    = 1
	dlFloat   = 2
	dlBfloat  = 4
	dlComplex = 5
	dlBool    = 6

	deviceCPU         = 1
	deviceCUDA        = 2
	deviceCUDAHost    = 3
	deviceCUDAManaged = 13
)

// dtypeFromDL maps a DLPack element type onto an ABI dtype.
func dtypeFromDL(d dlDType) (abi.DType, bool) {
	if d.Lanes != 1 || d.Code >= uint8(len(dlTable)) || d.Bits%8 != 0 || d.Bits/8 >= uint8(len(dlTable[0])) {
		return abi.Invalid, false
	}
	t := dlTable[d.Code][d.Bits/8]
	return t, t != abi.Invalid
}

// dlTable is dtypeFromDL's table: [code][bits/8].
var dlTable = func() (t [dlBool + 1][17]abi.DType) {
	for _, d := range abi.DTypes() {
		dl := dlFromDType(d)
		t[dl.Code][dl.Bits/8] = d
	}
	return t
}()

// dlFromDType is the inverse of dtypeFromDL.
func dlFromDType(d abi.DType) dlDType {
	bits := uint8(d.Size() * 8)
	switch d {
	case abi.PRED:
		return dlDType{dlBool, 8, 1}
	case abi.S8, abi.S16, abi.S32, abi.S64:
		return dlDType{dlInt, bits, 1}
	case abi.U8, abi.U16, abi.U32, abi.U64:
		return dlDType{dlUInt, bits, 1}
	case abi.F16, abi.F32, abi.F64:
		return dlDType{dlFloat, bits, 1}
	case abi.BF16:
		return dlDType{dlBfloat, 16, 1}
	case abi.C64, abi.C128:
		return dlDType{dlComplex, bits, 1}
	}
	return dlDType{}
}

// argName names an argument of a C API call or an XLA buffer: a role
// ("input", "outputs", "callback") and, for one of several, its index.
// It is formatted only when there is an error to report.
type argName struct {
	role  string
	index int // -1: not one of several
}

func (a argName) String() string {
	if a.index < 0 {
		return a.role
	}
	return fmt.Sprintf("%s %d", a.role, a.index)
}

func arg(role string) argName { return argName{role: role, index: -1} }

// argError is a bad argument, named.
type argError struct {
	arg    argName
	reason string
}

func (e *argError) Error() string { return e.arg.String() + ": " + e.reason }

// Kind is InvalidArgument (abi.Kinder).
func (e *argError) Kind() abi.Kind { return abi.InvalidArgument }

//go:noinline
func badArg(a argName, format string, args ...any) error {
	return &argError{arg: a, reason: fmt.Sprintf(format, args...)}
}

// shapeOf views a C shape array as an abi.Shape (no copy) after checking
// the rank. The host copies shapes it keeps.
func shapeOf(arg argName, ndim int64, dims *int64) (abi.Shape, error) {
	if ndim < 0 {
		return nil, badArg(arg, "rank %d is negative", ndim)
	}
	if ndim > abi.MaxRank {
		return nil, badArg(arg, "rank %d exceeds the maximum %d", ndim, abi.MaxRank)
	}
	if ndim == 0 {
		return nil, nil
	}
	if dims == nil {
		return nil, badArg(arg, "shape is NULL with rank %d", ndim)
	}
	s := abi.Shape(unsafe.Slice(dims, ndim))
	for i, d := range s {
		if d < 0 {
			return nil, badArg(arg, "dimension %d is negative (%d)", i, d)
		}
	}
	return s, nil
}

// viewTensor checks a tensor's size and views its data (no copy); data
// may be NULL only when the tensor is empty. shape has been checked by
// shapeOf (rank, non-negative dimensions).
func viewTensor(arg argName, d abi.DType, shape abi.Shape, data unsafe.Pointer) (abi.Tensor, error) {
	n, err := shape.ByteLen(d)
	if err != nil {
		return abi.Tensor{}, badArg(arg, "%v", err)
	}
	if n > abi.MaxTensorBytes {
		return abi.Tensor{}, badArg(arg, "%s%s is %d bytes, above the maximum of %d", d, shape, n, uint64(abi.MaxTensorBytes))
	}
	if n == 0 {
		return abi.Tensor{DType: d, Shape: shape, Data: []byte{}}, nil
	}
	if data == nil {
		return abi.Tensor{}, badArg(arg, "data is NULL for %s%s (%d bytes)", d, shape, n)
	}
	return abi.Tensor{DType: d, Shape: shape, Data: unsafe.Slice((*byte)(data), n)}, nil
}

// fromDL checks a callbox_tensor and views it as an abi.Tensor without
// copying (fromDLInto).
func fromDL(arg argName, t *dlTensor) (abi.Tensor, error) {
	var out abi.Tensor
	if err := fromDLInto(&out, arg.role, arg.index, t); err != nil {
		return abi.Tensor{}, err
	}
	return out, nil
}

// fromDLInto checks a callbox_tensor and views it in *dst without copying:
// a CPU tensor of a known dtype, rank at most MaxRank, non-negative
// dimensions, row-major (or NULL) strides. It is on every call's path, so
// the common case is one loop writing dst in place; slowCheck finds and
// names what is wrong otherwise (role and index name the argument).
func fromDLInto(dst *abi.Tensor, role string, index int, t *dlTensor) error {
	d, ok := dtypeFromDL(t.DType)
	ndim := t.NDim
	if !ok || t.Device.Type != deviceCPU && t.Device.Type != deviceCUDAHost || uint32(ndim) > abi.MaxRank || ndim > 0 && t.Shape == nil {
		return slowCheck(argName{role, index}, t)
	}
	var shape abi.Shape
	n := uint64(d.Size()) // bytes: overflow is checked as abi.Shape.ByteLen does
	if ndim > 0 {
		shape = abi.Shape(unsafe.Slice(t.Shape, ndim))
		elems := uint64(1)
		for _, dim := range shape {
			hi, lo := bits.Mul64(elems, uint64(dim))
			if dim < 0 || hi != 0 {
				return slowCheck(argName{role, index}, t)
			}
			elems = lo
		}
		hi, lo := bits.Mul64(elems, n)
		if hi != 0 {
			return slowCheck(argName{role, index}, t)
		}
		n = lo
		if t.Strides != nil {
			if err := checkRowMajor(argName{role, index}, shape, unsafe.Slice(t.Strides, ndim)); err != nil {
				return err
			}
		}
	}
	if n > abi.MaxTensorBytes {
		return badArg(argName{role, index}, "%s%s is %d bytes, above the maximum of %d", d, shape, n, uint64(abi.MaxTensorBytes))
	}
	dst.DType, dst.Shape = d, shape
	if n == 0 {
		dst.Data = []byte{}
		return nil
	}
	data := t.Data
	if data == nil {
		return badArg(argName{role, index}, "data is NULL for %s%s (%d bytes)", d, shape, n)
	}
	dst.Data = unsafe.Slice((*byte)(unsafe.Add(data, uintptr(t.ByteOffset))), n)
	return nil
}

// slowCheck names what is wrong with a tensor fromDL refused.
func slowCheck(arg argName, t *dlTensor) error {
	switch t.Device.Type {
	case deviceCPU, deviceCUDAHost:
	case deviceCUDA, deviceCUDAManaged:
		// GPU tensors need the stream they are ordered on, which this
		// call does not take: guessing one (the legacy default stream)
		// would race with work on any other.
		return badArg(arg, "device type %d is CUDA memory: call GPU tensors with callbox_cuda_call_dlpack, which takes the CUDA stream they are ordered on (it calls the default host, callbox_set_default_host)", t.Device.Type)
	default:
		return badArg(arg, "device type %d is not host memory (want %d, CPU)", t.Device.Type, deviceCPU)
	}
	d, ok := dtypeFromDL(t.DType)
	if !ok {
		return badArg(arg, "unknown dtype {code %d, bits %d, lanes %d}", t.DType.Code, t.DType.Bits, t.DType.Lanes)
	}
	shape, err := shapeOf(arg, int64(t.NDim), t.Shape)
	if err != nil {
		return err
	}
	_, err = viewTensor(arg, d, shape, t.Data)
	return err
}

// checkRowMajor accepts strides (in elements) that describe the dense
// row-major layout; a dimension of size 1 may have any stride, and an
// empty tensor any strides.
func checkRowMajor(arg argName, shape abi.Shape, strides []int64) error {
	for _, d := range shape {
		if d == 0 {
			return nil
		}
	}
	want := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		if shape[i] != 1 && strides[i] != want {
			return badArg(arg, "strides %v are not row-major for shape %v (want NULL or %v)", strides, []int64(shape), rowMajor(shape))
		}
		want *= shape[i]
	}
	return nil
}

func rowMajor(shape abi.Shape) []int64 {
	out := make([]int64, len(shape))
	want := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		out[i] = want
		want *= shape[i]
	}
	return out
}

// fromDLs converts n C tensors at p into into[:n] (a new slice when into
// is too short); role is "input" or "output".
func fromDLs(role string, p *dlTensor, n uintptr, into []abi.Tensor) ([]abi.Tensor, error) {
	if n == 0 {
		return into[:0], nil
	}
	if p == nil {
		return nil, badArg(arg(role+"s"), "NULL with a count of %d", n)
	}
	if n > maxTensors {
		return nil, badArg(arg(role+"s"), "count %d exceeds the maximum %d", n, maxTensors)
	}
	if n > uintptr(len(into)) {
		into = make([]abi.Tensor, n)
	}
	out := into[:n]
	ts := unsafe.Slice(p, n)
	for i := range out {
		if err := fromDLInto(&out[i], role, i, &ts[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// maxTensors bounds the inputs or outputs of one call.
const maxTensors = 1024

// cloneTensor copies a tensor into Go memory, for calls that run after the
// C call returns (taps).
func cloneTensor(t abi.Tensor) abi.Tensor {
	return abi.Tensor{DType: t.DType, Shape: append(abi.Shape(nil), t.Shape...), Data: append([]byte(nil), t.Data...)}
}

package cuda

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/host"
)

// DLPack device types this package meets.
const (
	DLCPU         = 1
	DLCUDA        = 2
	DLCUDAHost    = 3
	DLCUDAManaged = 13
)

// DLPack type codes.
const (
	dlInt     = 0
	dlUInt    = 1
	dlFloat   = 2
	dlBfloat  = 4
	dlComplex = 5
	dlBool    = 6
)

// DLDevice is DLPack's DLDevice.
type DLDevice struct {
	DeviceType int32
	DeviceID   int32
}

// DLDataType is DLPack's DLDataType.
type DLDataType struct {
	Code  uint8
	Bits  uint8
	Lanes uint16
}

// DLTensor has the memory layout of DLPack's DLTensor (48 bytes on 64-bit
// platforms), so a *DLTensor from C can be read in place. Data is a device
// address, kept as an integer.
type DLTensor struct {
	Data       uintptr
	Device     DLDevice
	NDim       int32
	DType      DLDataType
	Shape      *int64
	Strides    *int64 // nil: compact row-major
	ByteOffset uint64
}

// Offsets of DLTensor as DLPack's C header lays it out; checked in tests.
const (
	dlTensorSize = 48
)

var _ [dlTensorSize - unsafe.Sizeof(DLTensor{})]struct{}
var _ [unsafe.Sizeof(DLTensor{}) - dlTensorSize]struct{}

// DLPackDType maps a DLPack type to an ABI element type.
func DLPackDType(t DLDataType) (abi.DType, error) {
	if t.Lanes != 1 {
		return abi.Invalid, fmt.Errorf("vector type with %d lanes (only lanes=1 is supported)", t.Lanes)
	}
	var d abi.DType
	switch t.Code {
	case dlInt:
		d = map[uint8]abi.DType{8: abi.S8, 16: abi.S16, 32: abi.S32, 64: abi.S64}[t.Bits]
	case dlUInt:
		d = map[uint8]abi.DType{8: abi.U8, 16: abi.U16, 32: abi.U32, 64: abi.U64}[t.Bits]
	case dlFloat:
		d = map[uint8]abi.DType{16: abi.F16, 32: abi.F32, 64: abi.F64}[t.Bits]
	case dlBfloat:
		if t.Bits == 16 {
			d = abi.BF16
		}
	case dlComplex:
		d = map[uint8]abi.DType{64: abi.C64, 128: abi.C128}[t.Bits]
	case dlBool:
		if t.Bits == 8 {
			d = abi.PRED
		}
	}
	if d == abi.Invalid {
		return d, fmt.Errorf("DLPack type code %d with %d bits has no ABI element type", t.Code, t.Bits)
	}
	return d, nil
}

// BufferFromDLPack checks that t is a dense row-major tensor in CUDA device
// (or managed) memory and describes it as a Buffer. Every number in t is
// the caller's, so each is checked.
func BufferFromDLPack(t *DLTensor) (Buffer, error) {
	if t == nil {
		return Buffer{}, fmt.Errorf("null DLTensor")
	}
	switch t.Device.DeviceType {
	case DLCUDA, DLCUDAManaged:
	case DLCPU, DLCUDAHost:
		return Buffer{}, fmt.Errorf("device type %d is host memory, not a CUDA device (call it through the CPU path)", t.Device.DeviceType)
	default:
		return Buffer{}, fmt.Errorf("device type %d is not a CUDA device", t.Device.DeviceType)
	}
	d, err := DLPackDType(t.DType)
	if err != nil {
		return Buffer{}, err
	}
	if t.NDim < 0 || t.NDim > abi.MaxRank {
		return Buffer{}, fmt.Errorf("rank %d is outside 0..%d", t.NDim, abi.MaxRank)
	}
	if t.NDim > 0 && t.Shape == nil {
		return Buffer{}, fmt.Errorf("rank %d with a null shape", t.NDim)
	}
	var dims, strides []int64
	if t.NDim > 0 {
		dims = unsafe.Slice(t.Shape, t.NDim)
		if t.Strides != nil {
			strides = unsafe.Slice(t.Strides, t.NDim)
		}
	}
	shape := make(abi.Shape, t.NDim)
	for i, n := range dims {
		if n < 0 {
			return Buffer{}, fmt.Errorf("dimension %d is %d", i, n)
		}
		shape[i] = n
	}
	n, err := shape.ByteLen(d)
	if err != nil {
		return Buffer{}, err
	}
	if strides != nil {
		want := int64(1)
		for i := len(dims) - 1; i >= 0; i-- {
			if dims[i] != 1 && strides[i] != want {
				return Buffer{}, fmt.Errorf("strides %v are not compact row-major for shape %v (make the tensor contiguous first)", strides, dims)
			}
			want *= dims[i]
		}
	}
	if t.Data == 0 && n > 0 {
		return Buffer{}, fmt.Errorf("null data pointer")
	}
	p := t.Data + uintptr(t.ByteOffset)
	if p < t.Data {
		return Buffer{}, fmt.Errorf("byte_offset %d overflows the address space", t.ByteOffset)
	}
	return Buffer{Ptr: DevicePtr(p), DType: d, Shape: shape}, nil
}

// CallDLPack is Call on DLPack tensors in CUDA memory (PyTorch and CuPy
// tensors on a GPU), all on one device, with s a stream on that device.
// A tensor that is not dense, not on a CUDA device, or of a type the ABI
// lacks is refused, naming it.
func (g *GPU) CallDLPack(ctx context.Context, cb *host.Callback, s Stream, inputs, outputs []*DLTensor) (Stats, error) {
	ins, outs := make([]Buffer, len(inputs)), make([]Buffer, len(outputs))
	device := int32(-1)
	conv := func(what string, ts []*DLTensor, bs []Buffer) error {
		for i, t := range ts {
			b, err := BufferFromDLPack(t)
			if err != nil {
				return g.refuse(cb, fmt.Sprintf("%s %d: %v", what, i, err))
			}
			if device >= 0 && t.Device.DeviceID != device {
				return g.refuse(cb, fmt.Sprintf("%s %d is on CUDA device %d, another tensor on device %d", what, i, t.Device.DeviceID, device))
			}
			device = t.Device.DeviceID
			bs[i] = b
		}
		return nil
	}
	if err := conv("argument", inputs, ins); err != nil {
		return Stats{}, err
	}
	if err := conv("result", outputs, outs); err != nil {
		return Stats{}, err
	}
	return g.Call(ctx, cb, s, ins, outs)
}

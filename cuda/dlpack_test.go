package cuda_test

import (
	"context"
	"errors"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/cuda"
)

func dlf32(b cuda.Buffer, shape []int64) *cuda.DLTensor {
	t := &cuda.DLTensor{Data: uintptr(b.Ptr), Device: cuda.DLDevice{DeviceType: cuda.DLCUDA}, NDim: int32(len(shape)), DType: cuda.DLDataType{Code: 2, Bits: 32, Lanes: 1}}
	if len(shape) > 0 {
		t.Shape = &shape[0]
	}
	return t
}

func TestDLTensorLayout(t *testing.T) {
	var d cuda.DLTensor
	assert.Equal(t, uintptr(48), unsafe.Sizeof(d))
	assert.Equal(t, uintptr(8), unsafe.Offsetof(d.Device))
	assert.Equal(t, uintptr(16), unsafe.Offsetof(d.NDim))
	assert.Equal(t, uintptr(20), unsafe.Offsetof(d.DType))
	assert.Equal(t, uintptr(24), unsafe.Offsetof(d.Shape))
	assert.Equal(t, uintptr(32), unsafe.Offsetof(d.Strides))
	assert.Equal(t, uintptr(40), unsafe.Offsetof(d.ByteOffset))
}

// TestCallDLPack: CUDA DLPack tensors (as PyTorch or CuPy hand them over)
// take the GPU path, byte_offset and compact strides included.
func TestCallDLPack(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, "wazero", cuda.Options{})
	cb := r.cb(t, "scale")
	x := ramp(12, 1)
	// The input sits 64 bytes into its allocation (byte_offset).
	base := r.dev.Malloc(64 + 48)
	require.NoError(t, r.dev.Produce(r.s, base+64, f32bytes(x)))
	in := dlf32(cuda.Buffer{Ptr: base}, []int64{12})
	in.ByteOffset = 64
	strides := []int64{1}
	in.Strides = &strides[0]
	f := r.upload(t, r.s, []float32{4})
	fs := dlf32(f, nil)
	out := r.output(12, 0)
	st, err := r.gpu.CallDLPack(ctx, cb, r.s, []*cuda.DLTensor{in, fs}, []*cuda.DLTensor{dlf32(out, []int64{12})})
	require.NoError(t, err)
	assert.Equal(t, cuda.PathPinned, st.Path)
	assert.Equal(t, scaled(x, 4), r.read(out))

	// A trap leaves the DLPack output untouched.
	tout := r.output(12, 6)
	_, err = r.gpu.CallDLPack(ctx, r.cb(t, "half_then_trap"), r.s, []*cuda.DLTensor{in}, []*cuda.DLTensor{dlf32(tout, []int64{12})})
	require.True(t, errors.Is(err, abi.Unreachable), "%v", err)
	assert.Equal(t, filled(12, 6), r.read(tout))
}

func TestCallDLPackRefusals(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, "wazero", cuda.Options{})
	cb := r.cb(t, "tap")
	buf := r.output(6, 0)
	good := func() *cuda.DLTensor { return dlf32(buf, []int64{6}) }
	for _, tc := range []struct {
		name  string
		tweak func(*cuda.DLTensor)
		want  string
	}{
		{"cpu", func(d *cuda.DLTensor) { d.Device.DeviceType = cuda.DLCPU }, "argument 0: device type 1 is host memory, not a CUDA device"},
		{"opencl", func(d *cuda.DLTensor) { d.Device.DeviceType = 4 }, "device type 4 is not a CUDA device"},
		{"lanes", func(d *cuda.DLTensor) { d.DType.Lanes = 4 }, "4 lanes"},
		{"f8", func(d *cuda.DLTensor) { d.DType.Bits = 8 }, "type code 2 with 8 bits"},
		{"rank", func(d *cuda.DLTensor) { d.NDim = 99 }, "rank 99"},
		{"negative dim", func(d *cuda.DLTensor) { s := []int64{-3}; d.Shape = &s[0] }, "dimension 0 is -3"},
		{"strided", func(d *cuda.DLTensor) { s := []int64{2}; d.Strides = &s[0] }, "not compact row-major"},
		{"null data", func(d *cuda.DLTensor) { d.Data = 0 }, "null data pointer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := good()
			tc.tweak(in)
			_, err := r.gpu.CallDLPack(ctx, cb, r.s, []*cuda.DLTensor{in}, []*cuda.DLTensor{good()})
			require.Error(t, err)
			assert.True(t, errors.Is(err, abi.InvalidArgument), "%v", err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	other := good()
	other.Device.DeviceID = 1
	_, err := r.gpu.CallDLPack(ctx, cb, r.s, []*cuda.DLTensor{good()}, []*cuda.DLTensor{other})
	assert.ErrorContains(t, err, "result 0 is on CUDA device 1, another tensor on device 0")
	in := good()
	s := []int64{1}
	in.Strides = &s[0]
	_, err = r.gpu.CallDLPack(ctx, cb, r.s, []*cuda.DLTensor{in}, []*cuda.DLTensor{in})
	require.NoError(t, err)
}

// TestBufferFromDLPackStrides: compact strides are accepted, size-1
// dimensions with any stride too (PyTorch gives them 1 or the next
// stride); anything else is refused.
func TestBufferFromDLPackStrides(t *testing.T) {
	for _, tc := range []struct {
		shape, strides []int64
		ok             bool
	}{
		{[]int64{2, 3}, []int64{3, 1}, true},
		{[]int64{1, 6}, []int64{42, 1}, true},
		{[]int64{2, 1, 3}, []int64{3, 7, 1}, true},
		{[]int64{2, 3}, []int64{1, 2}, false},
		{[]int64{2, 3}, []int64{4, 1}, false},
	} {
		d := dlf32(cuda.Buffer{Ptr: 0x1000}, tc.shape)
		d.Strides = &tc.strides[0]
		b, err := cuda.BufferFromDLPack(d)
		if tc.ok {
			require.NoError(t, err, "%v %v", tc.shape, tc.strides)
			assert.Equal(t, abi.Shape(tc.shape), b.Shape)
			assert.Equal(t, abi.F32, b.DType)
		} else {
			assert.ErrorContains(t, err, "not compact row-major", "%v %v", tc.shape, tc.strides)
		}
	}
	for code, want := range map[[2]uint8]abi.DType{{0, 8}: abi.S8, {1, 64}: abi.U64, {2, 16}: abi.F16, {4, 16}: abi.BF16, {5, 128}: abi.C128, {6, 8}: abi.PRED} {
		got, err := cuda.DLPackDType(cuda.DLDataType{Code: code[0], Bits: code[1], Lanes: 1})
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
}

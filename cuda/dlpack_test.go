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
	"github.com/seed4b3e0ccb/callbox/internal/dlpack"
)

// devPtr is a device address as the pointer a DLPack tensor holds (the
// fake device's addresses are Go memory it keeps alive).
func devPtr(p cuda.DevicePtr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

func dlf32(b cuda.Buffer, shape []int64) *dlpack.Tensor {
	t := &dlpack.Tensor{Data: devPtr(b.Ptr), Device: dlpack.Device{Type: dlpack.CUDA}, NDim: int32(len(shape)), DType: dlpack.FromABI(abi.F32)}
	if len(shape) > 0 {
		t.Shape = &shape[0]
	}
	return t
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
	st, err := r.gpu.CallDLPack(ctx, cb, r.s, []*dlpack.Tensor{in, fs}, []*dlpack.Tensor{dlf32(out, []int64{12})})
	require.NoError(t, err)
	assert.Equal(t, cuda.PathPinned, st.Path)
	assert.Equal(t, scaled(x, 4), r.read(out))

	// A trap leaves the DLPack output untouched.
	tout := r.output(12, 6)
	_, err = r.gpu.CallDLPack(ctx, r.cb(t, "half_then_trap"), r.s, []*dlpack.Tensor{in}, []*dlpack.Tensor{dlf32(tout, []int64{12})})
	require.True(t, errors.Is(err, abi.Unreachable), "%v", err)
	assert.Equal(t, filled(12, 6), r.read(tout))
}

func TestCallDLPackRefusals(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, "wazero", cuda.Options{})
	cb := r.cb(t, "tap")
	buf := r.output(6, 0)
	good := func() *dlpack.Tensor { return dlf32(buf, []int64{6}) }
	for _, tc := range []struct {
		name  string
		tweak func(*dlpack.Tensor)
		want  string
	}{
		{"cpu", func(d *dlpack.Tensor) { d.Device.Type = dlpack.CPU }, "input 0: device type 1 is host memory, not a CUDA device"},
		{"opencl", func(d *dlpack.Tensor) { d.Device.Type = 4 }, "device type 4 is not a CUDA device"},
		{"lanes", func(d *dlpack.Tensor) { d.DType.Lanes = 4 }, "unknown dtype {code 2, bits 32, lanes 4}"},
		{"f8", func(d *dlpack.Tensor) { d.DType.Bits = 8 }, "unknown dtype {code 2, bits 8, lanes 1}"},
		{"rank", func(d *dlpack.Tensor) { d.NDim = 99 }, "rank 99 exceeds the ABI maximum 32"},
		{"negative dim", func(d *dlpack.Tensor) { s := []int64{-3}; d.Shape = &s[0] }, "dimension 0 is negative (-3)"},
		{"strided", func(d *dlpack.Tensor) { s := []int64{2}; d.Strides = &s[0] }, "not row-major"},
		{"null data", func(d *dlpack.Tensor) { d.Data = nil }, "data is NULL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := good()
			tc.tweak(in)
			_, err := r.gpu.CallDLPack(ctx, cb, r.s, []*dlpack.Tensor{in}, []*dlpack.Tensor{good()})
			require.Error(t, err)
			assert.True(t, errors.Is(err, abi.InvalidArgument), "%v", err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	other := good()
	other.Device.ID = 1
	_, err := r.gpu.CallDLPack(ctx, cb, r.s, []*dlpack.Tensor{good()}, []*dlpack.Tensor{other})
	assert.ErrorContains(t, err, "output 0 is on CUDA device 1, another tensor on device 0")
	in := good()
	s := []int64{1}
	in.Strides = &s[0]
	_, err = r.gpu.CallDLPack(ctx, cb, r.s, []*dlpack.Tensor{in}, []*dlpack.Tensor{in})
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
		d := dlf32(cuda.Buffer{Ptr: 0x7f0000001000}, tc.shape)
		d.Strides = &tc.strides[0]
		b, err := cuda.BufferFromDLPack(d)
		if tc.ok {
			require.NoError(t, err, "%v %v", tc.shape, tc.strides)
			assert.Equal(t, abi.Shape(tc.shape), b.Shape)
			assert.Equal(t, abi.F32, b.DType)
		} else {
			assert.ErrorContains(t, err, "not row-major", "%v %v", tc.shape, tc.strides)
		}
	}
}

//go:build cgo

package main

import (
	"encoding/json"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/cuda"
	"github.com/seed4b3e0ccb/callbox/ffi/internal/dlpack"
	"github.com/seed4b3e0ccb/callbox/ffi/internal/xlaharness"
)

// TestDLPackEntry: CUDA DLPack tensors through the C entry (as PyTorch or
// CuPy pass them) take the GPU path.
func TestDLPackEntry(t *testing.T) {
	r := newRig(t)
	in, f := r.dev32(t, r.s, 1, 2, 3), r.dev32(t, r.s, 10)
	out := r.out32(3, 0)
	tensor := func(p uintptr, shape ...int64) xlaharness.Tensor {
		return xlaharness.Tensor{Data: p, DeviceType: int32(dlpack.CUDA), Shape: shape, Code: 2, Bits: 32}
	}
	code, msg := xlaharness.CallDLPack(dlpackEntryAddr(), "scale", uintptr(r.s), []xlaharness.Tensor{tensor(in, 3), tensor(f)}, []xlaharness.Tensor{tensor(out, 3)})
	require.Zero(t, code, msg)
	assert.Equal(t, []float32{10, 20, 30}, r.read(out, 3))

	cpu := tensor(in, 3)
	cpu.DeviceType = int32(dlpack.CPU)
	code, msg = xlaharness.CallDLPack(dlpackEntryAddr(), "scale", uintptr(r.s), []xlaharness.Tensor{cpu, tensor(f)}, []xlaharness.Tensor{tensor(out, 3)})
	assert.Equal(t, int(abi.CodeInvalidArgument), code)
	assert.Contains(t, msg, "argument 0: device type 1 is host memory")

	trapOut := r.out32(3, 4)
	code, msg = xlaharness.CallDLPack(dlpackEntryAddr(), "half_then_trap", uintptr(r.s), []xlaharness.Tensor{tensor(in, 3)}, []xlaharness.Tensor{tensor(trapOut, 3)})
	assert.Equal(t, int(abi.CodeInternal), code)
	assert.Contains(t, msg, "unreachable")
	assert.Equal(t, []float32{4, 4, 4}, r.read(trapOut, 3))

	code, msg = xlaharness.CallDLPack(dlpackEntryAddr(), "nope", uintptr(r.s), nil, nil)
	assert.Equal(t, int(abi.CodeNotFound), code)
	assert.Contains(t, msg, `callback "nope"`)

	var st map[string]any
	require.NoError(t, json.Unmarshal([]byte(statsJSON()), &st))
	assert.Equal(t, "auto", st["mode"])
	assert.EqualValues(t, 2, st["calls"], "the scale call and the trapping one ran their copies")
	assert.EqualValues(t, 2, st["pins"], "two instances, each pinned once")
	assert.EqualValues(t, 1, st["unpins"], "the trapping instance was discarded and unpinned")

	require.NoError(t, setDefault(0))
	t.Setenv("CALLBOX_CONFIG", "")
	assert.Empty(t, statsJSON())
	code, msg = xlaharness.CallDLPack(dlpackEntryAddr(), "scale", uintptr(r.s), nil, nil)
	assert.Equal(t, int(abi.CodeFailedPrecondition), code)
	assert.Contains(t, msg, "no callbox host")
}

// callDLPack runs callbox_cuda_call_dlpack's Go side on Go-built tensors.
func callDLPack(callback string, s cuda.Stream, ins, outs []*dlpack.Tensor) error {
	ptr := func(ts []*dlpack.Tensor) unsafe.Pointer {
		if len(ts) == 0 {
			return nil
		}
		return unsafe.Pointer(&ts[0])
	}
	name := append([]byte(callback), 0)
	return cudaCallDLPack(&name[0], uintptr(s), ptr(ins), uintptr(len(ins)), ptr(outs), uintptr(len(outs)))
}

func dlf32(p uintptr, shape ...int64) *dlpack.Tensor {
	t := &dlpack.Tensor{Data: *(*unsafe.Pointer)(unsafe.Pointer(&p)), Device: dlpack.Device{Type: dlpack.CUDA}, NDim: int32(len(shape)), DType: dlpack.FromABI(abi.F32)}
	if len(shape) > 0 {
		t.Shape = &shape[0]
	}
	return t
}

// TestDLPackByteOffsetAndStrides: a CUDA DLPack tensor's byte_offset and
// compact strides (as PyTorch hands them over) take the GPU path, and a
// trap leaves the output untouched.
func TestDLPackByteOffsetAndStrides(t *testing.T) {
	r := newRig(t)
	base := r.dev.Malloc(64 + 12)
	require.NoError(t, r.dev.Produce(r.s, base+64, bytesOf([]float32{1, 2, 3})))
	in := dlf32(uintptr(base), 3)
	in.ByteOffset = 64
	strides := []int64{1}
	in.Strides = &strides[0]
	out := r.out32(3, 0)
	require.NoError(t, callDLPack("scale", r.s, []*dlpack.Tensor{in, dlf32(r.dev32(t, r.s, 4))}, []*dlpack.Tensor{dlf32(out, 3)}))
	assert.Equal(t, []float32{4, 8, 12}, r.read(out, 3))

	trapOut := r.out32(3, 6)
	err := callDLPack("half_then_trap", r.s, []*dlpack.Tensor{in}, []*dlpack.Tensor{dlf32(trapOut, 3)})
	require.ErrorIs(t, err, abi.Unreachable)
	assert.Equal(t, []float32{6, 6, 6}, r.read(trapOut, 3))
}

// TestDLPackRefusals: a tensor the GPU entry cannot take is refused as the
// host refuses any argument ("argument i: ..." / "output i: ...", kind
// invalid_argument), with dlpack's one set of checks, and the output is
// untouched.
func TestDLPackRefusals(t *testing.T) {
	r := newRig(t)
	buf := r.out32(6, 5)
	good := func() *dlpack.Tensor { return dlf32(buf, 6) }
	for _, tc := range []struct {
		name  string
		tweak func(*dlpack.Tensor)
		want  string
	}{
		{"cpu", func(d *dlpack.Tensor) { d.Device.Type = dlpack.CPU }, "argument 0: device type 1 is host memory, not a CUDA device"},
		{"opencl", func(d *dlpack.Tensor) { d.Device.Type = 4 }, "argument 0: device type 4 is not a CUDA device"},
		{"lanes", func(d *dlpack.Tensor) { d.DType.Lanes = 4 }, "argument 0: unknown dtype {code 2, bits 32, lanes 4}"},
		{"f8", func(d *dlpack.Tensor) { d.DType.Bits = 8 }, "argument 0: unknown dtype {code 2, bits 8, lanes 1}"},
		{"rank", func(d *dlpack.Tensor) { d.NDim = 99 }, "argument 0: rank 99 exceeds the ABI maximum 32"},
		{"negative dim", func(d *dlpack.Tensor) { s := []int64{-3}; d.Shape = &s[0] }, "argument 0: dimension 0 is negative (-3)"},
		{"strided", func(d *dlpack.Tensor) { s := []int64{2}; d.Strides = &s[0] }, "not row-major"},
		{"null data", func(d *dlpack.Tensor) { d.Data = nil }, "argument 0: data is NULL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := good()
			tc.tweak(in)
			err := callDLPack("tap", r.s, []*dlpack.Tensor{in}, []*dlpack.Tensor{good()})
			require.ErrorIs(t, err, abi.InvalidArgument)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), `"tap"`, "the refusal names the callback")
		})
	}
	other := good()
	other.Device.ID = 1
	err := callDLPack("tap", r.s, []*dlpack.Tensor{good()}, []*dlpack.Tensor{other})
	require.ErrorIs(t, err, abi.InvalidArgument)
	assert.ErrorContains(t, err, "output 0: on CUDA device 1, while an earlier tensor is on device 0")
	bad := good()
	bad.DType.Lanes = 2
	err = callDLPack("tap", r.s, []*dlpack.Tensor{good()}, []*dlpack.Tensor{bad})
	assert.ErrorContains(t, err, "output 0: unknown dtype")
	assert.Equal(t, []float32{5, 5, 5, 5, 5, 5}, r.read(buf, 6), "no refused call wrote its output")
}

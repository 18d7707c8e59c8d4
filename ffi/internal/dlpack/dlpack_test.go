package dlpack_test

import (
	"encoding/binary"
	"errors"
	"math/big"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/ffi/internal/dlpack"
)

func TestTable(t *testing.T) {
	for _, d := range abi.DTypes() {
		dl := dlpack.FromABI(d)
		got, ok := dlpack.ToABI(dl)
		require.True(t, ok, d.String())
		assert.Equal(t, d, got)
		assert.Equal(t, int(d.Size()*8), int(dl.Bits), d.String())
	}
	for _, bad := range []dlpack.DType{{dlpack.CodeFloat, 32, 2}, {dlpack.CodeFloat, 8, 1}, {dlpack.CodeBool, 16, 1}, {3, 32, 1}, {7, 8, 1}, {dlpack.CodeFloat, 33, 1}, {255, 255, 1}} {
		_, ok := dlpack.ToABI(bad)
		assert.False(t, ok, "%+v", bad)
	}
	infos := dlpack.DTypes()
	require.Len(t, infos, len(abi.DTypes()))
	assert.Equal(t, dlpack.DTypeInfo{Name: "bf16", DLPack: dlpack.DType{dlpack.CodeBfloat, 16, 1}, XLA: 16, Bytes: 2}, infos[len(infos)-2])
}

func tensor(dev dlpack.DeviceType, data unsafe.Pointer, d abi.DType, shape []int64, strides []int64) *dlpack.Tensor {
	t := &dlpack.Tensor{Data: data, Device: dlpack.Device{Type: dev}, NDim: int32(len(shape)), DType: dlpack.FromABI(d)}
	if len(shape) > 0 {
		t.Shape = &shape[0]
	}
	if len(strides) > 0 {
		t.Strides = &strides[0]
	}
	return t
}

// TestBothMemoriesOneRule: the host and device checks differ only in the
// device they accept; every other rule is the same, the empty tensor
// with odd strides included (the C API accepted it and the GPU path
// refused it before there was one check).
func TestBothMemoriesOneRule(t *testing.T) {
	buf := make([]float32, 8)
	p := unsafe.Pointer(&buf[0])
	cases := []struct {
		name    string
		shape   []int64
		strides []int64
		data    unsafe.Pointer
		err     string
	}{
		{"dense", []int64{2, 3}, nil, p, ""},
		{"row-major strides", []int64{2, 3}, []int64{3, 1}, p, ""},
		{"size-1 dims take any stride", []int64{1, 3}, []int64{99, 1}, p, ""},
		{"empty with odd strides", []int64{0, 3}, []int64{1, 1}, nil, ""},
		{"column-major", []int64{2, 3}, []int64{1, 2}, p, "strides [1 2] are not row-major for shape [2 3] (want NULL or [3 1]"},
		{"NULL data", []int64{2}, nil, nil, "data is NULL for f32[2] (8 bytes)"},
		{"negative dim", []int64{2, -1}, nil, p, "dimension 1 is negative (-1)"},
	}
	for _, c := range cases {
		for _, m := range []struct {
			mem dlpack.Memory
			dev dlpack.DeviceType
		}{{dlpack.OnHost, dlpack.CPU}, {dlpack.OnHost, dlpack.CUDAHost}, {dlpack.OnDevice, dlpack.CUDA}, {dlpack.OnDevice, dlpack.CUDAManaged}} {
			v, err := dlpack.Check(tensor(m.dev, c.data, abi.F32, c.shape, c.strides), m.mem)
			if c.err != "" {
				assert.ErrorContains(t, err, c.err, c.name)
				assert.Equal(t, abi.InvalidArgument, abi.KindOf(err))
				continue
			}
			require.NoError(t, err, c.name)
			assert.Equal(t, abi.F32, v.DType)
			assert.Equal(t, abi.Shape(c.shape), v.Shape)
		}
	}
	// The devices each memory refuses, with the entry to use instead.
	_, err := dlpack.Check(tensor(dlpack.CUDA, p, abi.F32, []int64{2}, nil), dlpack.OnHost)
	assert.ErrorContains(t, err, "device type 2 is CUDA memory: call GPU tensors with callbox_cuda_call_dlpack")
	_, err = dlpack.Check(tensor(dlpack.CPU, p, abi.F32, []int64{2}, nil), dlpack.OnDevice)
	assert.ErrorContains(t, err, "device type 1 is host memory, not a CUDA device")
	_, err = dlpack.Check(tensor(7, p, abi.F32, []int64{2}, nil), dlpack.OnHost)
	assert.ErrorContains(t, err, "device type 7 is not host memory")
	_, err = dlpack.Check(tensor(7, p, abi.F32, []int64{2}, nil), dlpack.OnDevice)
	assert.ErrorContains(t, err, "device type 7 is not a CUDA device")
	// byte_offset that wraps the address space.
	w := tensor(dlpack.CUDA, p, abi.F32, []int64{2}, nil)
	w.ByteOffset = ^uint64(0) - 2
	_, err = dlpack.Check(w, dlpack.OnDevice)
	assert.ErrorContains(t, err, "overflow the address space")
	// A NULL-page pointer (NULL plus an offset, a small integer) is refused,
	// not dereferenced.
	for _, addr := range []uintptr{0x10, 0xfff0} {
		low := tensor(dlpack.CPU, *(*unsafe.Pointer)(unsafe.Pointer(&addr)), abi.F32, []int64{2}, nil)
		_, err = dlpack.Check(low, dlpack.OnHost)
		assert.ErrorContains(t, err, "is in the lowest 64 KiB of the address space, which is never mapped")
	}
	// A kernel-half, a non-canonical and a wild high pointer, and a tensor
	// running past the end of user space, are refused in host memory (they
	// would fault inside the runtime); device memory is not held to it.
	for _, addr := range []uint64{0xffff888000000000, 0x0800000000000000, 1 << 57} {
		a := uintptr(addr)
		high := tensor(dlpack.CPU, *(*unsafe.Pointer)(unsafe.Pointer(&a)), abi.F32, []int64{2}, nil)
		_, err = dlpack.Check(high, dlpack.OnHost)
		assert.ErrorContains(t, err, "where user space ends: a kernel, non-canonical or wild pointer", "%#x", addr)
	}
	edge := uintptr(dlpack.MaxHostAddress - 8)
	last := tensor(dlpack.CPU, *(*unsafe.Pointer)(unsafe.Pointer(&edge)), abi.F32, []int64{2}, nil)
	_, err = dlpack.Check(last, dlpack.OnHost)
	assert.NoError(t, err, "ending exactly at MaxHostAddress")
	last.Shape = &[]int64{3}[0]
	_, err = dlpack.Check(last, dlpack.OnHost)
	assert.ErrorContains(t, err, "where user space ends")
	dev := uintptr(0xffff888000000000)
	_, err = dlpack.Check(tensor(dlpack.CUDA, *(*unsafe.Pointer)(unsafe.Pointer(&dev)), abi.F32, []int64{2}, nil), dlpack.OnDevice)
	assert.NoError(t, err)
	// The view's data starts at byte_offset.
	o := tensor(dlpack.CPU, p, abi.F32, []int64{2}, nil)
	o.ByteOffset = 8
	v, err := dlpack.Check(o, dlpack.OnHost)
	require.NoError(t, err)
	assert.Equal(t, unsafe.Add(p, 8), v.Addr)
	assert.Len(t, v.Data(), 8)
	// HostTensor: the same bytes, type and shape, no copy.
	var ht abi.Tensor
	v.HostTensor(&ht)
	assert.Equal(t, abi.F32, ht.DType)
	assert.Equal(t, abi.Shape{2}, ht.Shape)
	require.Len(t, ht.Data, 8)
	assert.Equal(t, unsafe.Add(p, 8), unsafe.Pointer(&ht.Data[0]))
	var empty dlpack.View
	empty.HostTensor(&ht)
	assert.NotNil(t, ht.Data, "an empty tensor's data is empty, not nil")
	assert.Empty(t, ht.Data)
}

func TestCheckType(t *testing.T) {
	d, shape, err := dlpack.CheckType(tensor(99, nil, abi.S64, []int64{4, 5}, nil))
	require.NoError(t, err, "device and data are not read")
	assert.Equal(t, abi.S64, d)
	assert.Equal(t, abi.Shape{4, 5}, shape)
	bad := tensor(dlpack.CPU, nil, abi.S64, []int64{4}, nil)
	bad.DType.Lanes = 4
	_, _, err = dlpack.CheckType(bad)
	assert.ErrorContains(t, err, "unknown dtype {code 0, bits 64, lanes 4}")
	bad = tensor(dlpack.CPU, nil, abi.S64, nil, nil)
	bad.NDim = 40
	_, _, err = dlpack.CheckType(bad)
	assert.ErrorContains(t, err, "rank 40 exceeds the ABI maximum 32")
}

// FuzzCheck feeds Check arbitrary descriptors and checks it against an
// independent oracle: every tensor it accepts has a known dtype, the
// device the memory takes, non-negative dimensions and exactly the byte
// length the shape implies, within the ABI maximum; everything else is an
// InvalidArgument error. Nothing panics.
func FuzzCheck(f *testing.F) {
	dims := func(ds ...int64) []byte {
		b := make([]byte, 8*len(ds))
		for i, d := range ds {
			binary.LittleEndian.PutUint64(b[8*i:], uint64(d))
		}
		return b
	}
	f.Add(uint8(dlpack.CodeFloat), uint8(32), uint16(1), int32(2), dims(2, 3), true, int32(1), false, false)
	f.Add(uint8(dlpack.CodeBool), uint8(8), uint16(1), int32(0), dims(), true, int32(1), false, false)
	f.Add(uint8(dlpack.CodeInt), uint8(64), uint16(1), int32(1), dims(-1), true, int32(2), false, true)
	f.Add(uint8(dlpack.CodeComplex), uint8(128), uint16(1), int32(3), dims(0, 1<<62, 4), false, int32(1), false, false)
	f.Add(uint8(dlpack.CodeFloat), uint8(16), uint16(2), int32(33), dims(1), true, int32(2), true, true)
	f.Fuzz(func(t *testing.T, code, bits uint8, lanes uint16, ndim int32, dimBytes []byte, withData bool, device int32, withStrides, onDevice bool) {
		shape := make([]int64, len(dimBytes)/8)
		for i := range shape {
			shape[i] = int64(binary.LittleEndian.Uint64(dimBytes[8*i:]))
		}
		mem := dlpack.OnHost
		if onDevice {
			mem = dlpack.OnDevice
		}
		buf := make([]byte, 4096)
		tn := dlpack.Tensor{Device: dlpack.Device{Type: dlpack.DeviceType(device)}, NDim: ndim, DType: dlpack.DType{Code: code, Bits: bits, Lanes: lanes}}
		if len(shape) > 0 {
			tn.Shape = &shape[0]
		}
		sdims := shape
		if ndim >= 0 && int(ndim) < len(shape) {
			sdims = shape[:ndim]
		}
		strides := dlpack.RowMajor(sdims)
		if withStrides && len(strides) > 0 {
			tn.Strides = &strides[0]
		}
		if int(ndim) > len(shape) && ndim > 0 && ndim <= abi.MaxRank && len(shape) > 0 {
			return // the descriptor claims more dims than exist: reading them is the caller's bug, as in C
		}

		// The oracle: the ABI's own rules (abi.Shape.ByteLen refuses a
		// product that overflows on the way), the device, the data pointer.
		d, known := dlpack.ToABI(tn.DType)
		devOK := device == 1 || device == 3
		if onDevice {
			devOK = device == 2 || device == 13
		}
		valid := known && devOK && ndim >= 0 && ndim <= abi.MaxRank && int(ndim) <= len(shape)
		want := new(big.Int)
		if valid {
			n, err := abi.Shape(shape[:ndim]).ByteLen(d)
			valid = err == nil
			want.SetUint64(n)
		}
		if valid && want.Cmp(big.NewInt(abi.MaxTensorBytes)) > 0 {
			valid = false
		}
		if valid && want.Sign() > 0 {
			if withData && want.Cmp(big.NewInt(int64(len(buf)))) <= 0 {
				tn.Data = unsafe.Pointer(&buf[0])
			} else {
				valid = false // NULL data for a non-empty tensor
			}
		}

		v, err := dlpack.Check(&tn, mem)
		if !valid {
			if err == nil {
				t.Fatalf("accepted an invalid tensor %+v shape %v", tn, shape)
			}
			if abi.KindOf(err) != abi.InvalidArgument {
				t.Fatalf("error has kind %v: %v", abi.KindOf(err), err)
			}
			return
		}
		if err != nil {
			t.Fatalf("refused a valid tensor %+v shape %v: %v", tn, shape, err)
		}
		if v.DType != d || len(v.Shape) != int(ndim) || v.Bytes != want.Uint64() {
			t.Fatalf("got %s%v with %d bytes, want %s%v with %s bytes", v.DType, v.Shape, v.Bytes, d, shape[:ndim], want)
		}
	})
}

// BenchmarkCheck is the per-tensor cost every C API and XLA call pays.
func BenchmarkCheck(b *testing.B) {
	x := make([]float32, 256)
	shape := []int64{256}
	t := tensor(dlpack.CPU, unsafe.Pointer(&x[0]), abi.F32, shape, nil)
	b.ReportAllocs()
	var v dlpack.View
	for b.Loop() {
		if err := dlpack.CheckInto(&v, t, dlpack.OnHost); err != nil || v.Bytes != 1024 {
			b.Fatal(err)
		}
	}
}

// TestErrorIsInvalidArgument: a refused tensor answers errors.Is for its
// kind and no other.
func TestErrorIsInvalidArgument(t *testing.T) {
	var err error = &dlpack.Error{Reason: "bad"}
	for _, k := range abi.Kinds() {
		assert.Equal(t, k == abi.InvalidArgument, errors.Is(err, k), "%v", k)
	}
}

//go:build linux

package cuda_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/cuda"
)

// TestRuntimeBindings checks the purego bindings against a C library with
// the CUDA runtime's signatures (testdata/fakecudart.c): arguments arrive
// in order and with their types, results and error names come back.
func TestRuntimeBindings(t *testing.T) {
	lib := buildFakeCudart(t)
	var err error

	_, err = cuda.OpenRuntimeFrom(filepath.Join(t.TempDir(), "libcudart.so.99"))
	require.ErrorIs(t, err, cuda.ErrNoRuntime)
	assert.Contains(t, err.Error(), "libcudart.so.99")

	rt, err := cuda.OpenRuntimeFrom(filepath.Join(t.TempDir(), "missing.so"), lib)
	require.NoError(t, err)
	assert.Equal(t, lib, rt.Library)
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	require.NoError(t, err)
	var lastKind func() int32
	var lastStream func() uintptr
	var lastFlags func() uint32
	purego.RegisterLibFunc(&lastKind, h, "last_memcpy_kind")
	purego.RegisterLibFunc(&lastStream, h, "last_stream_used")
	purego.RegisterLibFunc(&lastFlags, h, "last_register_flags")

	// "Device" memory is host memory to this stand-in; mapped, because
	// only its address is kept (a Go slice could live on a moving stack).
	devMem := mapped(t, 8)
	dev := cuda.DevicePtr(unsafe.Pointer(&devMem[0]))
	host := []byte("12345678")
	require.NoError(t, rt.CopyH2D(dev, unsafe.Pointer(&host[0]), 8, 0x51))
	assert.Equal(t, "12345678", string(devMem))
	assert.Equal(t, int32(1), lastKind())
	assert.Equal(t, uintptr(0x51), lastStream())
	back := make([]byte, 4)
	require.NoError(t, rt.CopyD2H(unsafe.Pointer(&back[0]), dev+2, 4, 0x52))
	assert.Equal(t, "3456", string(back))
	assert.Equal(t, int32(2), lastKind())
	require.NoError(t, rt.CopyD2D(dev, dev+4, 4, 0x53))
	assert.Equal(t, "56785678", string(devMem))
	assert.Equal(t, int32(3), lastKind())

	require.NoError(t, rt.SyncStream(0x54))
	assert.Equal(t, uintptr(0x54), lastStream())
	err = rt.SyncStream(0xBAD)
	var re *cuda.RuntimeError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 400, re.Code)
	assert.Equal(t, "cudaStreamSynchronize failed: cudaErrorFake400 (400): fake error", err.Error())

	ev, err := rt.NewEvent()
	require.NoError(t, err)
	assert.Equal(t, cuda.Event(0xE002), ev, "created with cudaEventDisableTiming")
	require.NoError(t, rt.RecordEvent(ev, 0x55))
	assert.Equal(t, uintptr(0x55), lastStream())
	require.NoError(t, rt.SyncEvent(ev))
	require.Error(t, rt.SyncEvent(ev+1))
	require.NoError(t, rt.DestroyEvent(ev))

	pinned := mapped(t, 64)
	require.NoError(t, rt.Register(unsafe.Pointer(&pinned[0]), 64))
	assert.Zero(t, lastFlags(), "cudaHostRegisterDefault")
	err = rt.Register(unsafe.Pointer(&pinned[0]), 64)
	assert.ErrorContains(t, err, "cudaErrorFake712 (712): part or all of the requested memory range is already mapped")
	mt, err := rt.PointerType(uintptr(unsafe.Pointer(&pinned[10])))
	require.NoError(t, err)
	assert.Equal(t, cuda.MemoryHost, mt)
	var setDevice func(lo, hi uintptr)
	purego.RegisterLibFunc(&setDevice, h, "fake_set_device")
	setDevice(uintptr(dev), uintptr(dev)+8)
	mt, err = rt.PointerType(uintptr(dev) + 7)
	require.NoError(t, err)
	assert.Equal(t, cuda.MemoryDevice, mt)
	mt, err = rt.PointerType(uintptr(dev) + 8)
	require.NoError(t, err)
	assert.Equal(t, cuda.MemoryUnregistered, mt)
	_, err = rt.PointerType(0)
	assert.Error(t, err)
	require.NoError(t, rt.Unregister(unsafe.Pointer(&pinned[0])))
	assert.Error(t, rt.Unregister(unsafe.Pointer(&pinned[0])))
}

// TestPointerAttributesHoldWhatTheRuntimeWrites: cudaPointerGetAttributes
// writes the whole struct of CUDA 12 and 13, reserved[8] included (88
// bytes); the Go struct it writes into must be at least that large, or the
// runtime writes past it into other Go objects (seen on an H200: wazero's
// state corrupted once in about a hundred calls). The fake runtime writes
// the real layout and fills reserved with a pattern.
func TestPointerAttributesHoldWhatTheRuntimeWrites(t *testing.T) {
	assert.GreaterOrEqual(t, cuda.PointerAttributesSizeForTest, uintptr(88), "CUDA 12/13's struct cudaPointerAttributes")
	rt, err := cuda.OpenRuntimeFrom(buildFakeCudart(t))
	require.NoError(t, err)
	code, reserved := cuda.PointerAttributesReservedForTest(rt, 0x1000)
	require.Zero(t, code)
	for i, v := range reserved {
		assert.Equal(t, int64(0x5EC0DE00+i), v, "reserved[%d] landed in the struct", i)
	}
}

// buildFakeCudart compiles testdata/fakecudart.c into a fresh library (a
// new file per test: dlopen shares a path's state across opens).
func buildFakeCudart(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler")
	}
	lib := filepath.Join(t.TempDir(), "libcudart.so.13")
	out, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, "testdata/fakecudart.c").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return lib
}

// TestRuntimeDrivesTheGPUPath: the GPU path over the purego runtime (with
// the C stand-in, whose copies are immediate memcpys): guest memory is
// registered through the real bindings, results come back, and closing
// the host unregisters it.
func TestRuntimeDrivesTheGPUPath(t *testing.T) {
	lib := buildFakeCudart(t)
	rt, err := cuda.OpenRuntimeFrom(lib)
	require.NoError(t, err)
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	require.NoError(t, err)
	var setDevice func(lo, hi uintptr)
	var registrations func() int32
	purego.RegisterLibFunc(&setDevice, h, "fake_set_device")
	purego.RegisterLibFunc(&registrations, h, "registrations")

	// "Device memory": x (4 floats), factor, y.
	devMem := mapped(t, 64)
	base := uintptr(unsafe.Pointer(&devMem[0]))
	setDevice(base, base+64)
	copy(devMem, f32bytes([]float32{1, 2, 3, 4, 3}))
	r := newRigOn(t, "wazero", rt)
	ctx := context.Background()
	x := cuda.Buffer{Ptr: cuda.DevicePtr(base), DType: abi.F32, Shape: abi.Shape{4}}
	f := cuda.Buffer{Ptr: cuda.DevicePtr(base + 16), DType: abi.F32, Shape: abi.Shape{}}
	y := cuda.Buffer{Ptr: cuda.DevicePtr(base + 32), DType: abi.F32, Shape: abi.Shape{4}}
	for i := 0; i < 2; i++ {
		st, err := r.gpu.Call(ctx, r.cb(t, "scale"), 0x77, []cuda.Buffer{x, f}, []cuda.Buffer{y})
		require.NoError(t, err)
		assert.Equal(t, cuda.PathPinned, st.Path)
		assert.Equal(t, i == 0, st.Pinned)
		assert.Equal(t, []float32{3, 6, 9, 12}, f32s(devMem[32:48]))
	}
	assert.Equal(t, int32(1), registrations(), "the instance's memory, registered once")
	_, err = r.gpu.Call(ctx, r.cb(t, "scale"), 0x77, []cuda.Buffer{{Ptr: cuda.DevicePtr(base + 64), DType: abi.F32, Shape: abi.Shape{4}}, f}, []cuda.Buffer{y})
	assert.ErrorContains(t, err, "is pageable host memory, not device memory")
	require.NoError(t, r.h.Close(ctx))
	assert.Zero(t, registrations(), "unregistered when the host closed the instance")
}

// mapped is n bytes outside the Go heap and stacks.
func mapped(t *testing.T, n int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	require.NoError(t, err)
	t.Cleanup(func() { _ = unix.Munmap(b) })
	return b
}

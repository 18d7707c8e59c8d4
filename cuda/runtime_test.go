//go:build linux

package cuda_test

import (
	"os/exec"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/cuda"
)

// TestRuntimeBindings checks the purego bindings against a C library with
// the CUDA runtime's signatures (testdata/fakecudart.c): arguments arrive
// in order and with their types, results and error names come back.
func TestRuntimeBindings(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler")
	}
	lib := filepath.Join(t.TempDir(), "libcudart.so.13")
	out, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, "testdata/fakecudart.c").CombinedOutput()
	require.NoError(t, err, "%s", out)

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

	// "Device" memory is host memory to this stand-in.
	devMem := make([]byte, 8)
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

	pinned := make([]byte, 64)
	require.NoError(t, rt.Register(unsafe.Pointer(&pinned[0]), 64))
	assert.Zero(t, lastFlags(), "cudaHostRegisterDefault")
	err = rt.Register(unsafe.Pointer(&pinned[0]), 64)
	assert.ErrorContains(t, err, "cudaErrorFake712 (712): part or all of the requested memory range is already mapped")
	mt, err := rt.PointerType(uintptr(unsafe.Pointer(&pinned[10])))
	require.NoError(t, err)
	assert.Equal(t, cuda.MemoryHost, mt)
	mt, err = rt.PointerType(0x7f0000000d00)
	require.NoError(t, err)
	assert.Equal(t, cuda.MemoryDevice, mt)
	_, err = rt.PointerType(0)
	assert.Error(t, err)
	require.NoError(t, rt.Unregister(unsafe.Pointer(&pinned[0])))
	assert.Error(t, rt.Unregister(unsafe.Pointer(&pinned[0])))
}

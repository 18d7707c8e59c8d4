package cudatest_test

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/cuda"
	"github.com/seed4b3e0ccb/callbox/cuda/cudatest"
)

func hostPtr(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

func uintptrOf(b []byte) uintptr { return uintptr(hostPtr(b)) }

// TestFakeCatchesMissingSync: reading a device-to-host copy's destination
// before syncing sees Poison, not the data.
func TestFakeCatchesMissingSync(t *testing.T) {
	f := cudatest.NewFake()
	s := f.NewStream()
	d := f.Malloc(8)
	f.Write(d, []byte("abcdefgh"))
	dst := make([]byte, 8)
	require.NoError(t, f.CopyD2H(hostPtr(dst), d, 8, s))
	assert.Equal(t, []byte{cudatest.Poison, cudatest.Poison, cudatest.Poison, cudatest.Poison, cudatest.Poison, cudatest.Poison, cudatest.Poison, cudatest.Poison}, dst, "not there before the sync")
	assert.Equal(t, 1, f.Pending(s))
	require.NoError(t, f.SyncStream(s))
	assert.Equal(t, []byte("abcdefgh"), dst)

	// A kernel's output is not there until its stream is synced either.
	require.NoError(t, f.Produce(s, d, []byte("ABCDEFGH")))
	assert.Equal(t, []byte{cudatest.Poison, cudatest.Poison, cudatest.Poison, cudatest.Poison, cudatest.Poison, cudatest.Poison, cudatest.Poison, cudatest.Poison}, f.Read(d, 8))
	require.NoError(t, f.SyncStream(s))
	assert.Equal(t, []byte("ABCDEFGH"), f.Read(d, 8))
}

// TestFakeCatchesReuseBeforeCompletion: a host buffer reused before its
// host-to-device copy completed sends the new bytes; an event recorded
// after the copy, waited on before the reuse, sends the right ones.
func TestFakeCatchesReuseBeforeCompletion(t *testing.T) {
	f := cudatest.NewFake()
	s := f.NewStream()
	d := f.Malloc(4)
	src := []byte("good")
	require.NoError(t, f.CopyH2D(d, hostPtr(src), 4, s))
	assert.True(t, f.Busy(hostPtr(src), 4), "the source is still in use")
	copy(src, "evil") // the bug: reuse before the copy completed
	require.NoError(t, f.SyncStream(s))
	assert.Equal(t, []byte("evil"), f.Read(d, 4), "the fake shows the reuse as wrong data")

	copy(src, "good")
	ev, err := f.NewEvent()
	require.NoError(t, err)
	require.NoError(t, f.CopyH2D(d, hostPtr(src), 4, s))
	require.NoError(t, f.RecordEvent(ev, s))
	require.NoError(t, f.SyncEvent(ev))
	assert.False(t, f.Busy(hostPtr(src), 4))
	copy(src, "evil")
	assert.Equal(t, []byte("good"), f.Read(d, 4))

	// An event covers only the work before it.
	require.NoError(t, f.CopyH2D(d, hostPtr([]byte("late")), 4, s))
	require.NoError(t, f.SyncEvent(ev))
	assert.Equal(t, 1, f.Pending(s))
	require.NoError(t, f.DestroyEvent(ev))
}

// TestFakeStreamsAreIndependent: syncing one stream completes only its
// copies.
func TestFakeStreamsAreIndependent(t *testing.T) {
	f := cudatest.NewFake()
	a, b := f.NewStream(), f.NewStream()
	d1, d2 := f.Malloc(2), f.Malloc(2)
	require.NoError(t, f.Produce(a, d1, []byte("aa")))
	require.NoError(t, f.Produce(b, d2, []byte("bb")))
	require.NoError(t, f.SyncStream(a))
	assert.Equal(t, []byte("aa"), f.Read(d1, 2))
	assert.Equal(t, []byte{cudatest.Poison, cudatest.Poison}, f.Read(d2, 2))
	assert.Equal(t, 1, f.Pending(b))
}

// TestFakeChecks: device ranges, host pointers, registrations.
func TestFakeChecks(t *testing.T) {
	f := cudatest.NewFake()
	s := f.NewStream()
	d := f.Malloc(16)
	buf := make([]byte, 64)
	err := f.CopyD2H(hostPtr(buf), d+8, 16, s)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cudaErrorInvalidValue")
	assert.Contains(t, err.Error(), "not inside a device allocation")
	assert.ErrorContains(t, f.CopyD2H(nil, d, 4, s), "host pointer is nil")
	assert.ErrorContains(t, f.SyncStream(cuda.Stream(0x99)), "cudaErrorInvalidResourceHandle")

	require.NoError(t, f.Register(hostPtr(buf), 64))
	assert.ErrorContains(t, f.Register(hostPtr(buf[32:]), 8), "cudaErrorHostMemoryAlreadyRegistered")
	assert.ErrorContains(t, f.Unregister(hostPtr(buf[8:])), "cudaErrorHostMemoryNotRegistered")
	mt, err := f.PointerType(uintptrOf(buf[10:]))
	require.NoError(t, err)
	assert.Equal(t, cuda.MemoryHost, mt)
	mt, _ = f.PointerType(uintptr(d) + 15)
	assert.Equal(t, cuda.MemoryDevice, mt)
	mt, _ = f.PointerType(uintptr(d) + 16 + 4096)
	assert.NotEqual(t, cuda.MemoryDevice, mt)

	// Unregistering memory a queued copy still writes is a violation.
	require.NoError(t, f.CopyD2H(hostPtr(buf), d, 16, s))
	require.NoError(t, f.Unregister(hostPtr(buf)))
	require.Len(t, f.Violations(), 1)
	assert.Contains(t, f.Violations()[0], "while a queued copy still uses it")
	require.NoError(t, f.SyncStream(s))
}

package cuda

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// regDevice records host registrations, the only device calls the pin
// cache makes (the fake device of package cudatest imports this package,
// so this test cannot use it); any other call panics.
type regDevice struct {
	Device
	regs      map[uintptr]uint64
	failNext  error
	registers int
}

func (d *regDevice) Register(p unsafe.Pointer, n uint64) error {
	if err := d.failNext; err != nil {
		d.failNext = nil
		return err
	}
	d.regs[uintptr(p)] = n
	d.registers++
	return nil
}

func (d *regDevice) Unregister(p unsafe.Pointer) error {
	if _, ok := d.regs[uintptr(p)]; !ok {
		return &RuntimeError{Call: "cudaHostUnregister", Code: 1, Name: "cudaErrorInvalidValue", Msg: "not registered"}
	}
	delete(d.regs, uintptr(p))
	return nil
}

// TestPinCacheGrowthAndMove: growth registers only the new part; a base
// that moves although reported stable unpins the old memory and the
// instance is never pinned again.
func TestPinCacheGrowthAndMove(t *testing.T) {
	dev := &regDevice{regs: map[uintptr]uint64{}}
	p := pinCache{dev: dev, m: map[uint64]*pinnedMemory{}}
	mem := make([]byte, 3<<16)
	base := unsafe.Pointer(&mem[0])
	res, err := p.ensure(7, base, 1<<16)
	require.NoError(t, err)
	assert.True(t, res.pinned)
	assert.Equal(t, uint64(1<<16), res.bytes)
	res, err = p.ensure(7, base, 1<<16)
	require.NoError(t, err)
	assert.False(t, res.pinned, "nothing new to pin")
	res, err = p.ensure(7, base, 3<<16)
	require.NoError(t, err)
	assert.Equal(t, uint64(2<<16), res.bytes)
	regs := dev.regs
	assert.Equal(t, map[uintptr]uint64{uintptr(base): 1 << 16, uintptr(base) + 1<<16: 2 << 16}, regs)
	assert.Equal(t, 1, p.instances())

	moved := make([]byte, 4<<16)
	_, err = p.ensure(7, unsafe.Pointer(&moved[0]), 4<<16)
	require.ErrorContains(t, err, "memory moved")
	assert.Empty(t, dev.regs, "the old memory is unpinned at once")
	assert.True(t, p.refused(7))
	_, err = p.ensure(7, unsafe.Pointer(&moved[0]), 4<<16)
	require.Error(t, err, "never pinned again")
	n, regions, err := p.release(7)
	require.NoError(t, err)
	assert.Zero(t, n+uint64(regions))
	assert.False(t, p.refused(7), "forgotten once the instance is closed")

	// A failed registration is not retried.
	dev.failNext = (&RuntimeError{Call: "cudaHostRegister", Code: 1, Name: "cudaErrorInvalidValue", Msg: "invalid argument"})
	_, err = p.ensure(8, base, 1<<16)
	require.ErrorContains(t, err, "pinning 65536 bytes of instance 8's memory")
	_, err = p.ensure(8, base, 1<<16)
	require.Error(t, err)
	assert.Equal(t, 2, dev.registers, "only the two earlier registrations succeeded")
}

// TestPinnedPieces: a host range is split exactly where a registration
// starts inside it, and nowhere else.
func TestPinnedPieces(t *testing.T) {
	mem := make([]byte, 100)
	at := func(i int) unsafe.Pointer { return unsafe.Pointer(&mem[i]) }
	regions := []unsafe.Pointer{at(0), at(30), at(60)}
	type piece struct{ start, off, n int }
	pieces := func(from, n int) []piece {
		var got []piece
		require.NoError(t, pinnedPieces(regions, at(from), uint64(n), func(p unsafe.Pointer, off, n uint64) error {
			got = append(got, piece{int(uintptr(p) - uintptr(at(0))), int(off), int(n)})
			return nil
		}))
		return got
	}
	assert.Equal(t, []piece{{5, 0, 20}}, pieces(5, 20), "inside one registration: one piece")
	assert.Equal(t, []piece{{30, 0, 30}}, pieces(30, 30), "starting on a boundary, ending on the next")
	assert.Equal(t, []piece{{20, 0, 10}, {30, 10, 30}, {60, 40, 20}}, pieces(20, 60), "across two boundaries")
	assert.Equal(t, []piece{{70, 0, 30}}, pieces(70, 30), "in the last registration")
	var calls int
	err := pinnedPieces(regions, at(20), 60, func(unsafe.Pointer, uint64, uint64) error {
		calls++
		return assert.AnError
	})
	assert.ErrorIs(t, err, assert.AnError)
	assert.Equal(t, 1, calls, "the first failure stops the copy")
}

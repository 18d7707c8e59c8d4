//go:build unix

package wazero

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A mapped reservation never moves; one whose mapping failed falls back to
// a growable slice and must not claim to be stable (the host would pin an
// address that a later grow abandons).
func TestReservationStability(t *testing.T) {
	r := reserveMemory(1 << 20)
	defer r.release()
	require.True(t, r.mapped)
	assert.True(t, r.stable())
	a := r.grow(64 << 10)
	b := r.grow(1 << 20)
	require.NotNil(t, a)
	require.NotNil(t, b)
	assert.Equal(t, base(a), base(b), "a mapped reservation grows in place")

	// More than any address space: the mapping fails.
	f := reserveMemory(1 << 62)
	defer f.release()
	require.False(t, f.mapped)
	assert.False(t, f.stable())
	a = f.grow(64 << 10)
	b = f.grow(1 << 20)
	require.NotNil(t, a)
	require.NotNil(t, b)
	assert.NotEqual(t, base(a), base(b), "the fallback slice moves when it grows")
}

// base is a slice's address (as a number: testify compares pointers by
// what they point to).
func base(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

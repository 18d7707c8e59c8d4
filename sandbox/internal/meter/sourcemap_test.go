package meter

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
)

// TestSourceMap: every instruction the rewrite copied maps back to its
// place in the original code, inserted code maps to an original
// instruction of the same function, function indices shift back past the
// added imports, and the functions the rewrite added map to nothing.
func TestSourceMap(t *testing.T) {
	src := wat.Must(`(module
	  (import "env" "f" (func $imp (param i32)))
	  (memory 1)
	  (func $a (param i32) (result i32)
	    (loop $l (br_if $l (i32.eqz (local.get 0))))
	    (drop (memory.grow (i32.const 1)))
	    (call $imp (local.get 0))
	    (call $b (local.get 0)))
	  (func $b (param i32) (result i32) (i32.div_u (local.get 0) (i32.const 0))))`)
	out, smap, err := InstrumentMapped(src, Options{Meter: true, StackLimit: 1 << 20, GrowHook: true})
	require.NoError(t, err)
	plain, err := Instrument(src, Options{Meter: true, StackLimit: 1 << 20, GrowHook: true})
	require.NoError(t, err)
	assert.Equal(t, plain, out, "mapping changes nothing of the rewrite")

	require.Len(t, smap.funcs, 2, "the two original functions (the grow wrapper is not one)")
	origStart, newStart := smap.CodeStart(false), smap.CodeStart(true)
	for k, fp := range smap.funcs {
		for i := 0; i < len(fp.pairs); i += 2 {
			orig, ok := smap.CodeOffset(fp.pairs[i])
			require.True(t, ok)
			assert.Equal(t, fp.pairs[i+1], orig)
			if i > 0 {
				assert.GreaterOrEqual(t, fp.pairs[i+1], fp.pairs[i-1], "function %d: original offsets ascend", k)
			}
		}
		// Every rewritten offset in the body maps into the same original
		// function.
		for off := fp.start; off < fp.end; off++ {
			orig, ok := smap.CodeOffset(off)
			require.True(t, ok)
			assert.GreaterOrEqual(t, orig, fp.pairs[1], "function %d at %d", k, off)
			assert.LessOrEqual(t, orig, fp.pairs[len(fp.pairs)-1], "function %d at %d", k, off)
		}
		// The original byte at the first instruction is the body's first
		// instruction: local.get 0 for b, loop for a.
		first := src[origStart+fp.pairs[1]]
		assert.Contains(t, []byte{0x03, 0x20}, first, "function %d", k)
		assert.Less(t, newStart+fp.start, uint64(len(out)))
	}
	// b's division, found in both modules, maps exactly.
	div := []byte{0x20, 0x00, 0x41, 0x00, 0x6e}
	origDiv := indexOf(src, div) + 4
	newDiv := indexOf(out, div) + 4
	require.Positive(t, origDiv)
	require.Positive(t, newDiv)
	got, ok := smap.CodeOffset(uint64(newDiv) - newStart)
	require.True(t, ok)
	assert.Equal(t, uint64(origDiv)-origStart, got)

	// Indices: the import stays 0; the meter's imports come next and map
	// to nothing; a and b shift back; the grow wrapper maps to nothing.
	idx, ok := smap.Function(0)
	assert.True(t, ok)
	assert.Equal(t, uint32(0), idx)
	for i := uint32(1); i <= smap.added; i++ {
		_, ok := smap.Function(i)
		assert.False(t, ok, "added import %d", i)
	}
	for orig := uint32(1); orig <= 2; orig++ {
		idx, ok := smap.Function(orig + smap.added)
		assert.True(t, ok)
		assert.Equal(t, orig, idx)
	}
	_, ok = smap.Function(3 + smap.added)
	assert.False(t, ok, "the grow wrapper")
	_, ok = smap.CodeOffset(smap.funcs[1].end + 1)
	assert.False(t, ok, "code past the original functions (the grow wrapper)")
}

func indexOf(b, sub []byte) int {
	for i := 0; i+len(sub) <= len(b); i++ {
		if string(b[i:i+len(sub)]) == string(sub) {
			return i
		}
	}
	return -1
}

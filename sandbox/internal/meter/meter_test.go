package meter

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/wasmbin"
)

func TestInstrumentShapes(t *testing.T) {
	src := `(module
  (import "env" "f" (func $imp (param i32)))
  (table 2 funcref)
  (elem (i32.const 0) $a $b)
  (global $g (mut i32) (i32.const 1))
  (func $a (export "a") (param i32) (result i32)
    (loop $l (br_if $l (i32.eqz (local.get 0))))
    (call $b (local.get 0)))
  (func $b (param i32) (result i32) (call $imp (local.get 0)) (ref.func $a) drop (local.get 0))
  (start $c)
  (func $c)
)`
	out, err := Instrument(wat.Must(src), Options{Meter: true, StackLimit: 1 << 20})
	require.NoError(t, err)
	m, err := wasmbin.Parse(out)
	require.NoError(t, err)
	require.Len(t, m.Imports, 3)
	require.Equal(t, RefillModule, m.Imports[1].Module)
	require.Equal(t, "(i64) -> (i64)", m.Imports[1].Func.String())
	a, ok := m.Export("a")
	require.True(t, ok)
	require.Equal(t, uint32(3), a.Index, "defined functions shift by two")
	_, ok = m.Export(BudgetExport)
	require.True(t, ok)
}

func TestInstrumentNoSections(t *testing.T) {
	out, err := Instrument(wat.Must(`(module (func (export "f")))`), Options{Meter: true, StackLimit: 1 << 20})
	require.NoError(t, err)
	m, err := wasmbin.Parse(out)
	require.NoError(t, err)
	require.Len(t, m.Imports, 2)
}

func TestMaxBlocks(t *testing.T) {
	src := `(module (memory 1) (func (export "f") (block (loop (if (i32.const 0) (then))))))`
	_, err := Instrument(wat.Must(src), Options{Meter: true, StackLimit: 1 << 20, MaxBlocks: 3})
	require.NoError(t, err)
	_, err = Instrument(wat.Must(src), Options{Meter: true, StackLimit: 1 << 20, MaxBlocks: 2})
	require.ErrorIs(t, err, ErrTooManyBlocks)
	require.NotErrorIs(t, err, ErrUnsupported, "refused, not run unmetered")
}

// Bulk operations get two i32 scratch locals and the cached budget; a
// function without them keeps its locals.
func TestBulkChargeLocals(t *testing.T) {
	src := `(module (memory 1)
  (func (export "fill") (param i32) (memory.fill (i32.const 0) (i32.const 0) (local.get 0)))
  (func (export "plain") (param i32) (drop (local.get 0))))`
	out, err := Instrument(wat.Must(src), Options{Meter: true, StackLimit: 1 << 20})
	require.NoError(t, err)
	m, err := wasmbin.Parse(out)
	require.NoError(t, err)
	_, ok := m.Export("fill")
	require.True(t, ok)
	// The charge reads the length operand: local.tee of the first scratch
	// local (index 2: the parameter, then the cached budget) right before
	// memory.fill.
	require.Contains(t, string(out), string([]byte{0x22, 2, 0x20, 1, 0x20, 2, 0xad}))
}

package wasmbin_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/internal/wat"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/wasmbin"
)

const sample = `(module
  (import "callbox" "log" (func (param i32 i32 i32)))
  (import "env" "mem" (memory 1 2))
  (table 3 funcref)
  (func (export "f") (param i32) (result i32) (local.get 0))
  (func $start)
  (start $start)
  (global (export "g") i32 (i32.const 0))
)`

func TestParse(t *testing.T) {
	m, err := wasmbin.Parse(wat.Must(sample))
	require.NoError(t, err)
	require.Len(t, m.Imports, 2)
	assert.Equal(t, "callbox", m.Imports[0].Module)
	assert.Equal(t, "(i32, i32, i32) -> ()", m.Imports[0].Func.String())
	assert.Equal(t, wasmbin.KindMemory, m.Imports[1].Kind)
	require.Len(t, m.Memories, 1)
	assert.Equal(t, wasmbin.Limits{Min: 1, Max: 2, HasMax: true}, m.Memories[0])
	require.Len(t, m.Tables, 1)
	assert.Equal(t, uint64(3), m.Tables[0].Min)
	e, ok := m.Export("f")
	require.True(t, ok)
	assert.Equal(t, "(i32) -> (i32)", e.Func.String())
	g, _ := m.Export("g")
	assert.Equal(t, wasmbin.KindGlobal, g.Kind)
	assert.True(t, m.HasStart)
}

func TestCustomSections(t *testing.T) {
	b := wat.Must(`(module)`)
	b = append(b, 0, 8, 3, 'a', 'b', 'c', 'x', 'y', 'z', '!')
	b = append(b, 0, 5, 3, 'a', 'b', 'c', '?')
	m, err := wasmbin.Parse(b)
	require.NoError(t, err)
	assert.Equal(t, [][]byte{[]byte("xyz!"), []byte("?")}, m.Custom["abc"])
}

func TestParseRejectsTruncation(t *testing.T) {
	full := wat.Must(sample)
	for n := 0; n < len(full); n++ {
		if _, err := wasmbin.Parse(full[:n]); err == nil && n < 8 {
			t.Fatalf("accepted %d-byte prefix", n)
		}
	}
	_, err := wasmbin.Parse([]byte("\x00asm\x01\x00\x00\x00\x02\xff\xff\xff\xff\x0f"))
	assert.ErrorContains(t, err, "runs past the end")
	_, err = wasmbin.Parse([]byte("\x00asm\x01\x00\x00\x00\x02\x05\xff\xff\xff\xff\x0f"))
	assert.ErrorContains(t, err, "exceeds the remaining")
	_, err = wasmbin.Parse([]byte("not wasm"))
	assert.ErrorIs(t, err, wasmbin.ErrNotWasm)
}

func FuzzParse(f *testing.F) {
	f.Add(wat.Must(sample))
	f.Add(wat.Must(`(module (memory 1) (export "memory" (memory 0)))`))
	f.Add(wat.Must(`(module (table 1 funcref) (table 3 10 externref) (func $f) (elem (i32.const 0) $f) (data "x") (global i32 (i32.const 1)))`))
	f.Add(wat.Must(`(module $named (func $f (param $p i32) (local $l i64)))`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := wasmbin.Parse(b)
		if err != nil {
			return
		}
		// Whatever parsed must be usable: types render, limits are sane.
		for _, e := range m.Exports {
			if e.Func != nil {
				_ = e.Func.String()
			}
		}
		for _, l := range append(m.Memories, m.Tables...) {
			if l.HasMax && !l.Is64 && l.Max > 1<<32 {
				t.Fatalf("32-bit limit %d out of range", l.Max)
			}
		}
		// Giving tables a maximum must keep the module parseable, and
		// bound every plain table.
		const total = 1 << 20
		limited, err := wasmbin.LimitTables(b, total)
		if err != nil {
			return
		}
		m2, err := wasmbin.Parse(limited)
		if err != nil {
			t.Fatalf("LimitTables made an unparseable module: %v", err)
		}
		if len(m2.Tables) != len(m.Tables) || len(m2.Exports) != len(m.Exports) || len(m2.Imports) != len(m.Imports) {
			t.Fatalf("LimitTables changed more than the tables")
		}
		sum := uint64(0)
		for i, l := range m2.Tables {
			if l.Min != m.Tables[i].Min {
				t.Fatalf("table %d: minimum %d became %d", i, m.Tables[i].Min, l.Min)
			}
			if !l.Is64 && !l.HasMax {
				return // a table LimitTables leaves alone (table64, initialiser)
			}
			sum += l.Max
		}
		if sum > total && !slices.Equal(limited, b) {
			t.Fatalf("tables may grow to %d elements in all", sum)
		}
	})
}

package wasmbin_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"

	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/wasmbin"
)

func leb(v uint64) []byte {
	var out []byte
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(out, b)
		}
		out = append(out, b|0x80)
	}
}

func section(id byte, body ...[]byte) []byte {
	var b []byte
	for _, p := range body {
		b = append(b, p...)
	}
	return append(append([]byte{id}, leb(uint64(len(b)))...), b...)
}

func module(sections ...[]byte) []byte {
	m := []byte("\x00asm\x01\x00\x00\x00")
	for _, s := range sections {
		m = append(m, s...)
	}
	return m
}

var (
	typeVoid = section(1, []byte{1, 0x60, 0, 0}) // one type: () -> ()
	funcs1   = section(3, []byte{1, 0})          // one function of type 0
)

// Each bomb is a module of a few bytes that declares a vector far longer
// than the module. wazero's decoder allocates such vectors at their declared
// length before reading them, and a failed allocation of gigabytes kills the
// Go process; Parse must refuse every one.
func TestParseRefusesDecoderBombs(t *testing.T) {
	huge := leb(0xffffffff)
	bombs := map[string]struct {
		wasm []byte
		msg  string
	}{
		"globals":        {module(section(6, huge)), "count 4294967295 exceeds"},
		"elements":       {module(section(9, huge)), "count 4294967295 exceeds"},
		"element items":  {module(section(9, []byte{1, 1, 0}, huge)), "count 4294967295 exceeds"},
		"element exprs":  {module(section(9, []byte{1, 5, 0x70}, huge)), "count 4294967295 exceeds"},
		"code":           {module(typeVoid, funcs1, section(10, huge)), "count 4294967295 exceeds"},
		"locals":         {module(typeVoid, funcs1, section(10, []byte{1}, leb(8), []byte{1}, leb(0xfffffff0), []byte{0x7e, 0x0b})), "function 0 declares more than 50000 locals"},
		"locals summed":  {module(typeVoid, funcs1, section(10, []byte{1}, []byte{10, 2}, leb(40000), []byte{0x7f}, leb(40000), []byte{0x7e, 0x0b})), "declares more than 50000 locals"},
		"local decls":    {module(typeVoid, funcs1, section(10, []byte{1, 6}, huge, []byte{0x0b})), "count 4294967295 exceeds"},
		"data":           {module(section(11, huge)), "count 4294967295 exceeds"},
		"data bytes":     {module(section(11, []byte{1, 1}, huge)), "runs past the end"},
		"tags":           {module(section(13, huge)), "count 4294967295 exceeds"},
		"function names": {module(section(0, []byte{4}, []byte("name"), []byte{1, 5}, huge)), "count 4294967295 exceeds"},
		"local names":    {module(section(0, []byte{4}, []byte("name"), []byte{2, 7, 1, 0}, huge)), "count 4294967295 exceeds"},
		"name string":    {module(section(0, []byte{4}, []byte("name"), []byte{0, 5}, huge)), "runs past the end"},
	}
	for name, b := range bombs {
		t.Run(name, func(t *testing.T) {
			_, err := wasmbin.Parse(b.wasm)
			require.Error(t, err)
			assert.Contains(t, err.Error(), b.msg)
		})
	}
}

func TestParseAcceptsOrdinarySections(t *testing.T) {
	m, err := wasmbin.Parse(wat.Must(`(module
	  (memory 1)
	  (table 4 funcref)
	  (global $g (mut i32) (i32.const 7))
	  (global i64 (i64.const -1))
	  (global f64 (f64.const 1.5))
	  (func $f (param i32) (local i64 i64 f32) (local.get 0) (drop))
	  (func $h)
	  (elem (i32.const 0) $f $h)
	  (elem declare func $h)
	  (elem (table 0) (offset (i32.const 2)) funcref (ref.func $f) (ref.null func))
	  (data (i32.const 16) "hello")
	  (data "passive")
	)`))
	require.NoError(t, err)
	assert.Len(t, m.Tables, 1)
	// The name section of a module compiled from text with names.
	_, err = wasmbin.Parse(wat.Must(`(module $m (func $named (param $p i32) (local $l i32)))`))
	require.NoError(t, err)
}

func TestLimitTables(t *testing.T) {
	tables := func(t *testing.T, wasm []byte) []wasmbin.Limits {
		m, err := wasmbin.Parse(wasm)
		require.NoError(t, err)
		// The rewritten module must still compile.
		rt := wazero.NewRuntime(context.Background())
		defer rt.Close(context.Background())
		_, err = rt.CompileModule(context.Background(), wasm)
		require.NoError(t, err)
		return m.Tables
	}
	const total = 1 << 20

	orig := wat.Must(`(module (table 1 funcref) (func (drop (table.grow (ref.null func) (i32.const 5)))))`)
	got, err := wasmbin.LimitTables(orig, total)
	require.NoError(t, err)
	assert.Equal(t, []wasmbin.Limits{{Min: 1, Max: total, HasMax: true}}, tables(t, got))

	// A lower declared maximum is kept, and the module returned as is.
	orig = wat.Must(`(module (table 2 10 funcref))`)
	got, err = wasmbin.LimitTables(orig, total)
	require.NoError(t, err)
	assert.Equal(t, orig, got)

	// Several tables share what their minimums leave.
	orig = wat.Must(`(module (table 100 funcref) (table 0 externref) (table 4 2000000 funcref) (memory 1) (data (i32.const 0) "x"))`)
	got, err = wasmbin.LimitTables(orig, total)
	require.NoError(t, err)
	share := uint64(total-104) / 3
	assert.Equal(t, []wasmbin.Limits{
		{Min: 100, Max: 100 + share, HasMax: true},
		{Min: 0, Max: share, HasMax: true},
		{Min: 4, Max: 4 + share, HasMax: true},
	}, tables(t, got))

	// No tables: unchanged.
	orig = wat.Must(`(module (memory 1))`)
	got, err = wasmbin.LimitTables(orig, total)
	require.NoError(t, err)
	assert.Equal(t, orig, got)

	_, err = wasmbin.LimitTables(wat.Must(`(module (table 800000 funcref) (table 800000 funcref))`), total)
	assert.ErrorContains(t, err, "tables declare 1600000 elements in all")
}

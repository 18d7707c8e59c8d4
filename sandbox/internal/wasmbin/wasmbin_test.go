package wasmbin_test

import (
	"context"
	"slices"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
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
		agreesWithWazero(t, m, b)
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

// agreesWithWazero checks Parse against the engine whose checks it stands
// in for: every function export of a module wazero compiles has the type
// wazero gives it. It reports whether wazero compiled the module. (The host's load check compares export types with
// Parse's reading; a reading that differs, or is missing, lets a module
// pass the check that the engine then refuses, or the reverse.)
func agreesWithWazero(t *testing.T, m *wasmbin.Module, b []byte) bool {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	cm, err := rt.CompileModule(ctx, b)
	if err != nil {
		return false
	}
	numeric := func(vs []api.ValueType) bool {
		for _, v := range vs {
			if v < 0x7b || v > 0x7f {
				return false
			}
		}
		return true
	}
	for name, def := range cm.ExportedFunctions() {
		e, ok := m.Export(name)
		if !ok || e.Kind != wasmbin.KindFunc {
			t.Fatalf("wazero exports function %q, Parse does not", name)
		}
		if e.Func == nil {
			t.Fatalf("export %q: Parse has no type, wazero has %v -> %v", name, def.ParamTypes(), def.ResultTypes())
		}
		if !numeric(def.ParamTypes()) || !numeric(def.ResultTypes()) {
			continue // reference types: Parse keeps only their prefix
		}
		if !slices.Equal(e.Func.Params, def.ParamTypes()) || !slices.Equal(e.Func.Results, def.ResultTypes()) {
			t.Fatalf("export %q: Parse reads %s, wazero %v -> %v", name, e.Func, def.ParamTypes(), def.ResultTypes())
		}
	}
	return true
}

// TestParseTypeForms reads the type section's GC forms as wazero does: a
// recursion group, a subtype, struct and array types taking type indices,
// and reference value types (ref null? $t).
func TestParseTypeForms(t *testing.T) {
	b, err := wat.Compile(`(module
  (rec (type $a (func (param i32) (result i32))) (type $s (struct (field i8) (field (mut (ref null $a))))))
  (type $arr (array (mut i16)))
  (type $sub (sub (func (param i32 i32) (result i32))))
  (type $r (func (param (ref null $a) i64) (result f32)))
  (func (export "a") (type $a) (i32.const 0))
  (func (export "sub") (type $sub) (i32.const 0))
  (func (export "r") (type $r) (f32.const 0)))`)
	if err != nil {
		t.Skipf("this WAT parser has no GC types: %v", err)
	}
	m, err := wasmbin.Parse(b)
	require.NoError(t, err)
	assert.True(t, m.GCTypes, "the module uses the GC proposal's type forms")
	for name, want := range map[string]string{"a": "(i32) -> (i32)", "sub": "(i32, i32) -> (i32)", "r": "((ref null _), i64) -> (f32)"} {
		e, ok := m.Export(name)
		require.True(t, ok, name)
		require.NotNil(t, e.Func, name)
		assert.Equal(t, want, e.Func.String(), name)
	}
	// wazero reads recursion groups of function types and reference
	// value types (not yet subtypes, structs or arrays).
	b = wat.Must(`(module
  (rec (type $a (func (param i32) (result i32))) (type $b (func (param (ref null $a)) (result i64))))
  (type $r (func (param (ref null $a) i64) (result f32)))
  (func (export "a") (type $a) (i32.const 0))
  (func (export "b") (type $b) (i64.const 0))
  (func (export "r") (type $r) (f32.const 0)))`)
	m, err = wasmbin.Parse(b)
	require.NoError(t, err)
	assert.True(t, agreesWithWazero(t, m, b), "wazero compiles the module")
}

// TestParseRefusesUnknownFunctionTypes: a function whose type index names
// no function type is refused at the index's byte. wazero does not check
// the index before it validates a call to that function, and panics.
func TestParseRefusesUnknownFunctionTypes(t *testing.T) {
	const header = "\x00asm\x01\x00\x00\x00"
	const oneType = "\x01\x04\x01\x60\x00\x00" // (type (func))
	_, err := wasmbin.Parse([]byte(header + oneType + "\x03\x03\x02\x00\x05"))
	var we *wasmbin.Error
	require.ErrorAs(t, err, &we)
	assert.Equal(t, 18, we.Offset)
	assert.ErrorContains(t, err, "function type index 5 names no function type (the module has 1 types)")

	_, err = wasmbin.Parse([]byte(header + oneType + "\x02\x07\x01\x01m\x01f\x00\x01"))
	assert.ErrorContains(t, err, "function type index 1 names no function type", "an imported function's")

	b, err := wat.Compile(`(module (type $s (struct)) (func (type $s)))`)
	if err == nil { // a WAT parser with GC types refuses this itself
		_, err = wasmbin.Parse(b)
		assert.ErrorContains(t, err, "names no function type", "a struct type")
	}
	_, err = wasmbin.Parse([]byte(header + oneType + "\x03\x02\x01\x00"))
	assert.NoError(t, err)
}

// TestNameSubsectionMustFillItsSize: a name subsection whose content ends
// before its declared size is refused. wazero reads the leftover bytes as
// the next subsection: in this 40-byte module (found by FuzzParse) they
// declare 4 billion local names, and wazero allocated 39 GB for them and
// killed the process.
func TestNameSubsectionMustFillItsSize(t *testing.T) {
	bomb := []byte("\x00asm\x01\x00\x00\x00\x00\x1e\x04name\x00\x06\x00\x020\xca\xca\xca\xca\x0400000\t000000000")
	_, err := wasmbin.Parse(bomb)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "name subsection 0: 5 bytes after its content")
	// A well-formed name section still parses.
	_, err = wasmbin.Parse(wat.Must(`(module $named (func $f (param $p i32) (local $l i64)))`))
	require.NoError(t, err)
}

// TestParseConstantExpressionGlobals: a constant expression (a global's
// initialiser, a data or element segment's offset, an element's item) may
// read only an imported immutable global, as WebAssembly 2.0 says; wazero's
// validator does not check it, so Parse does, at the index's byte.
func TestParseConstantExpressionGlobals(t *testing.T) {
	for name, src := range map[string]string{
		"an imported constant": `(module (import "m" "g" (global i32)) (global i32 (global.get 0)) (memory 1) (data (global.get 0) "x")
  (table 1 funcref) (elem (global.get 0) func))`,
		"none":     `(module (global i32 (i32.const 1)) (memory 1) (data (i32.const 0) "x"))`,
		"extended": `(module (import "m" "g" (global i32)) (global i32 (i32.add (global.get 0) (i32.const 2))))`,
	} {
		m, err := wasmbin.Parse(wat.Must(src))
		require.NoError(t, err, name)
		assert.False(t, m.GCTypes, name)
	}
	for name, src := range map[string]string{
		"a defined global":        `(module (global i32 (i32.const 1)) (global i32 (global.get 0)))`,
		"a global past the end":   `(module (memory 1) (data (global.get 0) "x"))`,
		"a mutable import":        `(module (import "m" "g" (global (mut i32))) (memory 1) (data (global.get 0) "x"))`,
		"in an element offset":    `(module (global i32 (i32.const 0)) (table 1 funcref) (elem (global.get 0) func))`,
		"a mutable import, later": `(module (import "m" "c" (global i32)) (import "m" "g" (global (mut i32))) (global i32 (global.get 1)))`,
	} {
		_, err := wasmbin.Parse(wat.MustUnchecked(src))
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "constant expression required", name)
	}
}

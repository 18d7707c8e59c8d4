package symbols_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/symbols"
)

// TestNamesAndBodies: function names come from the name section (an
// import's from its module and name when the section has none), and
// every offset inside a function's body finds that function.
func TestNamesAndBodies(t *testing.T) {
	wasm := wat.Must(`(module
	  (import "env" "host" (func $h))
	  (func $first (result i32) i32.const 1)
	  (func (result i32) i32.const 2)
	  (func $_ZN7mycrate6helper17h0123456789abcdefE (result i32) i32.const 3))`)
	tb := symbols.Read(wasm)
	assert.Equal(t, uint32(1), tb.FuncImports())
	assert.Equal(t, "h", tb.Name(0), "the name section names the import")
	assert.Equal(t, "first", tb.Name(1))
	assert.Equal(t, "", tb.Name(2), "an unnamed function")
	assert.Equal(t, "mycrate::helper", tb.Name(3), "demangled, without the hash")

	// The code section's bodies: each i32.const sits in its own function.
	for k, v := range []byte{1, 2, 3} {
		at := strings.Index(string(wasm), string([]byte{0x41, v, 0x0b}))
		require.Positive(t, at)
		idx, ok := tb.FuncAt(uint64(at) - tb.CodeStart())
		require.True(t, ok)
		assert.Equal(t, uint32(1+k), idx)
	}
	_, ok := tb.FuncAt(0)
	assert.False(t, ok, "offset 0 of the code section is its count, in no body")
}

// TestDemangle: Rust legacy and v0 and C++ names read as their source
// names; other names, and what the demangler cannot read, stay as they
// are; everything is cut to MaxText bytes and printable.
func TestDemangle(t *testing.T) {
	for in, want := range map[string]string{
		"_ZN7callbox5frame4deep17h1234567890abcdefE": "callbox::frame::deep",
		"_RNvCs1234_7mycrate3foo":                    "mycrate::foo",
		"_Z5levelii":                                 "level",
		"plain_c":                                    "plain_c",
		"_ZN5broken":                                 "_ZN5broken",
		"testdata/deep/level3":                       "testdata/deep/level3",
	} {
		assert.Equal(t, want, symbols.Demangle(in), in)
	}
	long := strings.Repeat("x", 10*symbols.MaxText)
	assert.Len(t, symbols.Demangle(long), symbols.MaxText)
	assert.Equal(t, "a?b?c", symbols.Clip("a\x1bb\nc"), "escapes and newlines cannot reach a terminal or start a log line")
	assert.Equal(t, "bad?", symbols.Clip("bad\xff"))
}

// TestNoDwarfNoSource: a module without DWARF has no source places.
func TestNoDwarfNoSource(t *testing.T) {
	tb := symbols.Read(wat.Must(`(module (func $f (result i32) i32.const 1))`))
	_, ok := tb.Source(5)
	assert.False(t, ok)
	assert.Equal(t, "", tb.NameAt(5))
}

// FuzzRead: no module, however malformed its name section, imports,
// code section or DWARF, makes Read or a lookup panic, and every name
// and file it returns is at most MaxText bytes.
func FuzzRead(f *testing.F) {
	f.Add(wat.Must(`(module (import "a" "b" (func)) (func $x) (func $_ZN1a1bE))`))
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x00\x05\x04name\x01"))
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x00\x0c\x0b.debug_info"))
	f.Fuzz(func(t *testing.T, wasm []byte) {
		tb := symbols.Read(wasm)
		for i := uint32(0); i < 8; i++ {
			assert.LessOrEqual(t, len(tb.Name(i)), symbols.MaxText)
		}
		for _, off := range []uint64{0, 1, 7, 64, 1 << 20} {
			tb.FuncAt(off)
			src, _ := tb.Source(off)
			assert.LessOrEqual(t, len(src.File), symbols.MaxText)
			assert.LessOrEqual(t, len(tb.NameAt(off)), symbols.MaxText)
		}
	})
}

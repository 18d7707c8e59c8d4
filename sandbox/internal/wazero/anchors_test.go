package wazero

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/meter"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/symbols"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/validate"
)

// TestLineAnchors: the anchored module drops the module's own DWARF
// sections and adds a line table a DWARF reader takes: every code offset
// past the function count maps to the anchor's one line, and nothing
// else of the module changes.
func TestLineAnchors(t *testing.T) {
	wasm := wat.Must(`(module (func $f (result i32) i32.const 1) (func $g (result i32) i32.const 2))`)
	// A stale DWARF section of the module's own, appended as a custom section.
	withDebug := customSection(append([]byte(nil), wasm...), ".debug_line", []byte{1, 2, 3})
	out := withLineAnchors(withDebug)
	assert.True(t, bytes.HasPrefix(out, wasm), "the module's own sections are kept as they are")
	assert.False(t, bytes.Contains(out, []byte{1, 2, 3}), "the module's stale .debug_line is gone")

	tb := symbols.Read(out)
	at := bytes.Index(out, []byte{0x41, 2, 0x0b}) // g's i32.const 2
	require.Positive(t, at)
	src, ok := tb.Source(uint64(at) - tb.CodeStart())
	require.True(t, ok, "the anchor's line table covers the code")
	assert.Equal(t, symbols.Source{File: anchorFile, Line: 1}, src)
	assert.Equal(t, "g", tb.Name(1), "the name section is kept")
}

// BenchmarkLineAnchors measures what the anchors cost wazero's compile of
// a 1.9 MB module (the Go SDK's checked example, metered): compile time
// and bytes allocated, with and without them, side by side.
func BenchmarkLineAnchors(b *testing.B) {
	src, err := os.ReadFile("../../../guests/prebuilt/go-checked.wasm")
	require.NoError(b, err)
	metered, err := meter.Instrument(src, MeterOptions(DefaultMaxStack, false))
	require.NoError(b, err)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		wasm []byte
	}{{"plain", metered}, {"anchored", withLineAnchors(metered)}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCoreFeatures(validate.WazeroFeatures))
				cm, err := rt.CompileModule(ctx, c.wasm)
				require.NoError(b, err)
				_ = cm.Close(ctx)
				_ = rt.Close(ctx)
			}
		})
	}
}

package meter

import (
	"os"
	"testing"
)

// BenchmarkInstrument rewrites a real module: the Go guest example (about
// 1.9 MB, built by make guests).
func BenchmarkInstrument(b *testing.B) {
	wasm, err := os.ReadFile("../../../guests/build/go/scale.wasm")
	if err != nil {
		b.Skip("run make guests first:", err)
	}
	b.SetBytes(int64(len(wasm)))
	for i := 0; i < b.N; i++ {
		if _, err := Instrument(wasm, Options{Meter: true, StackLimit: 1 << 20, GrowHook: true}); err != nil {
			b.Fatal(err)
		}
	}
}

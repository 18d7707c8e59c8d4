package guests_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// The simd128 variants compute their scalar examples' results bit for bit
// (each lane does the scalar multiply and add, in the same order; wasm
// forbids fusing them), at every length around the four-lane width, with
// buffers 64- and 16-byte aligned, on both engines.
func TestSIMDMatchesScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	randf := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = (rng.Float32()*2 - 1) * 100
		}
		return out
	}
	type call struct {
		name string
		ins  []abi.Tensor
	}
	var scales, matmuls []call
	for _, n := range []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 33, 1023, 4097} {
		scales = append(scales, call{fmt.Sprintf("n=%d", n), []abi.Tensor{abi.From(randf(n)), abi.Scalar(rng.Float32()*4 - 2)}})
	}
	for _, m := range []int{1, 3} {
		for _, k := range []int{0, 1, 5} {
			for n := 0; n <= 9; n++ {
				matmuls = append(matmuls, call{fmt.Sprintf("%dx%dx%d", m, k, n),
					[]abi.Tensor{abi.From(randf(m*k), int64(m), int64(k)), abi.From(randf(k*n), int64(k), int64(n))}})
			}
		}
	}
	matmuls = append(matmuls, call{"17x33x19", []abi.Tensor{abi.From(randf(17*33), 17, 33), abi.From(randf(33*19), 33, 19)}})
	ctx := context.Background()
	cacheDir := t.TempDir()
	for _, lang := range selectedLangs(t) {
		if lang == "go" {
			continue // no SIMD variants: Go's wasip1 port emits no SIMD
		}
		for _, engine := range engineNames() {
			for _, skewed := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/skewed=%v", lang, engine, skewed), func(t *testing.T) {
					h := newHost(t, lang, engine, skewed, cacheDir, &logSink{})
					for simd, scalar := range simdExamples {
						calls := scales
						if scalar == "matmul" {
							calls = matmuls
						}
						for _, c := range calls {
							want, err := h.Invoke(ctx, scalar, c.ins...)
							require.NoError(t, err, "%s %s", scalar, c.name)
							got, err := h.Invoke(ctx, simd, c.ins...)
							require.NoError(t, err, "%s %s", simd, c.name)
							require.Len(t, got, 1)
							require.Equal(t, want[0].Shape, got[0].Shape, "%s %s", simd, c.name)
							require.Equal(t, want[0].Data, got[0].Data, "%s %s: not bit for bit %s's result", simd, c.name, scalar)
						}
					}
				})
			}
		}
	}
}

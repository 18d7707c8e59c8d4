package bench

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newTestEnv(t testing.TB) *Env {
	t.Helper()
	env, err := NewEnv(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, env.Close()) })
	return env
}

// Every variant computes what the native kernel computes, on every
// workload: the suite measures the same work everywhere.
func TestOutputsMatchReference(t *testing.T) {
	env := newTestEnv(t)
	for _, w := range Workloads() {
		if testing.Short() && w.Dims[0] >= 1<<20 {
			continue
		}
		d := newData(w)
		for _, v := range Variants() {
			if !v.Supports(w) {
				continue
			}
			t.Run(w.ID+"/"+v.ID, func(t *testing.T) {
				r, err := env.setup(v, d)
				require.NoError(t, err)
				defer r.close()
				for range 2 { // the second call runs on a warm instance
					require.NoError(t, r.op())
				}
				if v.ID == "go-copy" {
					return // copies, computes nothing
				}
				require.NoError(t, d.check(r.output()))
			})
		}
	}
}

// The Extism input encoding is the one kernels_extism.c reads.
func TestExtismInput(t *testing.T) {
	d := newData(Workload{ID: "m", Kernel: "matmul", Dims: []int{2, 3, 4}, Calls: 1})
	buf := extismInput(d, nil)
	require.Len(t, buf, 16+4*(6+12))
	assert.Equal(t, []byte{2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0}, buf[:16])
	assert.Equal(t, d.inputs[0], floatsOf(buf[16:16+24]))
}

// The native softmax's expf is the guest's: equal to math.Exp within
// 2 ulp-ish on the range softmax sees.
func TestExpf(t *testing.T) {
	for x := float32(-20); x <= 0; x += 0.37 {
		assert.InEpsilon(t, expOf(x), expf(x), 3e-7, "x=%g", x)
	}
	assert.Equal(t, float32(0), expf(-200))
}

// BenchmarkSuite is the whole table as Go benchmarks:
// go test -run '^$' -bench . .
// (callbox-bench runs the same cases, interleaved and repeated, and
// writes the report.)
func BenchmarkSuite(b *testing.B) {
	env := newTestEnv(b)
	for _, w := range Workloads() {
		d := newData(w)
		for _, v := range Variants() {
			if !v.Supports(w) {
				continue
			}
			// Set up inside the sub-benchmark, so -bench filters skip it.
			var r *runner
			b.Run(w.ID+"/"+v.ID, func(b *testing.B) {
				if r == nil {
					var err error
					r, err = env.setup(v, d)
					require.NoError(b, err)
					require.NoError(b, r.op()) // warm-up, as Run does
					b.ResetTimer()
				}
				b.SetBytes(int64(d.inputBytes() * w.Calls))
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					if err := r.op(); err != nil {
						b.Fatal(err)
					}
				}
			})
			if r != nil {
				r.close()
			}
		}
	}
}

func expOf(x float32) float32 { return float32(math.Exp(float64(x))) }

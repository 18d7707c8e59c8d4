package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The SIMD variants run the single-call scale and matmul workloads only:
// the SIMD module has no softmax, and the chain is the scalar tiny call's.
func TestSIMDVariantsSupport(t *testing.T) {
	var simd []Variant
	for _, v := range Variants() {
		if v.SIMD {
			simd = append(simd, v)
		}
	}
	require.Len(t, simd, 2*len(Engines()))
	for _, v := range simd {
		for _, w := range Workloads() {
			want := !w.Chain() && (w.Kernel == "scale" || w.Kernel == "matmul")
			assert.Equal(t, want, v.Supports(w), "%s on %s", v.ID, w.ID)
		}
		assert.Empty(t, rawOf(v), "%s has no raw SIMD counterpart", v.ID)
	}
}

// Target 11 reads SIMD zero-copy against native Go at each scale size, and
// SIMD copying against SIMD zero-copy at 32 MiB.
func TestSIMDTarget(t *testing.T) {
	res := func(wl, v string, cost float64) Result {
		return Result{Workload: Workload{ID: wl, Kernel: "scale", Calls: 1}, Variant: Variant{ID: v}, NsPerOp: cost, CPUPerOp: cost, Samples: []float64{cost}}
	}
	r := &Report{}
	for _, wl := range []string{"scale-64KiB", "scale-4MiB", "scale-32MiB"} {
		r.Results = append(r.Results, res(wl, "go-native", 100))
		for _, e := range Engines() {
			r.Results = append(r.Results, res(wl, "callbox-"+e+":simd-zero-copy", 110), res(wl, "callbox-"+e+":simd", 300))
		}
	}
	// One size misses the 1.2x limit.
	for i := range r.Results {
		if r.Results[i].Workload.ID == "scale-4MiB" && r.Results[i].Variant.ID == "callbox-wazero:simd-zero-copy" {
			r.Results[i].NsPerOp, r.Results[i].CPUPerOp, r.Results[i].Samples = 130, 130, []float64{130}
		}
	}
	tg := r.simdTarget()
	assert.Equal(t, 11, tg.N)
	require.Len(t, tg.Checks, 4*len(Engines()))
	for _, c := range tg.Checks {
		require.True(t, c.Measured, c.What)
		switch c.What {
		case "wazero scale-4MiB: SIMD zero-copy / native Go":
			assert.False(t, c.Met, c.What)
			assert.Equal(t, "1.30x", c.Value)
		case "wazero scale-32MiB: SIMD copying / SIMD zero-copy":
			assert.True(t, c.Met, c.What)
			assert.Equal(t, "2.73x", c.Value)
		default:
			assert.True(t, c.Met, c.What)
		}
	}
	assert.Equal(t, "MISSED", tg.Status())
	assert.Len(t, r.simdReading(), len(Engines()))
}

// The SIMD module's kernels handle every length, not just the workloads'
// multiples of 64: scale bit for bit (one multiply per element, as Go's
// loop), matmul within the suite's tolerance, on every engine.
func TestSIMDKernelsOddShapes(t *testing.T) {
	ctx := context.Background()
	env := newTestEnv(t)
	for _, v := range simdVariants() {
		if v.Mode != ModeDefault {
			continue
		}
		h, err := env.host(v)
		require.NoError(t, err)
		for n := 0; n <= 140; n++ {
			d := newData(Workload{ID: fmt.Sprintf("scale-%d", n), Kernel: "scale", Dims: []int{n}, Calls: 1})
			outs, err := h.Invoke(ctx, "scale", d.tensors()...)
			require.NoError(t, err, "%s n=%d", v.ID, n)
			require.Equal(t, d.want, append([]float32{}, floatsOf(outs[0].Data)...), "%s n=%d", v.ID, n)
		}
		for _, dims := range [][]int{{1, 1, 1}, {2, 0, 3}, {3, 5, 7}, {4, 9, 13}, {5, 3, 66}} {
			d := newData(Workload{ID: fmt.Sprint("matmul", dims), Kernel: "matmul", Dims: dims, Calls: 1})
			outs, err := h.Invoke(ctx, "matmul", d.tensors()...)
			require.NoError(t, err, "%s %v", v.ID, dims)
			require.NoError(t, d.check(floatsOf(outs[0].Data)), "%s %v", v.ID, dims)
		}
	}
}

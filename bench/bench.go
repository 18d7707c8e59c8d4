// Package bench is callbox's benchmark suite: the same tensor kernels run
// side by side on the physical floor (Go copy, native Go), the raw engines
// (hand-written memory writes and calls on wazero and wasmtime), Extism,
// and callbox in each of its modes (pooled and fresh isolation, with and
// without a timeout, copying and zero-copy API), on a table of workloads.
//
// Every (workload, variant) pair is one Case. The table runs as Go
// benchmarks (`go test -bench .` in bench/) and programmatically
// through testing.Benchmark (Run, used by callbox-bench, which also
// measures the targets of targets.go and writes docs/PERFORMANCE.md).
//
// The kernels are one C module built with the C SDK
// (guests/bench/kernels.c): its callbox callbacks and its raw entry points
// call the very same compiled functions, so callbox and the raw engines run
// identical guest code. The Extism plugin (guests/bench/kernels_extism.c)
// compiles the same kernel source.
// The SIMD variants load a second module, scale and matmul in simd128
// (guests/bench/kernels_simd.c; simd.go).
package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"unsafe"

	"github.com/seed4b3e0ccb/callbox/guests/prebuilt"
)

// Workload is one row group of the table: a kernel on fixed shapes, called
// Calls times per operation.
type Workload struct {
	ID     string // go test sub-benchmark name, e.g. "scale-4MiB"
	Name   string // as the report prints it
	Kernel string // scale, matmul or softmax (the callback and export name)
	Dims   []int  // scale: n; matmul: m, k, n; softmax: rows, n
	Calls  int    // calls per operation: 1, or the length of a chain
}

// Chain reports whether the workload is the ordered chain.
func (w Workload) Chain() bool { return w.Calls > 1 }

// Workloads is the suite's table, in report order.
func Workloads() []Workload {
	return []Workload{
		{ID: "tiny-1KiB", Name: "tiny call: scale 1 KiB", Kernel: "scale", Dims: []int{256}, Calls: 1},
		{ID: "scale-64KiB", Name: "scale 64 KiB", Kernel: "scale", Dims: []int{16 << 10}, Calls: 1},
		{ID: "scale-4MiB", Name: "scale 4 MiB", Kernel: "scale", Dims: []int{1 << 20}, Calls: 1},
		{ID: "scale-32MiB", Name: "scale 32 MiB", Kernel: "scale", Dims: []int{8 << 20}, Calls: 1},
		{ID: "matmul-256", Name: "matmul 256³", Kernel: "matmul", Dims: []int{256, 256, 256}, Calls: 1},
		{ID: "softmax-1024x1024", Name: "softmax 1024x1024", Kernel: "softmax", Dims: []int{1024, 1024}, Calls: 1},
		{ID: "chain-100", Name: "ordered chain: 100 x scale 1 KiB", Kernel: "scale", Dims: []int{256}, Calls: 100},
	}
}

// data holds one workload's inputs, in Go memory, and the reference output.
type data struct {
	w        Workload
	inputs   [][]float32 // the tensor inputs (scale's factor is separate)
	shapes   [][]int64
	factor   float32 // scale only
	outShape []int64
	want     []float32 // the native kernel's output
}

// newData generates a workload's inputs (deterministic) and computes the
// reference output natively.
func newData(w Workload) *data {
	rng := rand.New(rand.NewPCG(1, uint64(len(w.ID))))
	fill := func(n int, lo, hi float32) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = lo + (hi-lo)*rng.Float32()
		}
		return s
	}
	d := &data{w: w}
	switch w.Kernel {
	case "scale":
		n := w.Dims[0]
		d.inputs = [][]float32{fill(n, -1, 1)}
		d.shapes = [][]int64{{int64(n)}}
		d.factor = 1.5
		d.outShape = []int64{int64(n)}
	case "matmul":
		m, k, n := w.Dims[0], w.Dims[1], w.Dims[2]
		d.inputs = [][]float32{fill(m*k, -1, 1), fill(k*n, -1, 1)}
		d.shapes = [][]int64{{int64(m), int64(k)}, {int64(k), int64(n)}}
		d.outShape = []int64{int64(m), int64(n)}
	case "softmax":
		rows, n := w.Dims[0], w.Dims[1]
		d.inputs = [][]float32{fill(rows*n, -4, 4)}
		d.shapes = [][]int64{{int64(rows), int64(n)}}
		d.outShape = []int64{int64(rows), int64(n)}
	default:
		panic("bench: unknown kernel " + w.Kernel)
	}
	d.want = make([]float32, d.outLen())
	d.native(d.want)
	return d
}

// outLen is the number of output elements.
func (d *data) outLen() int {
	n := 1
	for _, s := range d.outShape {
		n *= int(s)
	}
	return n
}

// inputBytes is the tensor bytes one call reads (scale's factor aside).
func (d *data) inputBytes() int {
	n := 0
	for _, in := range d.inputs {
		n += 4 * len(in)
	}
	return n
}

// native runs the workload's kernel once in Go, into out.
func (d *data) native(out []float32) {
	switch d.w.Kernel {
	case "scale":
		nativeScale(d.inputs[0], out, d.factor)
	case "matmul":
		nativeMatmul(d.inputs[0], d.inputs[1], out, d.w.Dims[0], d.w.Dims[1], d.w.Dims[2])
	case "softmax":
		nativeSoftmax(d.inputs[0], out, d.w.Dims[0], d.w.Dims[1])
	}
}

// tolerance is the check of guests/EXAMPLES.md: |got - want| <= atol +
// rtol*|want|.
func (d *data) tolerance() (rtol, atol float64) {
	if d.w.Kernel == "matmul" {
		return 1e-4, 1e-4
	}
	return 1e-5, 1e-6
}

// check compares an output with the reference.
func (d *data) check(got []float32) error {
	if len(got) != len(d.want) {
		return fmt.Errorf("%s: output has %d elements, want %d", d.w.ID, len(got), len(d.want))
	}
	rtol, atol := d.tolerance()
	for i, g := range got {
		w := d.want[i]
		if math.Abs(float64(g)-float64(w)) > atol+rtol*math.Abs(float64(w)) {
			return fmt.Errorf("%s: output[%d] = %g, want %g", d.w.ID, i, g, w)
		}
	}
	return nil
}

// The floor: the kernels as plain Go loops, the algorithms of kernels.h.

func nativeScale(x, y []float32, factor float32) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] = v * factor
	}
}

func nativeMatmul(a, b, c []float32, m, k, n int) {
	for i := 0; i < m; i++ {
		ci := c[i*n : (i+1)*n]
		for j := range ci {
			ci[j] = 0
		}
		for p := 0; p < k; p++ {
			aip := a[i*k+p]
			bp := b[p*n : (p+1)*n]
			for j := range ci {
				ci[j] += aip * bp[j]
			}
		}
	}
}

func nativeSoftmax(x, y []float32, rows, n int) {
	for r := 0; r < rows; r++ {
		in, out := x[r*n:(r+1)*n], y[r*n:(r+1)*n]
		maxv, sum := float32(math.Inf(-1)), float32(0)
		for _, v := range in {
			if v > maxv {
				maxv = v
			}
		}
		for i, v := range in {
			out[i] = expf(v - maxv)
			sum += out[i]
		}
		for i := range out {
			out[i] /= sum
		}
	}
}

// expf is callbox.h's freestanding callbox_expf in Go: the same polynomial,
// so the native softmax does the same work as the guest's.
func expf(x float32) float32 {
	switch {
	case x != x:
		return x
	case x > 88.7228394:
		return float32(math.Inf(1))
	case x < -103.972084:
		return 0
	}
	half := float32(0.5)
	if x < 0 {
		half = -0.5
	}
	k := int32(x*1.44269504 + half)
	r := (x - float32(k)*0.693145752) - float32(k)*1.42860677e-6
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040)))))))
	k1 := k / 2
	k2 := k - k1
	s1 := math.Float32frombits(uint32(k1+127) << 23)
	s2 := math.Float32frombits(uint32(k2+127) << 23)
	return p * s1 * s2
}

// bytesOf views a float32 slice as bytes, without copying.
func bytesOf(s []float32) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 4*len(s))
}

// floatsOf views bytes as float32s, without copying; b must be 4-aligned.
func floatsOf(b []byte) []float32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// KernelsModule is the callbox benchmark module (guests/bench/kernels.c),
// embedded through guests/prebuilt.
func KernelsModule() ([]byte, error) { return prebuilt.Module("bench", "kernels") }

// ExtismModule is the same kernels as an Extism plugin
// (guests/bench/kernels_extism.c).
func ExtismModule() ([]byte, error) { return prebuilt.Module("bench", "kernels_extism") }

// Package reference holds plain Go implementations of the example callbacks
// in guests/EXAMPLES.md. They generate the conformance vectors and are the
// native baseline the benchmarks compare guests against.
package reference

import (
	"fmt"
	"math"
)

// Scale returns x * factor.
func Scale(x []float32, factor float32) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = v * factor
	}
	return y
}

// Softmax computes a row-wise softmax of the b×n row-major matrix x, in
// float64 and rounded to float32.
func Softmax(x []float32, b, n int) []float32 {
	y := make([]float32, len(x))
	for r := 0; r < b; r++ {
		row := x[r*n : (r+1)*n]
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, float64(v))
		}
		sum := 0.0
		for _, v := range row {
			sum += math.Exp(float64(v) - m)
		}
		for i, v := range row {
			y[r*n+i] = float32(math.Exp(float64(v)-m) / sum)
		}
	}
	return y
}

// Matmul multiplies the m×k matrix a by the k×n matrix b, accumulating in
// float32 in the order p = 0..k-1, as the examples do.
func Matmul(a, b []float32, m, k, n int) []float32 {
	c := make([]float32, m*n)
	MatmulInto(c, a, b, m, k, n)
	return c
}

// MatmulInto is Matmul writing into c (len m*n), for benchmarks.
func MatmulInto(c, a, b []float32, m, k, n int) {
	for i := 0; i < m; i++ {
		row := c[i*n : (i+1)*n]
		clear(row)
		for p := 0; p < k; p++ {
			av := a[i*k+p]
			brow := b[p*n : (p+1)*n]
			for j := range row {
				row[j] += av * brow[j]
			}
		}
	}
}

// Histogram counts values into the bins defined by ascending edges:
// bin i holds edges[i] <= v < edges[i+1], the last bin v >= edges[b-1].
// Values below edges[0] and NaNs are not counted.
func Histogram[T float32 | int32](values, edges []T) []int64 {
	counts := make([]int64, len(edges))
	for _, v := range values {
		if v != v { // NaN
			continue
		}
		for i := len(edges) - 1; i >= 0; i-- {
			if v >= edges[i] {
				counts[i]++
				break
			}
		}
	}
	return counts
}

// Checked returns sqrt(x), or the error message the examples report for
// the first NaN or negative element.
func Checked(x []float32) ([]float32, string) {
	y := make([]float32, len(x))
	for i, v := range x {
		switch {
		case v != v:
			return nil, fmt.Sprintf("x[%d] is NaN", i)
		case v < 0:
			return nil, fmt.Sprintf("x[%d] = %v is negative; checked computes sqrt, which needs x >= 0", i, v)
		}
		y[i] = float32(math.Sqrt(float64(v)))
	}
	return y, ""
}

// The users' kernels (guests/*/kernels/, built into guests/build/bench/):
// each is the same algorithm as the guest's, in the same precision and
// order, so a benchmark compares code generation, not arithmetic.

// ClipInto writes min(max(x[i], 0), t) to y, as guests/assemblyscript/kernels/clip.ts.
func ClipInto(y, x []float32, t float32) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] = min(max(v, 0), t)
	}
}

// NormalizeInto writes each row of the b×n matrix x with its mean
// subtracted and divided by sqrt(variance + 1e-5), the mean and the
// population variance summed in float32 in index order, as
// guests/rust/kernels/normalize.rs.
func NormalizeInto(y, x []float32, b, n int) {
	for r := 0; r < b; r++ {
		row, out := x[r*n:(r+1)*n], y[r*n:(r+1)*n]
		var sum float32
		for _, v := range row {
			sum += v
		}
		mean := sum / float32(n)
		var ss float32
		for _, v := range row {
			ss += (v - mean) * (v - mean)
		}
		inv := 1 / float32(math.Sqrt(float64(ss/float32(n)+1e-5)))
		for i, v := range row {
			out[i] = (v - mean) * inv
		}
	}
}

// DigitizeInto writes to out the number of edges <= x[i] (len(edges) for
// a NaN), scanning the ascending edges from the first, as
// guests/c/kernels/digitize.c.
func DigitizeInto(out []int32, x, edges []float32) {
	out = out[:len(x)]
	for i, v := range x {
		b := 0
		if v != v {
			b = len(edges)
		} else {
			for b < len(edges) && edges[b] <= v {
				b++
			}
		}
		out[i] = int32(b)
	}
}

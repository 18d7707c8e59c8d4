//go:build wasip1

// Command matmul multiplies matrices: c[i,j] = Σ_p a[i,p] * b[p,j],
// accumulated in float32 in the order p = 0..k-1 (k = 0 gives zeros).
package main

import "github.com/seed4b3e0ccb/callbox/guests/go/callbox"

func init() { callbox.Signature("matmul", "(a: f32[m,k], b: f32[k,n]) -> f32[m,n]") }

//go:wasmexport matmul
func matmul(frame uint32) int32 {
	return callbox.Run(frame, func(f *callbox.Frame) error {
		a, b := callbox.Input[float32](f, 0), callbox.Input[float32](f, 1)
		c := callbox.Output[float32](f, 0).Data
		m, k, n := a.Shape[0], a.Shape[1], b.Shape[1]
		for i := range m {
			row := a.Data[i*k : (i+1)*k]
			for j := range n {
				var s float32
				for p, av := range row {
					s += av * b.Data[p*n+j]
				}
				c[i*n+j] = s
			}
		}
		return nil
	})
}

func main() {}

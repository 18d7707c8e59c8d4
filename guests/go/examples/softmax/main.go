//go:build wasip1

// Command softmax is a row-wise softmax over the last axis, numerically
// stable (the row max is subtracted before exp), summed in float64.
package main

import (
	"math"

	"github.com/seed4b3e0ccb/callbox/guests/go/callbox"
)

func init() { callbox.Signature("softmax", "(x: f32[b,n]) -> f32[b,n]") }

//go:wasmexport softmax
func softmax(frame uint32) int32 {
	return callbox.Run(frame, func(f *callbox.Frame) error {
		x := callbox.Input[float32](f, 0)
		y := callbox.Output[float32](f, 0).Data
		rows, n := x.Shape[0], x.Shape[1]
		for r := range rows {
			in, out := x.Data[r*n:(r+1)*n], y[r*n:(r+1)*n]
			m := math.Inf(-1)
			for _, v := range in {
				m = max(m, float64(v))
			}
			sum := 0.0
			for _, v := range in {
				sum += math.Exp(float64(v) - m)
			}
			for i, v := range in {
				out[i] = float32(math.Exp(float64(v)-m) / sum)
			}
		}
		return nil
	})
}

func main() {}

//go:build wasip1

// Command checked computes y = sqrt(x), refusing NaN and negative elements
// with INVALID_ARGUMENT and a message naming the first bad one.
package main

import (
	"math"
	"strconv"

	"github.com/seed4b3e0ccb/callbox/guests/go/callbox"
)

func init() { callbox.Signature("checked", "(x: f32[n]) -> f32[n]") }

//go:wasmexport checked
func checked(frame uint32) int32 {
	return callbox.Run(frame, func(f *callbox.Frame) error {
		x := callbox.Input[float32](f, 0).Data
		for i, v := range x {
			switch {
			case v != v:
				return callbox.Fail(callbox.InvalidArgument, "x["+strconv.Itoa(i)+"] is NaN")
			case v < 0:
				return callbox.Fail(callbox.InvalidArgument, "x["+strconv.Itoa(i)+"] = "+
					strconv.FormatFloat(float64(v), 'g', -1, 32)+" is negative; checked computes sqrt, which needs x >= 0")
			}
		}
		y := callbox.Output[float32](f, 0).Data
		for i, v := range x {
			y[i] = float32(math.Sqrt(float64(v)))
		}
		return nil
	})
}

func main() {}

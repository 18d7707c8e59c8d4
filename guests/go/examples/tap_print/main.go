//go:build wasip1

// Command tap_print passes x through unchanged (the output aliases it) and
// logs one line about it, like jax.debug.print or an io_callback tap.
package main

import (
	"strconv"

	"github.com/seed4b3e0ccb/callbox/guests/go/callbox"
)

func init() { callbox.Signature("tap_print", "(x: f32[n]) -> $x") }

//go:wasmexport tap_print
func tapPrint(frame uint32) int32 {
	return callbox.Run(frame, func(f *callbox.Frame) error {
		x := callbox.Input[float32](f, 0).Data
		if len(x) == 0 {
			callbox.Log.Info("tap_print: n=0")
			return nil
		}
		lo, hi, sum := x[0], x[0], 0.0
		for _, v := range x {
			lo, hi, sum = min(lo, v), max(hi, v), sum+float64(v)
		}
		callbox.Log.Info("tap_print: n=" + strconv.Itoa(len(x)) + " min=" + ftoa(lo) + " max=" + ftoa(hi) + " mean=" + ftoa(float32(sum/float64(len(x)))))
		return nil
	})
}

func ftoa(v float32) string { return strconv.FormatFloat(float64(v), 'g', -1, 32) }

func main() {}

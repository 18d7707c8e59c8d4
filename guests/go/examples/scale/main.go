//go:build wasip1

// Command scale is the hello-world callback: y[i] = x[i] * factor.
package main

import "github.com/seed4b3e0ccb/callbox/guests/go/callbox"

func init() { callbox.Signature("scale", "(x: f32[n], factor: f32[]) -> f32[n]") }

//go:wasmexport scale
func scale(frame uint32) int32 {
	return callbox.Run(frame, func(f *callbox.Frame) error {
		x := callbox.Input[float32](f, 0).Data
		factor := callbox.Input[float32](f, 1).Data[0] // a rank-0 tensor holds one element
		y := callbox.Output[float32](f, 0).Data
		for i, v := range x {
			y[i] = v * factor
		}
		return nil
	})
}

func main() {}

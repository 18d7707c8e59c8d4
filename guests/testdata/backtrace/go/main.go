//go:build wasip1

// Command deep is the callback deep = (x: f32[n]) -> f32[n], failing
// three calls deep: level1 calls level2 calls level3, which divides by
// zero (a Go runtime panic). The backtrace test checks that the failure
// names the three functions.
package main

import "github.com/seed4b3e0ccb/callbox/guests/go/callbox"

func init() { callbox.Signature("deep", "(x: f32[n]) -> f32[n]") }

//go:noinline
func level3(n int) int { return 1000 / (n - n) }

//go:noinline
func level2(n int) int { return level3(n+1) * 2 }

//go:noinline
func level1(n int) int { return level2(n+1) * 3 }

//go:wasmexport deep
func deep(frame uint32) int32 {
	return callbox.Run(frame, func(f *callbox.Frame) error {
		x := callbox.Input[float32](f, 0).Data
		n := level1(len(x))
		y := callbox.Output[float32](f, 0).Data
		for i, v := range x {
			y[i] = v * float32(n)
		}
		return nil
	})
}

func main() {}

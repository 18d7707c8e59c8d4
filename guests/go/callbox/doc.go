//go:build wasip1

// Package callbox is the guest SDK for writing callbox callbacks in Go
// (GOOS=wasip1 GOARCH=wasm, built with -buildmode=c-shared). It implements
// the guest side of ABI v1 (abi/ABI.md): the callbox_* exports, the call
// frame read in place, status and error reporting, and logging.
//
// A callback declares its signature and runs its body through Run:
//
//	func init() { callbox.Signature("scale", "(x: f32[n], factor: f32[]) -> f32[n]") }
//
//	//go:wasmexport scale
//	func scale(frame uint32) int32 {
//		return callbox.Run(frame, func(f *callbox.Frame) error {
//			x := callbox.Input[float32](f, 0).Data
//			factor := callbox.Input[float32](f, 1).Data[0]
//			y := callbox.Output[float32](f, 0).Data
//			for i, v := range x {
//				y[i] = v * factor
//			}
//			return nil
//		})
//	}
//
//	func main() {}
//
// Views alias the frame in guest memory (nothing is copied) and are valid
// only during the call. A body reports failure by returning an error
// (Fail sets the status; any other error is UNKNOWN); a panic is recovered
// and reported as INTERNAL with its message and the line that panicked.
//
// The SDK does not import fmt or os, so a callback that does not either
// stays small; the Go runtime itself imports WASI, so Go callbacks need
// `wasi: minimal` in their callbox config.
package callbox

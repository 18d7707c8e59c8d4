//go:build !unix

package bench

// processCPU is not measured on this platform.
func processCPU() (ns int64, ok bool) { return 0, false }

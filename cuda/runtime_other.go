//go:build !linux

package cuda

import "fmt"

// OpenRuntime fails: callbox loads the CUDA runtime on Linux only.
func OpenRuntime() (*Runtime, error) {
	return nil, fmt.Errorf("loading the CUDA runtime: supported on linux only: %w", ErrNoRuntime)
}

// OpenRuntimeFrom fails: callbox loads the CUDA runtime on Linux only.
func OpenRuntimeFrom(...string) (*Runtime, error) { return OpenRuntime() }

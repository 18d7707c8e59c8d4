//go:build !cgo

package bench

// newRawLoopsWasmtimePlain: no wasmtime without cgo.
func newRawLoopsWasmtimePlain([]byte) (rawLoopInstance, error) { return nil, nil }

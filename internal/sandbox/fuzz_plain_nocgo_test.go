//go:build !cgo

package sandbox_test

// plainWasmtimeRefuses: there is no wasmtime without cgo.
func plainWasmtimeRefuses([]byte) bool { return false }

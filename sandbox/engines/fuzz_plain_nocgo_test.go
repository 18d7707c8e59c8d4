//go:build !cgo

package engines_test

// plainWasmtimeRefuses: there is no wasmtime without cgo.
func plainWasmtimeRefuses([]byte) bool { return false }

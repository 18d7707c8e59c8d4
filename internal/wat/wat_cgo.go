//go:build cgo

package wat

import wt "github.com/bytecodealliance/wasmtime-go/v39"

// Compile converts WebAssembly text to a binary module.
func Compile(src string) ([]byte, error) { return wt.Wat2Wasm(src) }

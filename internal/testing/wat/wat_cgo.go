//go:build cgo

package wat

import wt "github.com/bytecodealliance/wasmtime-go/v39"

// Compile converts WebAssembly text to a binary module.
func Compile(src string) ([]byte, error) { return wt.Wat2Wasm(src) }

// CompileUnchecked converts WebAssembly text to a binary module without
// validating it (numeric indices are written as given), for tests that
// need invalid modules. wasmtime's text parser never validates.
func CompileUnchecked(src string) ([]byte, error) { return wt.Wat2Wasm(src) }

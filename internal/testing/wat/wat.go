// Package wat turns WebAssembly text into binary for tests and tools: with
// cgo through wasmtime's parser, without it through wabt's wat2wasm.
package wat

// Must compiles src and panics on error, for test fixtures.
func Must(src string) []byte {
	b, err := Compile(src)
	if err != nil {
		panic(err)
	}
	return b
}

// MustUnchecked is CompileUnchecked, panicking on error, for fixtures of
// invalid modules.
func MustUnchecked(src string) []byte {
	b, err := CompileUnchecked(src)
	if err != nil {
		panic(err)
	}
	return b
}

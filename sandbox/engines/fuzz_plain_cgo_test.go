//go:build cgo

package engines_test

import (
	wt "github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/seed4b3e0ccb/callbox/sandbox/internal/validate"
)

// plainWasmtimeRefuses reports whether wasmtime, as it is (callbox's
// features), refuses wasm.
func plainWasmtimeRefuses(wasm []byte) bool {
	cfg := wt.NewConfig()
	validate.ConfigureWasmtime(cfg)
	eng := wt.NewEngineWithConfig(cfg)
	defer eng.Close()
	return wt.ModuleValidate(eng, wasm) != nil
}

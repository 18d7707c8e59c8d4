//go:build cgo

package validate

import (
	"errors"
	"strings"

	wt "github.com/bytecodealliance/wasmtime-go/v39"
)

// ConfigureWasmtime sets cfg's WebAssembly features to callbox's set
// (WazeroFeatures): wasmtime's defaults add threads, relaxed SIMD,
// multiple memories and 64-bit memories, which are turned off, and the
// proposals it leaves off by default (GC, function references, wide
// arithmetic; exceptions, custom page sizes and stack switching, which
// wasmtime-go cannot set) stay off. The spec-suite test checks that both
// engines accept and refuse the same proposals.
func ConfigureWasmtime(cfg *wt.Config) {
	cfg.SetWasmBulkMemory(true)
	cfg.SetWasmMultiValue(true)
	cfg.SetWasmReferenceTypes(true)
	cfg.SetWasmSIMD(true)
	cfg.SetWasmTailCall(true)
	cfg.SetWasmThreads(false)
	cfg.SetWasmRelaxedSIMD(false)
	cfg.SetWasmMultiMemory(false)
	cfg.SetWasmMemory64(false)
	cfg.SetWasmFunctionReferences(false)
	cfg.SetWasmGC(false)
	cfg.SetWasmWideArithmetic(false)
}

// wasmtimeChecker is wasmtime's validator on an engine of callbox's
// features; it compiles nothing.
type wasmtimeChecker struct{ eng *wt.Engine }

func (c *wasmtimeChecker) close() { c.eng.Close() }

func (v *Validator) wasmtime(wasm []byte) error {
	v.mu.Lock()
	if v.wt == nil {
		cfg := wt.NewConfig()
		ConfigureWasmtime(cfg)
		v.wt = &wasmtimeChecker{eng: wt.NewEngineWithConfig(cfg)}
	}
	eng := v.wt.eng
	v.mu.Unlock()
	if err := wt.ModuleValidate(eng, wasm); err != nil {
		return errors.New(Reason(err))
	}
	return nil
}

// Reason is a wasmtime error's own text, without the backtrace of the
// Rust side that wasmtime appends after a blank line.
func Reason(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n\nStack backtrace:")
	return strings.TrimSpace(s)
}

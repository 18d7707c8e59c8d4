// Package validate checks a module as its author built it, before anything
// rewrites it, and owns the one set of WebAssembly features callbox
// enables on every engine.
//
// The host rewrites every module it runs: wasmbin.LimitTables bounds its
// tables and the meter adds a budget, a stack counter, imports, types and
// a wrapping block to every function. A rewrite of an invalid module can
// be valid: a global.set one past the module's last global names the
// meter's budget once the meter has added it, a br one label past a
// function's outermost block lands in the meter's wrapper. So no rewrite
// ever sees a module that these validators have not accepted as it came.
//
// A module is valid for callbox when callbox's bounded reader
// (wasmbin.Parse, which keeps decoder bombs from the engines) reads it and
// every engine validator this build has accepts it, under callbox's
// features (WazeroFeatures): wazero's (pure Go, always present) and, with
// cgo, wasmtime's (wasmparser); and when its type section holds no GC
// type form, which wazero does not check. Requiring both makes a module that
// loads on one engine load on the other, and means neither engine's
// validator alone is trusted with the meter's input.
package validate

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/wasmbin"
)

// WazeroFeatures is callbox's feature set in wazero's terms: WebAssembly
// 2.0 (multi-value, bulk memory, reference types, SIMD, sign extension,
// non-trapping float-to-int, mutable globals), tail calls and extended
// constant expressions. Everything else (threads, relaxed SIMD, multiple
// or 64-bit memories, GC, exceptions, ...) is off on every engine;
// ConfigureWasmtime sets wasmtime to the same set.
const WazeroFeatures = api.CoreFeaturesV2 | experimental.CoreFeaturesTailCall | experimental.CoreFeaturesExtendedConst

// Reader names callbox's own bounded reader (wasmbin) in an
// InvalidModuleError.
const Reader = "callbox's reader"

// rememberMax bounds how many validated modules a Validator remembers.
const rememberMax = 4096

// Validator validates modules and remembers, by sha256, the ones it
// accepted, so that a module checked at load is not checked again when it
// is compiled. Safe for concurrent use.
type Validator struct {
	mu    sync.Mutex
	wz    wazero.Runtime   // an interpreter runtime, made on first use
	wt    *wasmtimeChecker // made on first use; unused without cgo
	valid map[[32]byte]struct{}
}

// New returns a Validator; its engines' validators start on first use.
func New() *Validator { return &Validator{valid: map[[32]byte]struct{}{}} }

// Validate checks wasm, whose sha256 is sum, with every validator this
// build has. A refusal is an *core.InvalidModuleError naming the
// validator and its reason.
func (v *Validator) Validate(ctx context.Context, wasm []byte, sum [32]byte) error {
	v.mu.Lock()
	_, ok := v.valid[sum]
	v.mu.Unlock()
	if ok {
		return nil
	}
	// callbox's own bounded reader first: wazero's decoder allocates
	// every vector at the length the module declares, so a few hundred
	// bytes could make it ask for gigabytes (a fatal error in Go, no
	// recover), and wasmbin.Parse refuses exactly those modules.
	m, err := wasmbin.Parse(wasm)
	if err != nil {
		return &sandbox.InvalidModuleError{Validator: Reader, Err: err}
	}
	if err := v.wazero(ctx, wasm); err != nil {
		return &sandbox.InvalidModuleError{Validator: "wazero's validator", Err: err}
	}
	if err := v.wasmtime(wasm); err != nil {
		return &sandbox.InvalidModuleError{Validator: "wasmtime's validator", Err: err}
	}
	// wazero reads the GC proposal's type forms whatever its features
	// say; wasmtime refuses them, but a build without cgo has no
	// wasmtime.
	if m.GCTypes {
		return &sandbox.InvalidModuleError{Validator: Reader, Err: errors.New("the type section uses the GC proposal's type forms (a recursion group, subtype, struct or array), which callbox does not enable")}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.valid) >= rememberMax {
		clear(v.valid)
	}
	v.valid[sum] = struct{}{}
	return nil
}

// wazero runs wazero's decoder and validator: an interpreter runtime's
// compile, which decodes, validates, and then lowers the functions to the
// interpreter's code (cheap next to a real compile; the result is
// dropped).
func (v *Validator) wazero(ctx context.Context, wasm []byte) (err error) {
	v.mu.Lock()
	if v.wz == nil {
		v.wz = wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().WithCoreFeatures(WazeroFeatures))
	}
	rt := v.wz
	v.mu.Unlock()
	defer func() {
		// wazero's decoder has panicked on inputs it did not expect; a
		// panic is a refusal, never the host's end.
		if r := recover(); r != nil {
			err = fmt.Errorf("the validator panicked: %v", r)
		}
	}()
	cm, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		return err
	}
	return cm.Close(ctx)
}

// Close releases the validators.
func (v *Validator) Close(ctx context.Context) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	var errs []error
	if v.wz != nil {
		errs = append(errs, v.wz.Close(ctx))
		v.wz = nil
	}
	if v.wt != nil {
		v.wt.close()
		v.wt = nil
	}
	clear(v.valid)
	return errors.Join(errs...)
}

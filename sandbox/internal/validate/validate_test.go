package validate_test

import (
	"context"
	"crypto/sha256"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/internal/testing/hostile"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/meter"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/validate"
	wz "github.com/seed4b3e0ccb/callbox/sandbox/internal/wazero"
)

func check(t *testing.T, v *validate.Validator, wasm []byte) error {
	t.Helper()
	return v.Validate(context.Background(), wasm, sha256.Sum256(wasm))
}

// wazeroAccepts is wazero's own compile of wasm, under callbox's
// features: what an engine would run if nothing validated the module
// before the rewrite.
func wazeroAccepts(t *testing.T, wasm []byte) error {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().WithCoreFeatures(validate.WazeroFeatures))
	defer rt.Close(ctx)
	_, err := rt.CompileModule(ctx, wasm)
	return err
}

// Every module that names an item one past its own is refused, while the
// meter's rewrite of it, which would have named what the host added, is
// one wazero accepts: the refusal is what stands between the two.
func TestPastEndModulesAreRefused(t *testing.T) {
	v := validate.New()
	defer v.Close(context.Background())
	for _, c := range hostile.PastEndCases() {
		t.Run(c.Name, func(t *testing.T) {
			err := check(t, v, c.Wasm)
			if c.Kind == abi.ABIViolation {
				// Valid wasm: the load check refuses its import.
				require.NoError(t, err)
				return
			}
			var inv *sandbox.InvalidModuleError
			require.ErrorAs(t, err, &inv)
			assert.Contains(t, err.Error(), c.Msg)
			require.True(t, c.MeterMakesValid)
			rewritten, err := meter.Instrument(c.Wasm, wz.MeterOptions(wz.DefaultMaxStack, false))
			require.NoError(t, err, "the meter rewrites what it is given")
			assert.NoError(t, wazeroAccepts(t, rewritten), "the rewrite of the invalid module is valid: it names what the meter added")
			assert.Error(t, wazeroAccepts(t, c.Wasm), "wazero refuses the module as it is")
		})
	}
}

// A module validation accepted is remembered by sha256: checked at load,
// it is not checked again when compiled. A refusal is not remembered.
func TestValidatorRemembersAccepted(t *testing.T) {
	v := validate.New()
	defer v.Close(context.Background())
	good := wat.Must(`(module (func (export "f")))`)
	require.NoError(t, check(t, v, good))
	// The same sum with other bytes passes: the sum is the caller's
	// word for the bytes it validated.
	require.NoError(t, v.Validate(context.Background(), []byte("not wasm"), sha256.Sum256(good)))
	bad := []byte("not wasm")
	require.Error(t, check(t, v, bad))
	require.Error(t, check(t, v, bad))
}

// The validators refuse what callbox's features leave out, whichever
// engines the build has: a GC type form (which wazero alone reads
// whatever its features say), a constant expression reading a defined or
// a mutable global (which wazero alone does not check), threads' shared
// memory, a second memory.
func TestFeaturesOutsideCallboxAreRefused(t *testing.T) {
	v := validate.New()
	defer v.Close(context.Background())
	for name, wasm := range map[string][]byte{
		// (module (rec (type (func)))) and (module (type (struct (field
		// i32)))), written out: wabt's text parser knows neither.
		"rec group": []byte("\x00asm\x01\x00\x00\x00\x01\x06\x01\x4e\x01\x60\x00\x00"),
		"struct":    []byte("\x00asm\x01\x00\x00\x00\x01\x05\x01\x5f\x01\x7f\x00"),
	} {
		t.Run(name, func(t *testing.T) {
			var inv *sandbox.InvalidModuleError
			assert.ErrorAs(t, check(t, v, wasm), &inv, "%s is not one of callbox's features", name)
		})
	}
	for name, src := range map[string]string{
		"defined global read": `(module (global i32 (i32.const 1)) (global i32 (global.get 0)))`,
		"mutable import read": `(module (import "m" "g" (global (mut i32))) (memory 1) (data (global.get 0) "x"))`,
		"shared memory":       `(module (memory 1 1 shared))`,
		"two memories":        `(module (memory 1) (memory 1))`,
		"64-bit memory":       `(module (memory i64 1))`,
		"relaxed simd":        `(module (func (param v128) (result v128) (i32x4.relaxed_trunc_f32x4_s (local.get 0))))`,
		"exceptions":          `(module (tag $e) (func (throw $e)))`,
		"function references": `(module (type $t (func)) (func (param (ref $t))))`,
	} {
		t.Run(name, func(t *testing.T) {
			wasm, err := wat.CompileUnchecked(src)
			require.NoError(t, err)
			err = check(t, v, wasm)
			var inv *sandbox.InvalidModuleError
			assert.ErrorAs(t, err, &inv, "%s is not one of callbox's features", name)
		})
	}
	// And what is one of them loads.
	for name, src := range map[string]string{
		"imported constant read": `(module (import "m" "g" (global i32)) (memory 1) (data (global.get 0) "x"))`,
		"extended const":         `(module (global i32 (i32.add (i32.const 1) (i32.const 2))))`,
		"tail call":              `(module (func $f (return_call $f)))`,
		"simd":                   `(module (func (param v128) (result v128) (i32x4.add (local.get 0) (local.get 0))))`,
		"multi-value":            `(module (func (result i32 i64) (i32.const 1) (i64.const 2)))`,
		"bulk memory":            `(module (memory 1) (func (memory.fill (i32.const 0) (i32.const 0) (i32.const 1))))`,
	} {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, check(t, v, wat.Must(src)))
		})
	}
}

// A decoder bomb is refused by callbox's own reader before wazero's
// decoder, which would allocate what it declares, sees it.
func TestReaderRefusesBombsFirst(t *testing.T) {
	v := validate.New()
	defer v.Close(context.Background())
	// A function declaring 2^32-16 locals in a module of a few dozen bytes.
	bomb := []byte("\x00asm\x01\x00\x00\x00\x01\x04\x01\x60\x00\x00\x03\x02\x01\x00\x0a\x09\x01\x07\x01\xf0\xff\xff\xff\x0f\x7f\x0b")
	err := check(t, v, bomb)
	var inv *sandbox.InvalidModuleError
	require.ErrorAs(t, err, &inv)
	assert.Equal(t, validate.Reader, inv.Validator)
	assert.Contains(t, err.Error(), "locals")
}

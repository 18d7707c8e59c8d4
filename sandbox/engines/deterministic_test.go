package engines_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
	"github.com/seed4b3e0ccb/callbox/internal/testing/workerbin"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

// nanKernels produce NaNs whose bits the spec leaves to the engine: each
// takes its operands as parameters (no constant folding) and returns the
// result's bits. copysign moves bits without arithmetic: exact on every
// engine, and left alone by canonicalization.
const nanKernels = `(module
  (memory 1)
  (func (export "f32_div") (param f32 f32) (result i32) (i32.reinterpret_f32 (f32.div (local.get 0) (local.get 1))))
  (func (export "f32_min") (param f32 f32) (result i32) (i32.reinterpret_f32 (f32.min (local.get 0) (local.get 1))))
  (func (export "f32_max") (param f32 f32) (result i32) (i32.reinterpret_f32 (f32.max (local.get 0) (local.get 1))))
  (func (export "f32_add") (param f32 f32) (result i32) (i32.reinterpret_f32 (f32.add (local.get 0) (local.get 1))))
  (func (export "f32_sqrt") (param f32 f32) (result i32) (i32.reinterpret_f32 (f32.sqrt (local.get 0))))
  (func (export "f32_demote") (param f64 f64) (result i32) (i32.reinterpret_f32 (f32.demote_f64 (local.get 0))))
  (func (export "f32_copysign") (param f32 f32) (result i32) (i32.reinterpret_f32 (f32.copysign (local.get 0) (local.get 1))))
  (func (export "f64_div") (param f64 f64) (result i64) (i64.reinterpret_f64 (f64.div (local.get 0) (local.get 1))))
  (func (export "f64_min") (param f64 f64) (result i64) (i64.reinterpret_f64 (f64.min (local.get 0) (local.get 1))))
  (func (export "f64_mul") (param f64 f64) (result i64) (i64.reinterpret_f64 (f64.mul (local.get 0) (local.get 1))))
  (func (export "f64_promote") (param f32 f32) (result i64) (i64.reinterpret_f64 (f64.promote_f32 (local.get 0))))
  (func (export "f32x4_add") (param f32 f32) (result i32)
    (i32.reinterpret_f32 (f32x4.extract_lane 3 (f32x4.add (f32x4.splat (local.get 0)) (f32x4.splat (local.get 1))))))
  (func (export "f32x4_min") (param f32 f32) (result i32)
    (i32.reinterpret_f32 (f32x4.extract_lane 1 (f32x4.min (f32x4.splat (local.get 0)) (f32x4.splat (local.get 1))))))
  (func (export "f64x2_div") (param f64 f64) (result i64)
    (i64.reinterpret_f64 (f64x2.extract_lane 1 (f64x2.div (f64x2.splat (local.get 0)) (f64x2.splat (local.get 1)))))))`

type nanCase struct {
	export string
	f64    bool   // the operands are f64, the result f64 bits
	a, b   uint64 // operand bits
	exact  uint64 // for an exact operation: the bits every engine must give
}

// NaN operands with payloads and signs, so that an engine passing one
// through shows it.
const (
	nan32a = 0x7fa00001 // signalling, payload 0x200001
	nan32b = 0xffc00002 // negative quiet, payload 2
	nan64a = 0x7ff4000000000001
	nan64b = 0xfff8000000000002
)

var nanCases = []nanCase{
	{export: "f32_div", a: uint64(math.Float32bits(0)), b: uint64(math.Float32bits(0))},
	{export: "f32_min", a: nan32a, b: nan32b},
	{export: "f32_max", a: nan32b, b: nan32a},
	{export: "f32_add", a: nan32b, b: uint64(math.Float32bits(1))},
	{export: "f32_sqrt", a: uint64(math.Float32bits(-1))},
	{export: "f32_demote", f64: true, a: nan64b},
	{export: "f32_copysign", a: nan32a, b: uint64(math.Float32bits(-1)), exact: nan32a | 0x80000000},
	{export: "f64_div", f64: true, a: math.Float64bits(0), b: math.Float64bits(0)},
	{export: "f64_min", f64: true, a: nan64a, b: nan64b},
	{export: "f64_mul", f64: true, a: nan64b, b: math.Float64bits(2)},
	{export: "f64_promote", a: nan32b},
	{export: "f32x4_add", a: nan32b, b: uint64(math.Float32bits(1))},
	{export: "f32x4_min", a: nan32a, b: nan32b},
	{export: "f64x2_div", f64: true, a: math.Float64bits(0), b: math.Float64bits(0)},
}

// runNaNs runs every case on a module compiled by e and returns each
// result's bits.
func runNaNs(t *testing.T, e sandbox.Engine, deterministic bool) map[string]uint64 {
	ctx := context.Background()
	m, err := sandbox.Compile(ctx, e, wat.Must(nanKernels), sandbox.ModuleConfig{Name: "nans", Limits: config.Limits{Timeout: 10 * time.Second}, Deterministic: deterministic})
	require.NoError(t, err)
	defer m.Close(ctx)
	inst, err := m.Instantiate(ctx, time.Time{})
	require.NoError(t, err)
	defer inst.Close(ctx)
	out := map[string]uint64{}
	for _, c := range nanCases {
		in, res := sandbox.F32, sandbox.I32
		if c.f64 {
			in = sandbox.F64
		}
		if c.export == "f64_promote" {
			res = sandbox.I64
		} else if c.f64 && c.export != "f32_demote" {
			res = sandbox.I64
		}
		fn, err := inst.Export(c.export, []sandbox.ValType{in, in}, []sandbox.ValType{res})
		require.NoError(t, err, c.export)
		stack := []uint64{c.a, c.b}
		require.NoError(t, inst.Call(ctx, fn, stack), c.export)
		if res == sandbox.I32 {
			stack[0] &= math.MaxUint32
		}
		out[c.export] = stack[0]
	}
	return out
}

// TestDeterministicNaNs: under deterministic: true every NaN an
// arithmetic operation returns is the canonical NaN, scalar and SIMD,
// f32 and f64, on both engines and under isolation: process, and an
// exact operation (copysign) keeps its operand's payload. Without it, the
// cases where the engines (or this CPU) give other bits are named.
func TestDeterministicNaNs(t *testing.T) {
	ctx := context.Background()
	type run struct {
		name string
		e    sandbox.Engine
	}
	var runs []run
	for _, name := range engines.Engines() {
		e, err := engines.New(ctx, name, engines.Options{})
		require.NoError(t, err)
		defer e.Close(ctx)
		runs = append(runs, run{name, e})
	}
	if engines.ProcessIsolationAvailable() {
		worker, err := workerbin.Path(false)
		require.NoError(t, err)
		for _, name := range engines.Engines() {
			e, err := engines.NewProcess(ctx, name, worker, "")
			require.NoError(t, err)
			defer e.Close(ctx)
			runs = append(runs, run{name + "/process", e})
		}
	}
	plain := map[string]map[string]uint64{}
	for _, r := range runs {
		got := runNaNs(t, r.e, true)
		for _, c := range nanCases {
			want := uint64(0x7fc00000)
			if c.exact != 0 {
				want = c.exact
			} else if c.export == "f64_promote" || c.f64 && c.export != "f32_demote" {
				want = 0x7ff8000000000000
			}
			assert.Equal(t, fmt.Sprintf("%#x", want), fmt.Sprintf("%#x", got[c.export]), "%s on %s, deterministic", c.export, r.name)
		}
		plain[r.name] = runNaNs(t, r.e, false)
	}
	for _, c := range nanCases {
		bits := map[uint64][]string{}
		for _, r := range runs {
			bits[plain[r.name][c.export]] = append(bits[plain[r.name][c.export]], r.name)
		}
		if len(bits) > 1 {
			t.Logf("without deterministic: %s differs: %v", c.export, bits)
		}
	}
}

// TestDeterministicRefusesClocksAndRandom: a deterministic callback may
// not import WASI's clocks, random or sleep, even with wasi: minimal; the
// load check names each import.
func TestDeterministicRefusesClocksAndRandom(t *testing.T) {
	wasm := wat.Must(`(module
	  (import "wasi_snapshot_preview1" "clock_time_get" (func (param i32 i64 i32) (result i32)))
	  (import "wasi_snapshot_preview1" "random_get" (func (param i32 i32) (result i32)))
	  (memory (export "memory") 1)
	  (func (export "callbox_abi_version") (result i32) i32.const 1)
	  (func (export "callbox_alloc") (param i32 i32) (result i32) i32.const 1024)
	  (func (export "run") (param i32) (result i32) i32.const 0))`)
	cb := config.DefaultCallback()
	cb.Name, cb.Export, cb.WASI, cb.Signature = "run", "run", config.WASIMinimal, "() -> ()"
	_, err := sandbox.CheckModule(wasm, cb)
	require.NoError(t, err, "granted without deterministic")
	cb.Deterministic = true
	_, err = sandbox.CheckModule(wasm, cb)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "imports wasi_snapshot_preview1.clock_time_get, which deterministic: true does not grant")
	assert.Contains(t, err.Error(), "imports wasi_snapshot_preview1.random_get, which deterministic: true does not grant")
}

// FuzzDeterministicNaNs: for any operand bits, every kernel gives the
// same result bits on wazero and wasmtime under deterministic: true, and
// a NaN result is the canonical NaN.
func FuzzDeterministicNaNs(f *testing.F) {
	if len(engines.Engines()) < 2 {
		f.Skip("needs both engines (cgo)")
	}
	for _, c := range nanCases {
		f.Add(c.a, c.b)
	}
	ctx := context.Background()
	var insts []sandbox.Instance
	for _, name := range engines.Engines() {
		e, err := engines.New(ctx, name, engines.Options{})
		require.NoError(f, err)
		f.Cleanup(func() { _ = e.Close(ctx) })
		m, err := sandbox.Compile(ctx, e, wat.Must(nanKernels), sandbox.ModuleConfig{Name: "nans", Limits: config.Limits{Timeout: 10 * time.Second}, Deterministic: true})
		require.NoError(f, err)
		inst, err := m.Instantiate(ctx, time.Time{})
		require.NoError(f, err)
		insts = append(insts, inst)
	}
	f.Fuzz(func(t *testing.T, a, b uint64) {
		for _, c := range nanCases {
			if c.exact != 0 {
				continue
			}
			in, res := sandbox.F32, sandbox.I32
			if c.f64 {
				in = sandbox.F64
			}
			if c.export == "f64_promote" || c.f64 && c.export != "f32_demote" {
				res = sandbox.I64
			}
			var got []uint64
			for _, inst := range insts {
				fn, err := inst.Export(c.export, []sandbox.ValType{in, in}, []sandbox.ValType{res})
				require.NoError(t, err)
				stack := []uint64{a, b}
				if !c.f64 {
					stack = []uint64{a & math.MaxUint32, b & math.MaxUint32}
				}
				require.NoError(t, inst.Call(ctx, fn, stack), c.export)
				if res == sandbox.I32 {
					stack[0] &= math.MaxUint32
				}
				got = append(got, stack[0])
			}
			require.Equal(t, got[0], got[1], "%s(%#x, %#x): wazero %#x, wasmtime %#x", c.export, a, b, got[0], got[1])
			if res == sandbox.I32 && math.IsNaN(float64(math.Float32frombits(uint32(got[0])))) {
				require.Equal(t, uint64(0x7fc00000), got[0], "%s(%#x, %#x)", c.export, a, b)
			}
			if res == sandbox.I64 && math.IsNaN(math.Float64frombits(got[0])) {
				require.Equal(t, uint64(0x7ff8000000000000), got[0], "%s(%#x, %#x)", c.export, a, b)
			}
		}
	})
}

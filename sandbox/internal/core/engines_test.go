package core_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/core"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/wasmtime"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/wazero"
)

const trapsWAT = `
(module
  (import "callbox" "error" (func $err (param i32 i32)))
  (import "callbox" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 1)
  (type $void (func (result i32)))
  (type $other (func (param i32) (result i32)))
  (table 4 funcref)
  (elem (i32.const 1) $ok)
  (data (i32.const 16) "hello from the guest")
  (func $ok (export "ok") (param i32) (result i32) (i32.add (local.get 0) (i32.const 1)))
  (func (export "spin") (param i32) (result i32) (loop $l (br $l)) (i32.const 0))
  (func $recurse (export "recurse") (param i32) (result i32)
    (i32.add (call $recurse (i32.add (local.get 0) (i32.const 1))) (i32.const 1)))
  (func (export "div0") (param i32) (result i32) (i32.div_s (i32.const 1) (local.get 0)))
  (func (export "overflow") (param i32) (result i32) (i32.div_s (i32.const 0x80000000) (i32.const -1)))
  (func (export "unreachable") (param i32) (result i32) unreachable)
  (func (export "oob") (param i32) (result i32) (i32.load (i32.const 0xfffffff0)))
  (func (export "conv") (param i32) (result i32) (i32.trunc_f32_s (f32.const nan)))
  (func (export "table_oob") (param i32) (result i32) (call_indirect (type $void) (i32.const 9)))
  (func (export "null_entry") (param i32) (result i32) (call_indirect (type $void) (i32.const 0)))
  (func (export "sig_mismatch") (param i32) (result i32) (call_indirect (type $void) (i32.const 1)))
  (func (export "grow_forever") (param i32) (result i32)
    (loop $l (br_if $l (i32.ne (memory.grow (i32.const 1)) (i32.const -1))))
    unreachable)
  (func (export "bad_error_ptr") (param i32) (result i32)
    (call $err (i32.const 0xfffffff0) (i32.const 100)) (i32.const 2))
  (func (export "huge_log") (param i32) (result i32)
    (call $log (i32.const 1) (i32.const 0) (i32.const 65536)) (i32.const 0))
  (func (export "say") (param i32) (result i32)
    (call $log (i32.const 1) (i32.const 16) (i32.const 20))
    (call $err (i32.const 16) (i32.const 20)) (i32.const 3))
)`

type engineCase struct {
	name string
	new  func(t *testing.T) sandbox.Engine
}

// newB makes the engine for a benchmark.
func (ec engineCase) newB(b *testing.B) sandbox.Engine {
	var e sandbox.Engine
	var err error
	if ec.name == "wazero" {
		e, err = wazero.New(context.Background(), wazero.Options{})
	} else {
		e, err = wasmtime.New(context.Background(), wasmtime.Options{})
	}
	require.NoError(b, err)
	b.Cleanup(func() { _ = e.Close(context.Background()) })
	return e
}

func engines(_ *testing.T) []engineCase {
	out := []engineCase{{"wazero", func(t *testing.T) sandbox.Engine {
		e, err := wazero.New(context.Background(), wazero.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = e.Close(context.Background()) })
		return e
	}}}
	if wasmtime.Available {
		out = append(out, engineCase{"wasmtime", func(t *testing.T) sandbox.Engine {
			e, err := wasmtime.New(context.Background(), wasmtime.Options{})
			require.NoError(t, err)
			t.Cleanup(func() { _ = e.Close(context.Background()) })
			return e
		}})
	}
	return out
}

// limits are the test defaults. The timeout leaves room for wazero, whose
// call stack is large: unbounded recursion takes a few hundred milliseconds
// to overflow it.
func limits() config.Limits {
	return config.Limits{Timeout: 3 * time.Second, MaxMemory: 4 << 20, MaxError: 64, MaxLog: 1024}
}

func instantiate(t *testing.T, e sandbox.Engine, src string, lim config.Limits, logger *slog.Logger) sandbox.Instance {
	t.Helper()
	ctx := context.Background()
	m, err := sandbox.Compile(ctx, e, wat.Must(src), sandbox.ModuleConfig{Name: "t", Limits: lim, Logger: logger})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close(ctx) })
	inst, err := m.Instantiate(ctx, sandbox.Deadline(time.Now(), lim.Timeout))
	require.NoError(t, err)
	t.Cleanup(func() { _ = inst.Close(ctx) })
	return inst
}

var i32toi32 = [][]sandbox.ValType{{sandbox.I32}, {sandbox.I32}}

func call(t *testing.T, inst sandbox.Instance, name string, arg uint64) (uint64, error) {
	t.Helper()
	fn, err := inst.Export(name, i32toi32[0], i32toi32[1])
	require.NoError(t, err)
	stack := []uint64{arg}
	// Each call is one host call with a deadline of its own.
	inst.SetDeadline(sandbox.Deadline(time.Now(), inst.(core.Stateful).GuestState().Limits().Timeout))
	err = inst.Call(context.Background(), fn, stack)
	return stack[0], err
}

func TestTrapTaxonomy(t *testing.T) {
	cases := []struct {
		export string
		kind   abi.Kind
	}{
		{"spin", abi.Timeout},
		{"recurse", abi.StackOverflow},
		{"div0", abi.DivideByZero},
		{"overflow", abi.IntegerOverflow},
		{"unreachable", abi.Unreachable},
		{"oob", abi.MemoryOutOfBounds},
		{"conv", abi.InvalidConversion},
		{"table_oob", abi.TableOutOfBounds},
		{"null_entry", abi.TableOutOfBounds},
		{"sig_mismatch", abi.IndirectCallMismatch},
		{"grow_forever", abi.MemoryLimit},
		{"bad_error_ptr", abi.ABIViolation},
	}
	// One message per kind, whatever the engine (issue: fuel and
	// unreachable read differently on wasmtime).
	messages := map[string]map[string]string{}
	defer func() {
		for export, byEngine := range messages {
			if len(byEngine) == 2 {
				assert.Equal(t, byEngine["wazero"], byEngine["wasmtime"], "%s: the engines word the same trap differently", export)
			}
		}
	}()
	for _, ec := range engines(t) {
		e := ec.new(t)
		for _, tc := range cases {
			t.Run(ec.name+"/"+tc.export, func(t *testing.T) {
				lim := limits()
				if tc.kind == abi.Timeout {
					lim.Timeout = 200 * time.Millisecond
				}
				inst := instantiate(t, e, trapsWAT, lim, nil)
				start := time.Now()
				_, err := call(t, inst, tc.export, 0)
				require.Error(t, err)
				var trap *sandbox.Trap
				require.True(t, errors.As(err, &trap), "%T %v", err, err)
				if messages[tc.export] == nil {
					messages[tc.export] = map[string]string{}
				}
				messages[tc.export][ec.name] = trap.Message
				assert.Equal(t, tc.kind, trap.Class, "message: %s", trap.Message)
				assert.ErrorIs(t, err, tc.kind)
				assert.Less(t, time.Since(start), 10*time.Second, "a trap must end the call promptly")
			})
		}
	}
}

func TestTimeoutThenServe(t *testing.T) {
	for _, ec := range engines(t) {
		t.Run(ec.name, func(t *testing.T) {
			e := ec.new(t)
			lim := limits()
			lim.Timeout = 50 * time.Millisecond
			inst := instantiate(t, e, trapsWAT, lim, nil)
			start := time.Now()
			_, err := call(t, inst, "spin", 0)
			elapsed := time.Since(start)
			require.ErrorIs(t, err, abi.Timeout)
			assert.Contains(t, err.Error(), "timeout after 50ms")
			// Stopped by its own 50 ms timeout: not before it, and well before
			// anything else would stop it (a generous bound for a loaded CI
			// machine; the timeout's accuracy is measured by make bench).
			assert.Less(t, elapsed, 10*time.Second)
			assert.GreaterOrEqual(t, elapsed, 50*time.Millisecond)

			fresh := instantiate(t, e, trapsWAT, lim, nil)
			v, err := call(t, fresh, "ok", 41)
			require.NoError(t, err)
			assert.Equal(t, uint64(42), v)
		})
	}
}

func TestCancelStopsGuest(t *testing.T) {
	for _, ec := range engines(t) {
		t.Run(ec.name, func(t *testing.T) {
			e := ec.new(t)
			lim := limits()
			lim.Timeout = 10 * time.Second
			inst := instantiate(t, e, trapsWAT, lim, nil)
			fn, err := inst.Export("spin", i32toi32[0], i32toi32[1])
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(30*time.Millisecond, cancel)
			start := time.Now()
			err = inst.Call(ctx, fn, []uint64{0})
			require.ErrorIs(t, err, abi.Canceled)
			assert.ErrorIs(t, err, context.Canceled)
			assert.Less(t, time.Since(start), time.Second)
		})
	}
}

func TestImportsCapAndLog(t *testing.T) {
	for _, ec := range engines(t) {
		t.Run(ec.name, func(t *testing.T) {
			e := ec.new(t)
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			lim := limits()
			lim.MaxError = 10
			inst := instantiate(t, e, trapsWAT, lim, logger)
			v, err := call(t, inst, "say", 0)
			require.NoError(t, err)
			assert.Equal(t, uint64(3), v)
			assert.Equal(t, "hello from…[truncated 10 bytes]", inst.LastCall().GuestError)
			assert.Contains(t, logs.String(), "hello from the guest")

			_, err = call(t, inst, "huge_log", 0)
			require.NoError(t, err)
			assert.Equal(t, uint64(1024), inst.(core.Stateful).GuestState().LogBytes)
			assert.Equal(t, uint64(65536-1024), inst.(core.Stateful).GuestState().LogDropped)
		})
	}
}

func TestFuel(t *testing.T) {
	for _, ec := range engines(t) {
		t.Run(ec.name, func(t *testing.T) {
			e := ec.new(t)
			lim := limits()
			lim.Fuel = 10_000
			m, err := e.Compile(context.Background(), wat.Must(trapsWAT), sandbox.ModuleConfig{Limits: lim})
			if !e.Supports(sandbox.FeatureFuel) {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "fuel is not supported")
				return
			}
			require.NoError(t, err)
			inst, err := m.Instantiate(context.Background(), time.Time{})
			require.NoError(t, err)
			defer inst.Close(context.Background())
			_, err = call(t, inst, "spin", 0)
			require.ErrorIs(t, err, abi.FuelExhausted)
			assert.Equal(t, "fuel exhausted (budget 10000)", err.Error(), "the same words on every engine")
			used, ok := inst.FuelConsumed()
			assert.True(t, ok)
			assert.Equal(t, uint64(10_000), used)
		})
	}
}

// exitsWAT leaves functions every way wasm allows; called in a loop many
// times, a metered module must release every frame it charged.
const exitsWAT = `
(module
  (memory (export "memory") 1)
  (func $ret (param i32) (result i32) (if (local.get 0) (then (return (i32.const 1)))) (i32.const 2))
  (func $br (param i32) (result i32) (i32.const 3) (br_if 0 (local.get 0)) (drop) (i32.const 4))
  (func $table (param i32) (result i32)
    (block (result i32) (i32.const 5) (local.get 0) (br_table 0 1)))
  (func $multi (param i32) (result i32 i32) (local.get 0) (local.get 0))
  (func $tail (param i32) (result i32) (return_call $ret (local.get 0)))
  (func (export "exits") (param $n i32) (result i32)
    (local $acc i32)
    (loop $l
      (local.set $acc (i32.add (local.get $acc) (call $ret (i32.and (local.get $n) (i32.const 1)))))
      (local.set $acc (i32.add (local.get $acc) (call $br (i32.and (local.get $n) (i32.const 1)))))
      (local.set $acc (i32.add (local.get $acc) (call $table (i32.and (local.get $n) (i32.const 1)))))
      (local.set $acc (i32.add (local.get $acc) (i32.add (call $multi (local.get $n)))))
      (local.set $acc (i32.add (local.get $acc) (call $tail (local.get $n))))
      (br_if $l (local.tee $n (i32.sub (local.get $n) (i32.const 1)))))
    (local.get $acc))
  (func $deep (export "deep") (param i32) (result i32)
    (if (result i32) (i32.eqz (local.get 0))
      (then (i32.const 0))
      (else (i32.add (call $deep (i32.sub (local.get 0) (i32.const 1))) (i32.const 1)))))
)`

func TestStackAccountingBalances(t *testing.T) {
	for _, ec := range engines(t) {
		t.Run(ec.name, func(t *testing.T) {
			e := ec.new(t)
			lim := limits()
			lim.MaxStack = 64 << 10
			inst := instantiate(t, e, exitsWAT, lim, nil)
			// 200k iterations, each leaving five functions by a different
			// route: any unreleased frame would overflow 64 KiB quickly.
			_, err := call(t, inst, "exits", 200_000)
			require.NoError(t, err)
			v, err := call(t, inst, "deep", 100)
			require.NoError(t, err)
			assert.Equal(t, uint64(100), v)
			_, err = call(t, inst, "deep", 1_000_000)
			require.ErrorIs(t, err, abi.StackOverflow)
		})
	}
}

func TestFuelIsDeterministic(t *testing.T) {
	for _, ec := range engines(t) {
		t.Run(ec.name, func(t *testing.T) {
			e := ec.new(t)
			lim := limits()
			lim.Fuel = 1 << 40
			inst := instantiate(t, e, exitsWAT, lim, nil)
			var used []uint64
			for i := 0; i < 3; i++ {
				_, err := call(t, inst, "exits", 1000)
				require.NoError(t, err)
				u, ok := inst.FuelConsumed()
				require.True(t, ok)
				used = append(used, u)
			}
			assert.Greater(t, used[0], uint64(1000))
			assert.Equal(t, used[0], used[1])
			assert.Equal(t, used[1], used[2])
		})
	}
}

func TestCorruptCacheIsRecompiled(t *testing.T) {
	dir := t.TempDir()
	newEngine := map[string]func() (sandbox.Engine, error){
		"wazero": func() (sandbox.Engine, error) { return wazero.New(context.Background(), wazero.Options{CacheDir: dir}) },
	}
	if wasmtime.Available {
		newEngine["wasmtime"] = func() (sandbox.Engine, error) {
			return wasmtime.New(context.Background(), wasmtime.Options{CacheDir: dir})
		}
	}
	for name, mk := range newEngine {
		t.Run(name, func(t *testing.T) {
			run := func() uint64 {
				e, err := mk()
				require.NoError(t, err)
				defer e.Close(context.Background())
				inst := instantiate(t, e, trapsWAT, limits(), nil)
				v, err := call(t, inst, "ok", 41)
				require.NoError(t, err)
				return v
			}
			require.Equal(t, uint64(42), run())
			// Flip bytes in the middle of every cache entry, as bit rot or a
			// foreign writer would.
			n := 0
			// (Every entry in the directory: the engine's compiled code and,
			// for wazero, the metered rewrites.)
			require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				b, err := os.ReadFile(p)
				require.NoError(t, err)
				for i := len(b) / 2; i < len(b)/2+16 && i < len(b); i++ {
					b[i] ^= 0xff
				}
				n++
				return os.WriteFile(p, b, 0o600)
			}))
			require.Greater(t, n, 0, "the first run wrote cache entries")
			require.Equal(t, uint64(42), run(), "a corrupt entry is recompiled, never executed")
		})
	}
}

// A module whose initial memory is above the limit fails to instantiate;
// it never panics, even on wazero, whose memory allocator protocol has no
// way to refuse and panicked (the host's load check refuses such modules
// before compiling them: this is the engines' own line of defence).
func TestInstantiateMemoryAboveLimit(t *testing.T) {
	for _, ec := range engines(t) {
		t.Run(ec.name, func(t *testing.T) {
			e := ec.new(t)
			ctx := context.Background()
			lim := limits()
			lim.MaxMemory = 1 << 20
			m, err := sandbox.Compile(ctx, e, wat.Must(`(module (memory (export "memory") 1025))`), sandbox.ModuleConfig{Name: "t", Limits: lim})
			require.NoError(t, err)
			defer m.Close(ctx)
			inst, err := m.Instantiate(ctx, time.Time{})
			require.Error(t, err)
			assert.Nil(t, inst)
			assert.Contains(t, err.Error(), "instantiate: ")
			if ec.name == "wazero" {
				assert.Regexp(t, `panicked: .* \(at \S+ \S+\.go:\d+`, err.Error(), "a recovered panic names where it was raised")
			}
		})
	}
}

// The deadline belongs to the host call, not to one guest entry: the one
// given to Instantiate stays set for later Calls, SetDeadline replaces it,
// and zero means none.
func TestDeadlinePersistsAcrossCalls(t *testing.T) {
	for _, ec := range engines(t) {
		t.Run(ec.name, func(t *testing.T) {
			e := ec.new(t)
			ctx := context.Background()
			m, err := sandbox.Compile(ctx, e, wat.Must(trapsWAT), sandbox.ModuleConfig{Name: "t", Limits: limits()})
			require.NoError(t, err)
			defer m.Close(ctx)
			spin := func(ctx context.Context, inst sandbox.Instance) error {
				fn, err := inst.Export("spin", i32toi32[0], i32toi32[1])
				require.NoError(t, err)
				return inst.Call(ctx, fn, []uint64{0})
			}
			passed := time.Now().Add(-time.Millisecond)

			inst, err := m.Instantiate(ctx, passed)
			require.NoError(t, err, "no start function: nothing runs against the deadline yet")
			defer inst.Close(ctx)
			err = spin(ctx, inst)
			require.ErrorIs(t, err, abi.Timeout, "a call runs against the instantiation's deadline")
			assert.Equal(t, "timeout after 3s", err.Error())

			inst, err = m.Instantiate(ctx, time.Now().Add(time.Hour))
			require.NoError(t, err)
			defer inst.Close(ctx)
			inst.SetDeadline(passed)
			require.ErrorIs(t, spin(ctx, inst), abi.Timeout, "SetDeadline replaces it")

			inst, err = m.Instantiate(ctx, time.Time{})
			require.NoError(t, err)
			defer inst.Close(ctx)
			cctx, cancel := context.WithCancel(ctx)
			time.AfterFunc(30*time.Millisecond, cancel)
			require.ErrorIs(t, spin(cctx, inst), abi.Canceled, "a zero deadline is none: only the context ends the call")
		})
	}
}

// TestTrapAnswersErrorsIs: a trap of every kind answers errors.Is for it,
// and for no other kind.
func TestTrapAnswersErrorsIs(t *testing.T) {
	for _, k := range abi.Kinds() {
		var err error = &sandbox.Trap{Class: k, Message: "m"}
		for _, other := range abi.Kinds() {
			assert.Equal(t, k == other, errors.Is(err, other), "%v against %v", k, other)
		}
	}
}

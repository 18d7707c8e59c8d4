package core_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/core"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/meter"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/wazero"
)

// bulkWAT has one export per class of operation whose work grows with an
// operand. Each loops forever: it does one operation of the size below,
// then counts the iteration at address 0. With a fuel budget, the count
// when fuel runs out bounds the work done.
func bulkWAT() string {
	refs := strings.Repeat(" $f", 1000)
	return fmt.Sprintf(`(module
  (import "callbox" "log" (func $log (param i32 i32 i32)))
  (import "callbox" "error" (func $error (param i32 i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "random_get" (func $random_get (param i32 i32) (result i32)))
  (memory (export "memory") 3)
  (table $t 1000 funcref)
  (table $g 0 funcref)
  (func $f)
  (elem $e func%s)
  (data $d "%s")
  (func $count (i32.store (i32.const 0) (i32.add (i32.load (i32.const 0)) (i32.const 1))))
  (func (export "plain") (param i32) (result i32)
    (local $i i32) (local $x i32)
    (loop $l
      (local.set $x (i32.xor (i32.mul (local.get $x) (i32.const 31)) (local.get $i)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $l)) (i32.const 0))
  (func (export "fill") (param i32) (result i32)
    (loop $l (memory.fill (i32.const 64) (i32.const 7) (i32.const 65536)) (call $count) (br $l)) (i32.const 0))
  (func (export "copy") (param i32) (result i32)
    (loop $l (memory.copy (i32.const 64) (i32.const 65600) (i32.const 65536)) (call $count) (br $l)) (i32.const 0))
  (func (export "init") (param i32) (result i32)
    (loop $l (memory.init $d (i32.const 64) (i32.const 0) (i32.const 4096)) (call $count) (br $l)) (i32.const 0))
  (func (export "table_fill") (param i32) (result i32)
    (loop $l (table.fill $t (i32.const 0) (ref.func $f) (i32.const 1000)) (call $count) (br $l)) (i32.const 0))
  (func (export "table_copy") (param i32) (result i32)
    (loop $l (table.copy $t $t (i32.const 0) (i32.const 0) (i32.const 1000)) (call $count) (br $l)) (i32.const 0))
  (func (export "table_init") (param i32) (result i32)
    (loop $l (table.init $t $e (i32.const 0) (i32.const 0) (i32.const 1000)) (call $count) (br $l)) (i32.const 0))
  (func (export "table_grow") (param i32) (result i32)
    (loop $l (drop (table.grow $g (ref.null func) (i32.const 100))) (call $count) (br $l)) (i32.const 0))
  (func (export "memory_grow") (param i32) (result i32)
    (loop $l (drop (memory.grow (i32.const 1))) (call $count) (br $l)) (i32.const 0))
  (func (export "log") (param i32) (result i32)
    (loop $l (call $log (i32.const 1) (i32.const 64) (i32.const 16384)) (call $count) (br $l)) (i32.const 0))
  (func (export "error") (param i32) (result i32)
    (loop $l (call $error (i32.const 64) (i32.const 16384)) (call $count) (br $l)) (i32.const 0))
  (func (export "fd_write") (param i32) (result i32)
    (i32.store (i32.const 16) (i32.const 64))
    (i32.store (i32.const 20) (i32.const 16384))
    (loop $l (drop (call $fd_write (i32.const 1) (i32.const 16) (i32.const 1) (i32.const 24))) (call $count) (br $l)) (i32.const 0))
  (func (export "random_get") (param i32) (result i32)
    (loop $l (drop (call $random_get (i32.const 64) (i32.const 16384))) (call $count) (br $l)) (i32.const 0))
)`, refs, strings.Repeat("x", 4096))
}

// bulkFuel is the budget of every bulk case.
const bulkFuel = 200_000

// bulkCases: the charge of one iteration's operation, in fuel units.
var bulkCases = []struct {
	export string
	charge int64
}{
	{"fill", 65536 / meter.BytesPerFuel},
	{"copy", 65536 / meter.BytesPerFuel},
	{"init", 4096 / meter.BytesPerFuel},
	{"table_fill", 1000 * meter.ElementFuel},
	{"table_copy", 1000 * meter.ElementFuel},
	{"table_init", 1000 * meter.ElementFuel},
	{"table_grow", 100 * meter.ElementFuel},
	{"memory_grow", meter.PageFuel},
	{"log", 16384 * core.HostByteFuel},
	{"error", 16384 * core.HostByteFuel},
	{"fd_write", (16384 + 8) * core.HostByteFuel}, // the iovec too
	{"random_get", 16384 * core.HostByteFuel},
}

// Fuel bounds the work of operations that touch many bytes or elements in
// one instruction (or one import call), and counts them identically on
// both engines: the same budget stops each workload after the same number
// of iterations.
func TestFuelBoundsBulkWork(t *testing.T) {
	iterations := map[string]map[string]uint32{}
	for _, ec := range engines(t) {
		e := ec.new(t)
		for _, bc := range bulkCases {
			t.Run(ec.name+"/"+bc.export, func(t *testing.T) {
				lim := limits()
				lim.Fuel = bulkFuel
				// Caps above all the bytes written: the host reads every
				// byte of every call (past a cap it reads none, and
				// charges none).
				lim.MaxError, lim.MaxLog = 1<<20, 1<<40
				ctx := context.Background()
				m, err := e.Compile(ctx, wat.Must(bulkWAT()), sandbox.ModuleConfig{Name: "bulk", Limits: lim, WASI: true})
				require.NoError(t, err)
				defer m.Close(ctx)
				inst, err := m.Instantiate(ctx, sandbox.Deadline(time.Now(), lim.Timeout))
				require.NoError(t, err)
				defer inst.Close(ctx)
				_, err = call(t, inst, bc.export, 0)
				require.ErrorIs(t, err, abi.FuelExhausted)
				used, known := inst.FuelConsumed()
				assert.True(t, known)
				assert.Equal(t, uint64(bulkFuel), used)
				n := binary.LittleEndian.Uint32(inst.Memory())
				// Every iteration's operation was charged before the next
				// began: the work done is within the budget.
				assert.GreaterOrEqual(t, n, uint32(1), "at least one operation fits the budget")
				assert.LessOrEqual(t, int64(n)*bc.charge, int64(bulkFuel), "%d iterations of %d units each exceed the budget", n, bc.charge)
				if iterations[bc.export] == nil {
					iterations[bc.export] = map[string]uint32{}
				}
				iterations[bc.export][ec.name] = n
			})
		}
	}
	if len(iterations) > 0 && len(engines(t)) == 2 {
		for export, byEngine := range iterations {
			assert.Equal(t, byEngine["wazero"], byEngine["wasmtime"], "%s: the same budget must stop both engines after the same work", export)
		}
	}
}

// A refused grow does no work and is not charged.
func TestFuelRefusedGrowIsFree(t *testing.T) {
	for _, ec := range engines(t) {
		t.Run(ec.name, func(t *testing.T) {
			lim := limits()
			lim.Fuel = 1000
			inst := instantiate(t, ec.new(t), `(module (memory (export "memory") 1)
  (func (export "grow") (param i32) (result i32) (memory.grow (local.get 0))))`, lim, nil)
			v, err := call(t, inst, "grow", 1<<15) // 2 GiB: refused by max_memory
			require.NoError(t, err)
			assert.Equal(t, uint64(0xffffffff), v)
			used, _ := inst.FuelConsumed()
			assert.Less(t, used, uint64(100))
			_, err = call(t, inst, "grow", 1) // 8192 units: over the budget
			require.ErrorIs(t, err, abi.FuelExhausted)
		})
	}
}

// The ABI's service exports and the start function run under LoadFuel,
// not the callback's budget: a small budget does not stop a module whose
// initialization is long.
func TestServiceExportsDoNotSpendTheBudget(t *testing.T) {
	src := `(module (memory (export "memory") 1)
  (global $g (mut i32) (i32.const 0))
  (func $work (global.set $g (i32.const 0)) (loop $l (global.set $g (i32.add (global.get $g) (i32.const 1)))
    (br_if $l (i32.lt_u (global.get $g) (i32.const 100000)))))
  (start $work)
  (func (export "_initialize") (call $work))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (call $work) (i32.const 64))
  (func (export "cb") (param i32) (result i32) (call $work) (i32.const 0)))`
	for _, ec := range engines(t) {
		t.Run(ec.name, func(t *testing.T) {
			lim := limits()
			lim.Fuel = 1000
			inst := instantiate(t, ec.new(t), src, lim, nil)
			ctx := context.Background()
			init, err := inst.Export("_initialize", nil, nil)
			require.NoError(t, err)
			require.NoError(t, inst.Call(ctx, init, nil))
			alloc, err := inst.Export("callbox_alloc", []sandbox.ValType{sandbox.I32, sandbox.I32}, []sandbox.ValType{sandbox.I32})
			require.NoError(t, err)
			require.NoError(t, inst.Call(ctx, alloc, []uint64{64, 64}))
			// The callback itself is held to its budget.
			_, err = call(t, inst, "cb", 0)
			require.ErrorIs(t, err, abi.FuelExhausted)
		})
	}
}

// After a timeout the fuel reported is what ran, up to one refill slice;
// it used to read 25 on wasmtime after a 300 ms spin.
func TestFuelStatsAfterTimeout(t *testing.T) {
	for _, ec := range engines(t) {
		t.Run(ec.name, func(t *testing.T) {
			lim := limits()
			lim.Fuel = 1 << 40
			lim.Timeout = 100 * 1e6
			inst := instantiate(t, ec.new(t), trapsWAT, lim, nil)
			_, err := call(t, inst, "spin", 0)
			require.ErrorIs(t, err, abi.Timeout)
			used, known := inst.FuelConsumed()
			require.True(t, known)
			// 100 ms of a tight loop is well over 10 million instructions
			// on any machine that runs this suite.
			assert.Greater(t, used, uint64(10_000_000))
			assert.Less(t, used, uint64(1<<40))
		})
	}
}

// wazero refuses a function with more than wazero.MaxFunctionBlocks
// blocks: its compile time grows with their square. wasmtime compiles it in
// linear time and loads it.
func TestBlockLimit(t *testing.T) {
	for _, ec := range engines(t) {
		t.Run(ec.name, func(t *testing.T) {
			e := ec.new(t)
			ctx := context.Background()
			m, err := e.Compile(ctx, blocksModule(wazero.MaxFunctionBlocks, 64, 0), sandbox.ModuleConfig{Name: "ok", Limits: limits()})
			require.NoError(t, err)
			_ = m.Close(ctx)
			m, err = e.Compile(ctx, blocksModule(wazero.MaxFunctionBlocks+1, 1, 0), sandbox.ModuleConfig{Name: "many", Limits: limits()})
			if ec.name == "wasmtime" {
				require.NoError(t, err)
				_ = m.Close(ctx)
				return
			}
			require.ErrorIs(t, err, meter.ErrTooManyBlocks)
			assert.Contains(t, err.Error(), "function 0")
		})
	}
}

// blocksModule is a module of about size bytes of functions that each hold
// blocks empty blocks, nested depth deep (depth 1: one after another).
func blocksModule(blocks, depth, size int) []byte {
	leb := func(v int) []byte {
		var out []byte
		for {
			c := byte(v & 0x7f)
			v >>= 7
			if v == 0 {
				return append(out, c)
			}
			out = append(out, c|0x80)
		}
	}
	body := []byte{0} // no locals
	for n := 0; n < blocks; n += depth {
		for i := 0; i < depth; i++ {
			body = append(body, 0x02, 0x40)
		}
		for i := 0; i < depth; i++ {
			body = append(body, 0x0b)
		}
	}
	body = append(body, 0x0b)
	funcs := max(1, size/len(body))
	var code, decls []byte
	code = append(code, leb(funcs)...)
	decls = append(decls, leb(funcs)...)
	for i := 0; i < funcs; i++ {
		code = append(append(code, leb(len(body))...), body...)
		decls = append(decls, 0)
	}
	sec := func(id byte, b []byte) []byte { return append(append([]byte{id}, leb(len(b))...), b...) }
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = append(m, sec(1, []byte{1, 0x60, 0, 0})...)
	m = append(m, sec(3, decls)...)
	m = append(m, sec(5, []byte{1, 0, 1})...)
	return append(m, sec(10, code)...)
}

// BenchmarkCompileBlocks measures load work per module byte for the shape
// that makes wazero's compiler quadratic: many blocks in one function.
// Modules of about 120 KB hold functions of 512 blocks up to the limit
// (wazero.MaxFunctionBlocks), flat or nested; it reports ns/byte of a cold
// compile (the rewrite included).
func BenchmarkCompileBlocks(b *testing.B) {
	for _, ec := range engines(nil) {
		for _, shape := range []struct{ blocks, depth int }{{512, 1}, {2048, 1}, {4096, 1}, {4096, 64}, {4096, 4096}} {
			wasm := blocksModule(shape.blocks, shape.depth, 120_000)
			b.Run(fmt.Sprintf("%s/blocks%d/depth%d", ec.name, shape.blocks, shape.depth), func(b *testing.B) {
				e := ec.newB(b)
				ctx := context.Background()
				for i := 0; i < b.N; i++ {
					// A distinct hash per iteration: no cache hit.
					var sum [32]byte
					binary.LittleEndian.PutUint64(sum[:], uint64(i)+1)
					m, err := e.Compile(ctx, wasm, sandbox.ModuleConfig{Name: "blocks", Limits: limits(), SHA256: sum})
					require.NoError(b, err)
					_ = m.Close(ctx)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(wasm)), "ns/byte")
			})
		}
	}
}

// A bulk operation costs its length in BytesPerFuel units rounded up, on
// both engines: one call of an export doing one operation of length n
// (its argument) uses exactly ceil(n/BytesPerFuel) more fuel than the same
// call with n = 0. Lengths that are not multiples of 8 are the point: a
// charge rounded down would make a 7-byte fill free.
func TestBulkFuelRoundsUp(t *testing.T) {
	src := `(module
  (memory (export "memory") 3)
  (data $d "` + strings.Repeat("x", 4096) + `")
  (func (export "fill") (param i32) (result i32) (memory.fill (i32.const 64) (i32.const 7) (local.get 0)) (i32.const 0))
  (func (export "copy") (param i32) (result i32) (memory.copy (i32.const 64) (i32.const 70000) (local.get 0)) (i32.const 0))
  (func (export "init") (param i32) (result i32) (memory.init $d (i32.const 64) (i32.const 0) (local.get 0)) (i32.const 0)))`
	lengths := []uint64{1, 7, 8, 9, 15, 17, 4095, 4096}
	for _, ec := range engines(t) {
		e := ec.new(t)
		lim := limits()
		lim.Fuel = 1 << 30
		inst := instantiate(t, e, src, lim, nil)
		used := func(export string, n uint64) uint64 {
			_, err := call(t, inst, export, n)
			require.NoError(t, err, "%s %s(%d)", ec.name, export, n)
			u, known := inst.FuelConsumed()
			require.True(t, known)
			return u
		}
		for _, export := range []string{"fill", "copy", "init"} {
			base := used(export, 0)
			for _, n := range lengths {
				want := (n + meter.BytesPerFuel - 1) / meter.BytesPerFuel
				assert.Equal(t, want, used(export, n)-base, "%s: %s of %d bytes", ec.name, export, n)
			}
		}
	}
}

// BenchmarkFuelRate measures the CPU time one fuel unit buys in each class
// of work, on each engine: every workload runs until a budget of 50 million
// units is exhausted, and the benchmark reports nanoseconds per unit
// (ns/fuel). This is the CPU-time check behind the rates in package meter
// (docs/SECURITY.md quotes it): a budget bounds a call's CPU time at about
// the budget times the largest ns/fuel.
func BenchmarkFuelRate(b *testing.B) {
	const fuel = 50_000_000
	for _, ec := range engines(nil) {
		for _, bc := range append([]struct {
			export string
			charge int64
		}{{"plain", 0}}, bulkCases...) {
			b.Run(ec.name+"/"+bc.export, func(b *testing.B) {
				e := ec.newB(b)
				lim := limits()
				lim.Fuel = fuel
				lim.MaxMemory = 1 << 30
				lim.MaxError, lim.MaxLog = 1<<20, 1<<40
				lim.Timeout = time.Minute
				ctx := context.Background()
				m, err := e.Compile(ctx, wat.Must(bulkWAT()), sandbox.ModuleConfig{Name: "bulk", Limits: lim, WASI: true})
				require.NoError(b, err)
				defer m.Close(ctx)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					inst, err := m.Instantiate(ctx, sandbox.Deadline(time.Now(), lim.Timeout))
					require.NoError(b, err)
					fn, err := inst.Export(bc.export, i32toi32[0], i32toi32[1])
					require.NoError(b, err)
					b.StartTimer()
					err = inst.Call(ctx, fn, []uint64{0})
					b.StopTimer()
					require.ErrorIs(b, err, abi.FuelExhausted)
					_ = inst.Close(ctx)
					b.StartTimer()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/fuel, "ns/fuel")
			})
		}
	}
}

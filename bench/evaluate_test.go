package bench

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Ratios are taken within each round and the target judged on their
// median: one disturbed round moves one ratio, not the verdict.
func TestRatioIsMedianOfRoundRatios(t *testing.T) {
	w := Workload{ID: "tiny-1KiB"}
	a := Result{Workload: w, Variant: Variant{ID: "a"}, NsPerOp: 100,
		Samples: []float64{100, 110, 500, 105, 102}, CPUPerOp: 100, CPUSamples: []float64{100, 110, 500, 105, 102}}
	b := Result{Workload: w, Variant: Variant{ID: "b"}, NsPerOp: 100,
		Samples: []float64{100, 100, 100, 100, 100}, CPUPerOp: 100, CPUSamples: []float64{100, 100, 100, 100, 100}}
	r := &Report{Results: []Result{a, b}}
	assert.InDelta(t, 1.05, r.ratio("tiny-1KiB", "a", "b"), 1e-9, "median of 1.00, 1.10, 5.00, 1.05, 1.02")
	lo, hi, n := r.ratioRange("tiny-1KiB", "a", "b")
	assert.Equal(t, 5, n)
	assert.InDelta(t, 1.0, lo, 1e-9)
	assert.InDelta(t, 5.0, hi, 1e-9)
	c := r.roundCheck("a / b", "tiny-1KiB", "a", "b", 1.06, true)
	assert.True(t, c.Met, "the median (1.05) meets 1.06 though one round was 5x")
	assert.Contains(t, c.Value, "median of 5 rounds")
	c = r.roundCheck("a / b", "tiny-1KiB", "a", "b", 1.04, true)
	assert.False(t, c.Met, "the median (1.05) misses 1.04 though the fastest rounds meet it")
	assert.InDelta(t, 105, a.MedianCost(), 1e-9)
	assert.True(t, math.IsNaN(r.ratio("tiny-1KiB", "a", "missing")))
}

func TestGoBenchMetrics(t *testing.T) {
	out := "goos: linux\nBenchmarkTinyCAPI-2   \t 100\t 934.7 ns/op\n" +
		"BenchmarkTinyDoorRatios-2   \t       1\t       934.7 capi-cpu-ns\t         1.497 capi/into\t         1.047 capi/into-spread\n"
	m := goBenchMetrics(out, "BenchmarkTinyDoorRatios")
	require.Len(t, m, 3)
	assert.InDelta(t, 1.497, m["capi/into"], 1e-9)
	assert.InDelta(t, 934.7, m["capi-cpu-ns"], 1e-9)
	assert.Empty(t, goBenchMetrics(out, "BenchmarkTinyDoor"), "a name is matched whole")
	tg := (&Report{GoBench: out}).doorTarget()
	require.Len(t, tg.Checks, 2)
	assert.True(t, tg.Checks[0].Measured)
	assert.False(t, tg.Checks[0].Met, "1.497x misses 1.15x")
	assert.False(t, tg.Checks[1].Measured, "no xla/into metric in this output")
}

func TestProcessTarget(t *testing.T) {
	out := "BenchmarkProcessCall/1KiB/wazero-2 \t 100\t 13000 ns/op\t 900 inproc-ns/op\t 4500 process-ns/op\t 5.0 ratio\n" +
		"BenchmarkProcessBell/wazero-2 \t 1\t 1 ns/op\t 14.8 one-bell-cpu-us\t 9149 one-bell-ns/call\t 29.0 one-socket-cpu-us\t 32290 one-socket-ns/call\t 3.529 one-speedup\t 12.8 crowd-bell-cpu-us\t 8969 crowd-bell-ns/call\t 29.2 crowd-socket-cpu-us\t 23034 crowd-socket-ns/call\t 0.97 crowd-speedup\n" +
		"BenchmarkProcessCall/4MiB/wazero-2 \t 100\t 1 ns/op\t 1.13 ratio\n" +
		"BenchmarkProcessCall/32MiB/wazero-2 \t 100\t 1 ns/op\t 1.25 ratio\n" +
		"BenchmarkWorkerStart/wazero-2 \t 10\t 1 ns/op\t 2400 inproc-load-µs\t 6500 process-load-µs\n" +
		"BenchmarkProcessThroughput/wazero-2 \t 10\t 1 ns/op\t 0.97 inproc-scaling\t 1.6 process-scaling\n"
	tg := (&Report{GoBench: out}).processTarget()
	checks := map[string]Check{}
	for _, c := range tg.Checks {
		checks[c.What] = c
	}
	assert.True(t, checks["wazero 1 KiB call in a worker"].Met)
	assert.Contains(t, checks["wazero 1 KiB call in a worker"].Value, "4.50 µs")
	assert.True(t, checks["wazero 1 KiB calls from one caller: doorbell / socket calls/s"].Met)
	assert.False(t, checks["wazero 1 KiB calls from twice as many callers as cores: doorbell / socket calls/s"].Met, "0.97x misses 1x")
	assert.True(t, checks["wazero 4MiB: in a worker / in process"].Met)
	assert.False(t, checks["wazero 32MiB: in a worker / in process"].Met, "1.25x misses 1.2x")
	assert.True(t, checks["wazero load with a new worker"].Met)
	assert.True(t, checks["wazero 1 KiB calls, 2 callers / 1"].Met)
	if c, ok := checks["wasmtime 1 KiB call in a worker"]; ok {
		assert.False(t, c.Measured, "no wasmtime lines in this output")
	}
}

// Target 15 reads make elixir-bench's lines: the call variant's median
// ratio to the C API, per engine's callback; other lines are ignored.
func TestElixirTarget(t *testing.T) {
	out := "C API capi copy_f32 1KiB ns_per_call 516.9 cpu_ns_per_call 519.5\n" +
		"elixir copy_f32 wazero 1KiB capi median_ns_per_call 562.0 min 519.2 ratio_to_capi median 1.0 best_round 1.0\n" +
		"elixir copy_f32 wazero 1KiB call median_ns_per_call 844.9 min 819.2 ratio_to_capi median 1.55 best_round 0.94\n" +
		"elixir copy_f32 wazero 1KiB many median_ns_per_call 1465.4 min 1247.4 ratio_to_capi median 2.61 best_round 2.01\n" +
		"elixir copy_f32_wasmtime wasmtime 1KiB call median_ns_per_call 965.4 min 942.5 ratio_to_capi median 1.39 best_round 1.34\n" +
		"elixir copy_f32_wasmtime wasmtime 1KiB async median_ns_per_call 7330.6 min 7090.0 ratio_to_capi median 10.69 best_round 9.88\n"
	tg := (&Report{ElixirBench: out}).elixirTarget()
	assert.Equal(t, 15, tg.N)
	require.Len(t, tg.Checks, len(Engines()))
	wz := tg.Checks[0]
	assert.True(t, wz.Measured)
	assert.False(t, wz.Met, "1.55x misses 1.5x")
	assert.Contains(t, wz.Value, "1.55x")
	assert.Contains(t, wz.Value, "845 ns against 562 ns")
	assert.Contains(t, wz.Value, "call_many, per call: 2.61x")
	if len(tg.Checks) > 1 {
		assert.True(t, tg.Checks[1].Measured)
		assert.True(t, tg.Checks[1].Met, "1.39x meets 1.5x")
	}

	none := (&Report{}).elixirTarget()
	assert.Equal(t, "n/a", none.Status(), "no make elixir-bench output: nothing measured")
	assert.Empty(t, none.Checks[0].Value, "nothing measured shows no value")
}

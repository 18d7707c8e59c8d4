package host_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
)

// profileBenchWat has two workloads: loops, whose work is in one
// function's loop (the profiler adds nothing inside it), and calls, which
// calls a small leaf in its loop (each guest call adds the profiler's two
// reports).
const profileBenchWat = `(module
  (memory (export "memory") 1)
  (global $sink (mut i32) (i32.const 0))
  (func (export "callbox_abi_version") (result i32) i32.const 1)
  (func (export "callbox_alloc") (param i32 i32) (result i32) i32.const 1024)
  (func $mix (param $x i32) (result i32)
    (i32.xor (i32.mul (local.get $x) (i32.const 2654435761)) (i32.shr_u (local.get $x) (i32.const 7))))
  (func (export "loops") (param i32) (result i32) (local $n i32) (local $acc i32)
    (local.set $n (i32.const 100000))
    (loop $l
      (local.set $acc (i32.xor (i32.mul (local.get $acc) (i32.const 2654435761)) (local.get $n)))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $l (local.get $n)))
    (global.set $sink (local.get $acc))
    i32.const 0)
  (func (export "calls") (param i32) (result i32) (local $n i32)
    (local.set $n (i32.const 10000))
    (loop $l
      (global.set $sink (i32.add (global.get $sink) (call $mix (local.get $n))))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $l (local.get $n)))
    i32.const 0))`

// profileRounds is how many interleaved rounds BenchmarkGuestProfiler runs.
const profileRounds = 5

// BenchmarkGuestProfiler is the guest profiler's overhead (issue 47): the
// same calls on a plain host and on one made WithGuestProfiler, in
// interleaved rounds (the fastest of three timings of 20 calls each per
// round), for a loop-bound guest (the profiler adds nothing inside its
// loop) and a call-bound one (10,000 guest calls a call: each adds the
// profiler's entry and exit reports). It reports, per engine, the median
// ratio of each and what one guest call's reports cost (report-ns). One
// iteration is the whole measurement.
func BenchmarkGuestProfiler(b *testing.B) {
	ctx := context.Background()
	wasm := wat.Must(profileBenchWat)
	for _, engine := range engineNames() {
		b.Run(engine, func(b *testing.B) {
			var hosts [2]*host.Host
			for i, opts := range [][]host.Option{nil, {host.WithGuestProfiler()}} {
				h, err := host.New(ctx, nil, append(opts, host.WithLogger(slog.New(slog.DiscardHandler)))...)
				require.NoError(b, err)
				defer h.Close(ctx)
				for _, export := range []string{"loops", "calls"} {
					cb := config.DefaultCallback()
					cb.Name, cb.Export, cb.Engine, cb.Signature = export, export, engine, "() -> ()"
					require.NoError(b, h.LoadModule(ctx, cb, wasm))
				}
				hosts[i] = h
			}
			timed := func(h *host.Host, name string) float64 {
				best := time.Duration(1 << 62)
				for range 3 {
					start := time.Now()
					for range 20 {
						if _, err := h.Invoke(ctx, name); err != nil {
							b.Fatal(err)
						}
					}
					best = min(best, time.Since(start))
				}
				return float64(best.Nanoseconds()) / 20
			}
			ratios := map[string][]float64{}
			var plainCalls, profCalls []float64
			for i := 0; i < b.N; i++ {
				for range profileRounds {
					for _, name := range []string{"loops", "calls"} {
						plain, prof := timed(hosts[0], name), timed(hosts[1], name)
						ratios[name] = append(ratios[name], prof/plain)
						if name == "calls" {
							plainCalls, profCalls = append(plainCalls, plain), append(profCalls, prof)
						}
					}
				}
			}
			b.ReportMetric(median(ratios["loops"]), "loops-ratio")
			b.ReportMetric(median(ratios["calls"]), "calls-ratio")
			b.ReportMetric((median(profCalls)-median(plainCalls))/10000, "report-ns")
			b.Logf("%s: loop-bound %.2fx, call-bound %.2fx", engine, median(ratios["loops"]), median(ratios["calls"]))
		})
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

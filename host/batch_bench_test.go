package host_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
)

// BenchmarkBatch64x64KiB is a batched call of scale on 64 elements of
// 64 KiB (f32[64, 16384]): batching parallel (the elements split over
// GOMAXPROCS pooled instances) against sequential (the same entry, one
// element after another) and against 64 InvokeInto calls in a loop.
// Compare the ratio within one run; the suite's target 10 (callbox-bench)
// holds parallel's speedup over sequential to at least 0.9x of pure Go's
// on as many goroutines, measured in the same rounds.
func BenchmarkBatch64x64KiB(b *testing.B) {
	const batch, n = 64, 16384
	for _, engine := range engineNames() {
		for _, rule := range []string{config.BatchingParallel, config.BatchingSequential, "loop"} {
			b.Run(engine+"/"+rule, func(b *testing.B) {
				h := newHost(b, engine, func(cb *config.Callback) {
					cb.Limits.Timeout, cb.Limits.MaxMemory = time.Second, 64<<20
					cb.MaxInstances = runtime.GOMAXPROCS(0)
					if rule != "loop" {
						cb.Batching = rule
					}
				})
				x, f, out := scaleBatch(batch, n, 1)
				ctx := context.Background()
				ins, outs := []host.Tensor{x, f}, []host.Tensor{out}
				xs, fs, os := abi.MustView[float32](x), abi.MustView[float32](f), abi.MustView[float32](out)
				b.SetBytes(batch * n * 4)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if rule != "loop" {
						if _, err := invokeBatchInto(ctx, h, "scale", ins, outs); err != nil {
							b.Fatal(err)
						}
						continue
					}
					for e := range batch {
						in := []host.Tensor{abi.From(xs[e*n : (e+1)*n]), abi.Scalar(fs[e])}
						if _, err := h.Do(ctx, &host.Request{Callback: "scale", Inputs: in, Outputs: []host.Tensor{abi.From(os[e*n : (e+1)*n])}}); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}

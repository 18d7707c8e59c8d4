package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// BenchmarkParallelBatch is the batching target of docs/PERFORMANCE.md on
// its own (make bench runs it with the rest): a batched call of 64 x 64
// KiB with batching parallel against sequential, at every parallelism up
// to GOMAXPROCS, 7 interleaved repetitions. Run it with -benchtime 1x:
//
//	go test -run XXX -bench ParallelBatch -benchtime 1x .  (in bench/)
func BenchmarkParallelBatch(b *testing.B) {
	for _, engine := range Engines() {
		b.Run(engine, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				for _, r := range MeasureBatch(context.Background(), engine, DefaultReps, 200*time.Millisecond) {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
					b.Logf("%s parallelism %d: sequential / parallel %.2fx (median of %d; sequential %.2f ms, parallel %.2f ms per batch; cpu ratio %.2f; cores busy: sequential %.2f, parallel %.2f; pure Go on %d goroutines: %.2fx; the batch's copies alone: %.2fx)",
						engine, r.Parallelism, r.Speedup, len(r.Parallel), median(r.Sequential)/1e6, median(r.Parallel)/1e6, r.CPURatio,
						median(r.SequentialCPU)/median(r.Sequential), median(r.ParallelCPU)/median(r.Parallel), r.Parallelism, r.Ceiling, r.CopyCeiling)
					if r.Parallelism == 2 {
						b.ReportMetric(r.Speedup, "speedup-2")
					}
				}
			}
		})
	}
}

// MeasureBatch checks the batched result against Go's and reports a
// result per parallelism, which the target reads.
func TestMeasureBatch(t *testing.T) {
	res := MeasureBatch(context.Background(), Engines()[0], 2, time.Millisecond)
	require.Equal(t, len(batchParallelisms()), len(res))
	for _, r := range res {
		require.NoError(t, r.Err)
		assert.Len(t, r.Parallel, 2)
		assert.Greater(t, r.Speedup, 0.0)
		assert.Greater(t, r.Ceiling, 0.0)
		assert.Greater(t, r.CopyCeiling, 0.0)
		assert.Greater(t, r.OfCeiling, 0.0)
	}
	rep := &Report{Batch: res}
	tg := rep.batchTarget()
	assert.Contains(t, tg.Title, "parallel batch of 64 x 64KiB, 2 at once: its speedup over sequential >= 0.9x of pure Go's")
	require.NotEmpty(t, tg.Checks)
	assert.Equal(t, ">= 0.9x", tg.Checks[0].Limit)
	// The verdict follows the share of the control's speedup, not the
	// speedup alone.
	two := Report{Batch: []BatchResult{{Engine: Engines()[0], Parallelism: 2, Speedup: 1.5, Ceiling: 1.6, OfCeiling: 0.94, Parallel: []float64{1}, Sequential: []float64{1.5}}}}
	assert.True(t, two.batchTarget().Checks[0].Met, "1.5x where pure Go got 1.6x")
	two.Batch[0].Speedup, two.Batch[0].Ceiling, two.Batch[0].OfCeiling = 1.85, 2.0, 0.85
	assert.False(t, two.batchTarget().Checks[0].Met, "1.85x where pure Go got 2.0x")
}

package bench

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// BenchmarkTimeoutAccuracy is target 4 of docs/PERFORMANCE.md on its own
// (make bench runs it with the rest): how late a runaway guest with a 10 ms
// timeout is stopped, idle and while GOMAXPROCS other guests spin, on each
// engine. Run it with -benchtime 1x; it reports the p50, p99 and max
// lateness of 200 calls each way.
//
//	go test -run XXX -bench TimeoutAccuracy -benchtime 1x .  (in bench/)
func BenchmarkTimeoutAccuracy(b *testing.B) {
	for _, engine := range []string{"wazero", "wasmtime"} {
		b.Run(engine, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				res := MeasureTimeoutAccuracy(context.Background(), engine, 200, 10*time.Millisecond, runtime.GOMAXPROCS(0))
				for _, r := range res {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
					b.Logf("%s burners=%d runs=%d: p50 %v p99 %v max %v", engine, r.Burners, r.Runs, r.P50, r.P99, r.Max)
				}
				busy := res[1]
				b.ReportMetric(float64(busy.P99.Microseconds())/1000, "p99-busy-ms")
				b.ReportMetric(float64(busy.P50.Microseconds())/1000, "p50-busy-ms")
				b.ReportMetric(float64(res[0].P99.Microseconds())/1000, "p99-idle-ms")
			}
		})
	}
}

//go:build soak && unix

package host_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
)

// TestSoakMaxCPU is the measurement behind max_cpu's advice
// (docs/SECURITY.md): 100,000 healthy calls of about 25 µs of CPU each,
// held to max_cpu 2ms and no other limit that load can trip (a 1-minute
// timeout), while 8 other processes spin on this machine's cores: every
// call must succeed, on both engines. make cpu-soak runs it.
func TestSoakMaxCPU(t *testing.T) {
	burn(t, 8)
	forEngines(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		h := newHost(t, engine, func(cb *config.Callback) {
			cb.Limits.Timeout, cb.Limits.MaxCPU = time.Minute, 2*time.Millisecond
		})
		const calls, n = 100_000, 20_000
		failed := 0
		var slowest time.Duration
		start := time.Now()
		for i := 0; i < calls; i++ {
			w0 := time.Now()
			if _, err := h.Invoke(ctx, "busy", abi.Scalar[int32](n)); err != nil {
				failed++
				if failed <= 3 {
					t.Logf("call %d: %v", i, err)
				}
			}
			slowest = max(slowest, time.Since(w0))
		}
		t.Logf("%s: %d calls with 8 spinning processes on %d cores: %d failed; the slowest took %v of wall time (max_cpu 2ms); %v in all",
			engine, calls, runtime.NumCPU(), failed, slowest, time.Since(start).Round(time.Millisecond))
		assert.Zero(t, failed)
	})
}

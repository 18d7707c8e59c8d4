//go:build unix

package host_test

import (
	"context"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
)

// processCPU is this process's CPU time (every thread).
func processCPU(t *testing.T) time.Duration {
	var ts unix.Timespec
	require.NoError(t, unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts))
	return time.Duration(ts.Nano())
}

// burn keeps every core busy with n processes of their own (so their CPU
// time is not this process's) until the test ends.
func burn(t *testing.T, n int) {
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
}

// TestMaxCPU: max_cpu bounds the CPU time a call uses, not its wall time,
// on both engines, while other processes keep every core oversubscribed
// (twice as many spinning processes as cores):
//   - a spinning guest with a 1-minute timeout and max_cpu 100ms stops as a
//     Timeout naming max_cpu, having used less than twice its CPU budget
//     (this process's CPU time over the call: the burners are other
//     processes);
//   - healthy calls each using a few ms of CPU, under max_cpu of four times
//     that, all succeed however long the machine makes them wait: the
//     waiting is not CPU time (with a wall-clock limit of the same size
//     they would be at the machine's mercy);
//   - a call's failure leaves the host serving.
func TestMaxCPU(t *testing.T) {
	burn(t, 2*runtime.NumCPU())
	forEngines(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		const limit = 100 * time.Millisecond
		h := newHost(t, engine, func(cb *config.Callback) {
			cb.Limits.Timeout, cb.Limits.MaxCPU = time.Minute, limit
		})
		c0, w0 := processCPU(t), time.Now()
		_, err := h.Invoke(ctx, "spin", abi.From([]float32{1}))
		used, wall := processCPU(t)-c0, time.Since(w0)
		require.Error(t, err)
		assert.Equal(t, host.Timeout, abi.KindOf(err), "%v", err)
		assert.ErrorContains(t, err, "cpu time limit 100ms used up (max_cpu)")
		assert.GreaterOrEqual(t, used, limit, "stopped before its CPU budget was used")
		assert.Less(t, used, 2*limit, "stopped within twice its CPU budget (wall %v)", wall)
		t.Logf("%s: spin stopped after %v of CPU, %v of wall time", engine, used, wall)

		// A busy call's CPU cost, measured on this loaded machine: the
		// healthy calls below use about this much.
		const n = 2_000_000
		c0 = processCPU(t)
		_, err = h.Invoke(ctx, "busy", abi.Scalar[int32](n))
		require.NoError(t, err)
		one := processCPU(t) - c0
		healthy := newHost(t, engine, func(cb *config.Callback) {
			cb.Limits.Timeout, cb.Limits.MaxCPU = time.Minute, max(4*one, 20*time.Millisecond)
		})
		var slowest time.Duration
		for i := range 40 {
			w0 := time.Now()
			_, err := healthy.Invoke(ctx, "busy", abi.Scalar[int32](n))
			require.NoError(t, err, "healthy call %d (each uses about %v of CPU)", i, one)
			slowest = max(slowest, time.Since(w0))
		}
		t.Logf("%s: 40 healthy calls of about %v CPU each under max_cpu %v; the slowest took %v of wall time", engine, one, max(4*one, 20*time.Millisecond), slowest)
		_, err = h.Invoke(ctx, "busy", abi.Scalar[int32](1))
		require.NoError(t, err, "the host keeps serving after a call stopped at its CPU limit")
	})
}

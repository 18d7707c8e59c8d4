package host_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

// chaosSettings size TestProcessChaos: a short run in every make test,
// the full one with make chaos (CALLBOX_CHAOS=60s CALLBOX_CHAOS_BURNERS=8).
func chaosSettings() (d time.Duration, burners int) {
	d, burners = 4*time.Second, 2
	if v := os.Getenv("CALLBOX_CHAOS"); v != "" {
		if p, err := time.ParseDuration(v); err == nil {
			d = p
		}
	}
	if v := os.Getenv("CALLBOX_CHAOS_BURNERS"); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			burners = n
		}
	}
	return d, burners
}

// TestProcessChaos kills workers under load and holds every call to its
// own reasons. Callers call scale (its result checked bit for bit) and
// busy on both engines under isolation: process, with a 10 s timeout,
// while a killer sends SIGKILL to a random worker every ~100 ms, other
// processes burn CPU, and one more caller runs busy under context
// deadlines of a few milliseconds, which ends its own calls as Timeouts.
// No call may return a wrong result or hang; a healthy call (no deadline
// of its own) may fail only as WorkerDied, never as a Timeout; the
// deadline caller's calls fail only as Timeout (or WorkerDied when the
// killer hit them); and after Close no worker process, goroutine or
// instance is left.
func TestProcessChaos(t *testing.T) {
	if !engines.ProcessIsolationAvailable() {
		t.Skip("isolation: process needs Linux")
	}
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	d, burners := chaosSettings()
	for range burners {
		burn := exec.Command("sh", "-c", "while :; do :; done")
		require.NoError(t, burn.Start())
		t.Cleanup(func() { _ = burn.Process.Kill(); _ = burn.Wait() })
	}
	ctx := context.Background()
	h, err := host.New(ctx, nil, host.WithWorker(workerPath(t, false)), host.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	var names []string
	for _, engine := range engineNames() {
		for _, export := range []string{"scale", "busy"} {
			cb := config.DefaultCallback()
			cb.Name, cb.Export, cb.Signature, cb.Engine, cb.Isolation = export+"_"+engine, export, testkitSigs[export], engine, config.IsolationProcess
			cb.Limits.Timeout = 10 * time.Second
			cb.MaxInstances = 4
			require.NoError(t, h.LoadModule(ctx, cb, testkitWasm(t)))
			names = append(names, cb.Name)
		}
	}
	type result struct {
		healthy bool
		took    time.Duration
		err     error
	}
	var (
		mu      sync.Mutex
		results []result
		kills   atomic.Int64
		wrong   atomic.Int64
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	record := func(r result) {
		mu.Lock()
		results = append(results, r)
		mu.Unlock()
	}
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				name := names[rng.IntN(len(names))]
				start := time.Now()
				var err error
				if strings.HasPrefix(name, "scale") {
					x := []float32{float32(rng.IntN(100)), 2.5, -1}
					f := float32(rng.IntN(7))
					var outs []abi.Tensor
					outs, err = h.Invoke(ctx, name, abi.From(x), abi.Scalar(f))
					if err == nil && !equalScaled(abi.MustView[float32](outs[0]), x, f) {
						wrong.Add(1)
					}
				} else {
					out := abi.Scalar[int32](-1)
					_, err = h.Do(ctx, &host.Request{Callback: name, Inputs: []host.Tensor{abi.Scalar[int32](int32(rng.IntN(200_000)))}, Outputs: []host.Tensor{out}})
				}
				record(result{healthy: true, took: time.Since(start), err: err})
			}
		}()
	}
	wg.Add(1)
	go func() { // the deadline caller
		defer wg.Done()
		rng := rand.New(rand.NewPCG(99, 1))
		for {
			select {
			case <-stop:
				return
			default:
			}
			name := "busy_" + engineNames()[rng.IntN(len(engineNames()))]
			cctx, cancel := context.WithTimeout(ctx, time.Duration(1+rng.IntN(5))*time.Millisecond)
			start := time.Now()
			out := abi.Scalar[int32](-1)
			_, err := h.Do(cctx, &host.Request{Callback: name, Inputs: []host.Tensor{abi.Scalar[int32](2_000_000_000)}, Outputs: []host.Tensor{out}})
			cancel()
			record(result{healthy: false, took: time.Since(start), err: err})
		}
	}()
	wg.Add(1)
	go func() { // the killer
		defer wg.Done()
		rng := rand.New(rand.NewPCG(7, 7))
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(50+rng.IntN(100)) * time.Millisecond):
			}
			c, err := h.Lookup(names[rng.IntN(len(names))])
			if err != nil {
				continue
			}
			if w, ok := c.Worker(); ok && w.PID > 0 && syscall.Kill(w.PID, syscall.SIGKILL) == nil {
				kills.Add(1)
			}
		}
	}()
	time.Sleep(d)
	close(stop)
	wg.Wait()

	kinds := map[string]int{}
	var healthyCalls, healthyFailed int
	for _, r := range results {
		kind := "ok"
		if r.err != nil {
			var ce *host.CallbackError
			if errors.As(r.err, &ce) {
				kind = ce.Kind().Ident()
			} else {
				kind = "other: " + r.err.Error()
			}
		}
		who := "deadline caller"
		if r.healthy {
			who = "healthy"
			healthyCalls++
			if r.err != nil {
				healthyFailed++
			}
		}
		kinds[who+" "+kind]++
		switch {
		case r.healthy && r.err != nil && !errors.Is(r.err, host.WorkerDied):
			t.Errorf("a healthy call failed for another reason than its worker's death after %v: %v", r.took, r.err)
		case !r.healthy && r.err != nil && !errors.Is(r.err, host.Timeout) && !errors.Is(r.err, host.WorkerDied):
			t.Errorf("a call with a context deadline failed as neither Timeout nor WorkerDied after %v: %v", r.took, r.err)
		case r.took > 15*time.Second:
			t.Errorf("a call took %v", r.took)
		}
	}
	t.Logf("%v with %d burners: %d workers killed, %d healthy calls (%d failed), outcomes %v", d, burners, kills.Load(), healthyCalls, healthyFailed, kinds)
	assert.Zero(t, wrong.Load(), "wrong results")
	assert.Positive(t, kills.Load())
	assert.Greater(t, healthyCalls, healthyFailed, "most healthy calls succeed")

	var pids []int
	for _, n := range names {
		if c, err := h.Lookup(n); err == nil {
			if w, ok := c.Worker(); ok && w.PID > 0 {
				pids = append(pids, w.PID)
			}
		}
	}
	require.NoError(t, h.Close(ctx))
	for _, pid := range pids {
		assert.True(t, processEnded(pid), "worker %d is gone after Close", pid)
	}
	assert.Empty(t, childWorkers(t), "no worker process is left")
}

func equalScaled(got, x []float32, f float32) bool {
	if len(got) != len(x) {
		return false
	}
	for i := range x {
		if got[i] != x[i]*f {
			return false
		}
	}
	return true
}

// childWorkers lists this process's child processes that are workers.
func childWorkers(t *testing.T) []string {
	self := fmt.Sprint(os.Getpid())
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) > 1 && f[1] == self && strings.Contains(s, "callbox-worker") {
			out = append(out, e.Name()+" "+s[:strings.LastIndexByte(s, ')')+1])
		}
	}
	return out
}

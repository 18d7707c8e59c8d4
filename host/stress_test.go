package host_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
)

// mixedHost is one host with healthy and hostile callbacks on every engine,
// the population of the stress test and the soak. Callback names are
// "<case>_<engine>".
type mixedHost struct {
	*host.Host
	healthy []string             // testkit "scale" and "tap" per engine
	hostile map[string]host.Kind // name -> the kind every call fails with
}

// stressHostile are the hostile cases the stress test and the soak mix in:
// a trap, a timeout, a stack overflow, the memory limit, ABI violations in
// the frame and the imports, a guest error that keeps its instance, and a
// pooled guest that breaks its own state after one good call.
var stressHostile = []string{"unreachable", "spin", "recurse", "grow_pages", "overrun_1", "redirect", "error_ptr_oob", "error_megabytes", "div_by_zero", "sleep_forever"}

// timeout is the runaways' timeout.
func newMixedHost(t testing.TB, timeout time.Duration, maxInstances int) *mixedHost {
	t.Helper()
	ctx := context.Background()
	h, err := host.New(ctx, nil, host.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	m := &mixedHost{Host: h, hostile: map[string]host.Kind{}}
	wasm := testkitWasm(t)
	for _, e := range engineNames() {
		for _, name := range []string{"scale", "tap"} {
			cb := config.DefaultCallback()
			cb.Name, cb.Export, cb.Signature, cb.Engine = name+"_"+e, name, testkitSigs[name], e
			cb.MaxInstances = maxInstances
			require.NoError(t, h.LoadModule(ctx, cb, wasm))
			m.healthy = append(m.healthy, cb.Name)
		}
		for _, name := range stressHostile {
			hc := caseNamed(t, name)
			cb := hostileCallback(hc, e)
			cb.Name = name + "_" + e
			cb.MaxInstances = maxInstances
			// The runaways get the short timeout; every other case ends
			// by itself long before 5 s, also on a loaded machine.
			cb.Limits.Timeout = 5 * time.Second
			if hc.Kind == host.Timeout {
				cb.Limits.Timeout = timeout
			}
			mod := hostileWasm(t, hc)
			require.NoError(t, h.LoadModule(ctx, cb, mod))
			m.hostile[cb.Name] = hc.Expected(e)
		}
	}
	return m
}

// call makes one call of the named callback and checks its result: healthy
// calls must produce the right outputs, hostile ones fail with their kind.
func (m *mixedHost) call(ctx context.Context, name string, i int) error {
	x := []float32{float32(i), 1, 2, 3}
	switch {
	case strings.HasPrefix(name, "scale_"):
		outs, err := m.Invoke(ctx, name, abi.From(slices.Clone(x)), abi.Scalar[float32](2))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if got := abi.MustView[float32](outs[0]); got[0] != 2*x[0] || got[3] != 6 {
			return fmt.Errorf("%s: wrong result %v", name, got)
		}
		return nil
	case strings.HasPrefix(name, "tap_"):
		outs, err := m.Invoke(ctx, name, abi.From(slices.Clone(x)))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if got := abi.MustView[float32](outs[0]); !slices.Equal(got, x) {
			return fmt.Errorf("%s: wrong pass-through %v", name, got)
		}
		return nil
	}
	want, ok := m.hostile[name]
	if !ok {
		return fmt.Errorf("unknown callback %s", name)
	}
	x[0] = 0 // the traps fire on x[0] == 0
	_, err := m.Invoke(ctx, name, abi.From(slices.Clone(x)))
	var ce *host.CallbackError
	if !errors.As(err, &ce) || ce.Kind() != want || ce.Callback != name {
		return fmt.Errorf("%s: want %s, got %v", name, want.Ident(), err)
	}
	return nil
}

func (m *mixedHost) names() []string {
	out := slices.Clone(m.healthy)
	for n := range m.hostile {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// TestStressMixed: many goroutines call healthy and hostile callbacks on
// both engines at once (about one call in four hostile), run ordered chains
// that hit hostile calls, and fire taps, under -race in CI. Every result
// must be right, no pool may exceed its bound, and nothing may outlive the
// host.
func TestStressMixed(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m := newMixedHost(t, 100*time.Millisecond, 3)
	defer m.Close(context.Background())
	ctx := context.Background()
	const workers, rounds = 16, 40
	var wg sync.WaitGroup
	var calls, chains, failures atomic.Int64
	errs := make(chan error, workers*rounds)
	stop := make(chan struct{})
	// A sampler checks the pools' bounds while the calls run.
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for _, n := range m.names() {
				if st, _ := m.PoolStats(n); st.Live > st.Max || st.Idle > st.Live {
					errs <- fmt.Errorf("%s: pool %+v out of bounds", n, st)
				}
			}
		}
	}()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			names := m.names()
			var hostileNames []string
			for _, n := range names {
				if _, bad := m.hostile[n]; bad {
					hostileNames = append(hostileNames, n)
				}
			}
			for i := 0; i < rounds; i++ {
				switch r := rng.IntN(100); {
				case r < 10: // an ordered chain with one hostile call in it
					chains.Add(1)
					hostile := names[rng.IntN(len(names))]
					if _, bad := m.hostile[hostile]; !bad {
						hostile = "unreachable_" + engineNames()[rng.IntN(len(engineNames()))]
					}
					ch := m.NewChain(fmt.Sprintf("w%d-%d", w, i))
					x := abi.From([]float32{0, 1})
					first := ch.Submit(ctx, "tap_"+engineNames()[0], x)
					bad := ch.Submit(ctx, hostile, x)
					after := ch.Submit(ctx, "scale_"+engineNames()[0], x, abi.Scalar[float32](1))
					err := ch.Barrier(ctx)
					var ce *host.CallbackError
					if !errors.As(err, &ce) || ce.Seq != 2 || ce.Kind() != m.hostile[hostile] {
						errs <- fmt.Errorf("chain: barrier returned %v", err)
					}
					if _, err := first.Wait(ctx); err != nil {
						errs <- fmt.Errorf("chain: first call: %v", err)
					}
					if _, err := bad.Wait(ctx); !errors.Is(err, m.hostile[hostile]) {
						errs <- fmt.Errorf("chain: hostile call: %v", err)
					}
					if _, err := after.Wait(ctx); !errors.Is(err, host.ErrChainFailed) {
						errs <- fmt.Errorf("chain: call after the failure: %v", err)
					}
				case r < 15: // fire-and-forget taps, some hostile
					if name := names[rng.IntN(len(names))]; !strings.HasPrefix(name, "scale_") {
						m.Tap(ctx, name, abi.From([]float32{0, 1, 2, 3}))
					}
				default: // one direct call in four is hostile
					name := m.healthy[rng.IntN(len(m.healthy))]
					if rng.IntN(4) == 0 {
						name = hostileNames[rng.IntN(len(hostileNames))]
						failures.Add(1)
					}
					calls.Add(1)
					if err := m.call(ctx, name, i); err != nil {
						errs <- err
					}
				}
			}
		}(w)
	}
	wg.Wait()
	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_ = m.Barrier(bctx) // taps' errors are the hostile ones; it must not hang
	require.NoError(t, bctx.Err(), "Barrier hung")
	close(stop)
	<-sampled
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d calls (%d hostile), %d chains", calls.Load(), failures.Load(), chains.Load())
	for _, n := range m.names() {
		st, _ := m.PoolStats(n)
		assert.LessOrEqual(t, st.Live, st.Max, n)
		assert.Equal(t, st.Live, st.Idle, "%s: an instance still in use after every call returned", n)
	}
	require.NoError(t, m.Close(ctx))
}

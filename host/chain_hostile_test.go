package host_test

import (
	"context"
	"log/slog"
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

// Ordered chains under hostile failure. The chain's side effect is the
// testkit's "tap" callback, which logs one "scaling" line per call: the
// countingHandler (chain_test.go) counts them, so a call that ran cannot
// hide.

// chainHost loads the counted "tap" and one hostile callback named "bad".
func chainHost(t *testing.T, engine string, bad hostileCase, tweak func(*config.Callback)) (*host.Host, *atomic.Int64) {
	t.Helper()
	ran := &atomic.Int64{}
	h, err := host.New(context.Background(), nil, host.WithLogger(slog.New(countingHandler{Handler: slog.DiscardHandler, n: ran})))
	require.NoError(t, err)
	tap := config.DefaultCallback()
	tap.Name, tap.Signature, tap.Engine = "tap", testkitSigs["tap"], engine
	require.NoError(t, h.LoadModule(context.Background(), tap, testkitWasm(t)))
	cb := hostileCallback(bad, engine)
	cb.Name = "bad"
	cb.MaxInstances = 4
	if tweak != nil {
		tweak(&cb)
	}
	require.NoError(t, h.LoadModule(context.Background(), cb, hostileWasm(t, bad)))
	return h, ran
}

func caseNamed(t testing.TB, name string) hostileCase {
	for _, hc := range hostileCases {
		if hc.Name == name {
			return hc
		}
	}
	t.Fatalf("no hostile case %s", name)
	return hostileCase{}
}

// TestChainStopsAtHostileCall: in a chain of n calls where call k is
// hostile, calls k+1..n and every tap queued after it never run, each
// reports a *host.ChainError naming its own sequence number and wrapping
// the first failure, Barrier returns that failure promptly (also when
// called again), and a new chain on the same host works.
func TestChainStopsAtHostileCall(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		for _, name := range []string{"unreachable", "spin", "overrun_1", "grow_pages", "error_ptr_oob", "recurse"} {
			t.Run(name, func(t *testing.T) {
				defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
				bad := caseNamed(t, name)
				h, ran := chainHost(t, engine, bad, nil)
				defer h.Close(context.Background())
				ctx := context.Background()
				x := abi.From([]float32{0, 1, 2, 3})

				const n, k = 12, 5
				ch := h.NewChain("pipeline")
				var futs []*host.Future
				for seq := 1; seq <= n; seq++ {
					cb := "tap"
					if seq == k {
						cb = "bad"
					}
					futs = append(futs, ch.Submit(ctx, cb, x))
				}
				for i := 0; i < 3; i++ {
					ch.Tap(ctx, "tap", x) // pending asynchronous taps
				}

				bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				start := time.Now()
				err := ch.Barrier(bctx)
				assert.Less(t, time.Since(start), hostileTimeout+hostileSlack, "Barrier must return within the failing call's limit")
				require.ErrorIs(t, err, bad.Kind)
				var first *host.CallbackError
				require.ErrorAs(t, err, &first)
				assert.Equal(t, "bad", first.Callback)
				assert.Equal(t, "pipeline", first.Chain)
				assert.Equal(t, uint64(k), first.Seq)
				assert.Contains(t, err.Error(), `callback "bad" (chain "pipeline" #5)`)

				for i, f := range futs {
					seq := uint64(i + 1)
					_, err := f.Wait(ctx)
					switch {
					case seq < k:
						assert.NoError(t, err, "call %d", seq)
					case seq == k:
						assert.ErrorIs(t, err, bad.Kind)
					default:
						var ce *host.ChainError
						require.ErrorAs(t, err, &ce, "call %d", seq)
						assert.ErrorIs(t, err, host.ErrChainFailed)
						assert.ErrorIs(t, err, bad.Kind, "a skipped call's error wraps the first failure")
						assert.Equal(t, seq, ce.Seq)
						assert.Equal(t, "tap", ce.Callback)
						assert.Equal(t, uint64(k), ce.First.Seq)
					}
				}
				assert.Equal(t, int64(k-1), ran.Load(), "calls after #%d and the queued taps must not run", k)

				// Barrier again, and a call submitted after the failure: the
				// same first error, at once, and still nothing runs.
				start = time.Now()
				require.ErrorIs(t, ch.Barrier(bctx), bad.Kind)
				_, err = ch.Invoke(ctx, "tap", x)
				require.ErrorIs(t, err, host.ErrChainFailed)
				assert.Less(t, time.Since(start), time.Second)
				assert.Equal(t, int64(k-1), ran.Load())

				st, _ := h.PoolStats("bad")
				assert.Equal(t, 0, st.Live, "the hostile instance was discarded")

				// A new chain on the same host works.
				ch2 := h.NewChain("again")
				for i := 0; i < n; i++ {
					ch2.Tap(ctx, "tap", x)
				}
				require.NoError(t, ch2.Barrier(bctx))
				assert.Equal(t, int64(k-1+n), ran.Load())
				require.NoError(t, h.Close(ctx))
			})
		}
	})
}

// TestChainCancelMidChain: cancelling the caller's context while a chain's
// call spins (with a 30 s timeout) ends that call, skips the 60 calls and
// taps queued behind it, ends host-level taps on the same context, and
// lets every Barrier return, promptly (well within the 30 s timeout).
func TestChainCancelMidChain(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
		h, ran := chainHost(t, engine, caseNamed(t, "spin"), func(cb *config.Callback) { cb.Limits.Timeout = 30 * time.Second })
		defer h.Close(context.Background())
		x := abi.From([]float32{0, 1, 2, 3})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()

		ch := h.NewChain("cancel")
		firstTap := ch.Submit(ctx, "tap", x)
		spin := ch.Submit(ctx, "bad", x)
		var rest []*host.Future
		for i := 0; i < 40; i++ {
			rest = append(rest, ch.Submit(ctx, "tap", x))
		}
		for i := 0; i < 20; i++ {
			ch.Tap(ctx, "tap", x)
		}
		h.Tap(ctx, "bad", x) // two host-level taps spinning on their own instances
		h.Tap(ctx, "bad", x)

		_, err := firstTap.Wait(context.Background())
		require.NoError(t, err)
		// The chain's spin and the two host-level taps are running: three
		// instances of "bad" serving calls.
		require.Eventually(t, func() bool {
			st, _ := h.PoolStats("bad")
			return st.Live-st.Idle == 3
		}, 30*time.Second, time.Millisecond, "the three spinners started")
		start := time.Now()
		cancel()

		_, err = spin.Wait(context.Background())
		require.ErrorIs(t, err, host.Canceled)
		assert.ErrorIs(t, err, context.Canceled)
		for _, f := range rest {
			_, err := f.Wait(context.Background())
			require.ErrorIs(t, err, host.ErrChainFailed)
		}
		require.ErrorIs(t, ch.Barrier(context.Background()), host.Canceled)
		require.ErrorIs(t, h.Barrier(context.Background()), host.Canceled)
		elapsed := time.Since(start)
		// Promptly: far below the spin's 30 s timeout (a generous bound for a
		// loaded machine; the kinds above show what ended it).
		assert.Less(t, elapsed, 10*time.Second, "everything must end promptly after cancel")
		assert.Equal(t, int64(1), ran.Load(), "only the call before the spin ran")

		st, _ := h.PoolStats("bad")
		assert.Equal(t, 0, st.Live, "every cancelled instance was discarded")
		assert.Equal(t, uint64(3), st.Discarded)

		// The host, and a new chain, keep working.
		ch2 := h.NewChain("after")
		_, err = ch2.Invoke(context.Background(), "tap", x)
		require.NoError(t, err)
		require.NoError(t, h.Close(context.Background()))
	})
}

// TestHostTapsUnderHostileFailure: fire-and-forget taps, some hostile,
// on one host: Barrier returns one of the failures, never hangs, then
// clears; the healthy taps all ran.
func TestHostTapsUnderHostileFailure(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
		h, ran := chainHost(t, engine, caseNamed(t, "div_by_zero"), nil)
		defer h.Close(context.Background())
		ctx := context.Background()
		x := abi.From([]float32{0, 1, 2, 3})
		for i := 0; i < 30; i++ {
			if i%5 == 2 {
				h.Tap(ctx, "bad", x)
			} else {
				h.Tap(ctx, "tap", x)
			}
		}
		bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		err := h.Barrier(bctx)
		require.ErrorIs(t, err, host.DivideByZero)
		var ce *host.CallbackError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, "bad", ce.Callback)
		assert.Equal(t, int64(24), ran.Load())
		require.NoError(t, h.Barrier(bctx))
		require.NoError(t, h.Close(ctx))
	})
}

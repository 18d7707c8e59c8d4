package host_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
)

// countingHandler counts guest log records: the testkit's tap callback logs
// once per call, a side effect the test can count.
type countingHandler struct {
	slog.Handler
	n *atomic.Int64
}

func (c countingHandler) Handle(_ context.Context, r slog.Record) error {
	if text, _ := host.GuestLogText(r); text == "scaling" {
		c.n.Add(1)
	}
	return nil
}
func (c countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (c countingHandler) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c countingHandler) WithGroup(string) slog.Handler            { return c }

func TestChainRunsInOrder(t *testing.T) {
	forEnginesAndProcess(t, func(t *testing.T, engine string) {
		h := newHost(t, engine, nil)
		ctx := context.Background()
		ch := h.NewChain("order")
		x := abi.From([]float32{1})
		var futs []*host.Future
		for i := 1; i <= 20; i++ {
			futs = append(futs, ch.Submit(ctx, "scale", x, abi.Scalar(float32(i))))
		}
		for i, f := range futs {
			outs, err := f.Wait(ctx)
			require.NoError(t, err)
			assert.Equal(t, float32(i+1), abi.MustView[float32](outs[0])[0])
			assert.Equal(t, uint64(i+1), f.Seq())
		}
		require.NoError(t, ch.Barrier(ctx))
	})
}

func TestChainFailureSkipsLaterCalls(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		var ran atomic.Int64
		logger := slog.New(countingHandler{Handler: slog.DiscardHandler, n: &ran})
		h, err := host.New(context.Background(), nil, host.WithLogger(logger))
		require.NoError(t, err)
		defer h.Close(context.Background())
		for _, name := range []string{"tap", "spin", "scale"} {
			cb := config.DefaultCallback()
			cb.Name, cb.Signature, cb.Engine = name, testkitSigs[name], engine
			cb.Limits.Timeout = 50 * time.Millisecond
			require.NoError(t, h.LoadModule(context.Background(), cb, testkitWasm(t)))
		}
		ctx := context.Background()
		ch := h.NewChain("pipeline")
		x := abi.From([]float32{1})
		const n, k = 10, 4
		var futs []*host.Future
		for i := 1; i <= n; i++ {
			name := "tap"
			if i == k {
				name = "spin"
			}
			futs = append(futs, ch.Submit(ctx, name, x))
		}
		ch.Tap(ctx, "tap", x)
		err = ch.Barrier(ctx)
		require.ErrorIs(t, err, host.Timeout)
		var first *host.CallbackError
		require.ErrorAs(t, err, &first)
		assert.Equal(t, "spin", first.Callback)
		assert.Equal(t, uint64(k), first.Seq)
		assert.Equal(t, "pipeline", first.Chain)

		for i, f := range futs {
			_, err := f.Wait(ctx)
			switch seq := i + 1; {
			case seq < k:
				assert.NoError(t, err)
			case seq == k:
				assert.ErrorIs(t, err, host.Timeout)
			default:
				require.ErrorIs(t, err, host.ErrChainFailed)
				var ce *host.ChainError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, uint64(seq), ce.Seq)
				assert.Equal(t, uint64(k), ce.First.Seq)
				assert.ErrorIs(t, err, host.Timeout, "a skipped call's error wraps the first failure")
			}
		}
		// Side-effect counter: calls k+1..n and the tap never ran.
		assert.Equal(t, int64(k-1), ran.Load())

		// A new chain on the same host works.
		ch2 := h.NewChain("again")
		_, err = ch2.Invoke(ctx, "scale", x, abi.Scalar[float32](3))
		require.NoError(t, err)
		_, err = ch2.Invoke(ctx, "tap", x)
		require.NoError(t, err)
		assert.Equal(t, int64(k), ran.Load())
	})
}

func TestChainCancellationEndsPromptly(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		h := newHost(t, engine, func(cb *config.Callback) { cb.Limits.Timeout = 30 * time.Second })
		ctx, cancel := context.WithCancel(context.Background())
		ch := h.NewChain("cancel")
		x := abi.From([]float32{1})
		spin := ch.Submit(ctx, "spin", x)
		after := ch.Submit(ctx, "scale", x, abi.Scalar[float32](1))
		time.AfterFunc(20*time.Millisecond, cancel)
		start := time.Now()
		_, err := spin.Wait(context.Background())
		require.ErrorIs(t, err, host.Canceled)
		assert.ErrorIs(t, err, context.Canceled)
		_, err = after.Wait(context.Background())
		require.ErrorIs(t, err, host.ErrChainFailed)
		assert.Less(t, time.Since(start), 2*time.Second)
		require.Error(t, ch.Barrier(context.Background()))
	})
}

func TestBarrierHonoursContext(t *testing.T) {
	h := newHost(t, config.EngineWazero, func(cb *config.Callback) { cb.Limits.Timeout = 300 * time.Millisecond })
	ch := h.NewChain("slow")
	ch.Tap(context.Background(), "spin", abi.From([]float32{1}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := ch.Barrier(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// The tap itself ends at its own timeout; a later barrier reports it.
	err = ch.Barrier(context.Background())
	require.ErrorIs(t, err, host.Timeout)
}

func TestHostTapsAndBarrier(t *testing.T) {
	forEnginesAndProcess(t, func(t *testing.T, engine string) {
		ran := &concurrency{Handler: slog.DiscardHandler} // counts tap's log lines
		ctx := context.Background()
		h := newHostLogged(t, ctx, engine, nil, slog.New(ran))
		for i := 0; i < 10; i++ {
			h.Tap(ctx, "tap", abi.From([]float32{float32(i)}))
		}
		require.NoError(t, h.Barrier(ctx))
		assert.EqualValues(t, 10, ran.lines.Load(), "the barrier returned after every tap ran, each once")
		h.Tap(ctx, "bad_status", abi.From([]float32{1}))
		h.Tap(ctx, "tap", abi.From([]float32{1}))
		err := h.Barrier(ctx)
		require.ErrorIs(t, err, host.ABIViolation)
		require.NoError(t, h.Barrier(ctx), "a barrier clears the error it reported")
	})
}

func TestChainUnknownCallbackFailsChain(t *testing.T) {
	h := newHost(t, config.EngineWazero, nil)
	ch := h.NewChain("typo")
	_, err := ch.Invoke(context.Background(), "scael", abi.From([]float32{1}))
	require.ErrorIs(t, err, host.ErrUnknownCallback)
	_, err = ch.Invoke(context.Background(), "scale", abi.From([]float32{1}), abi.Scalar[float32](1))
	require.True(t, errors.Is(err, host.ErrChainFailed))
}

// A call queued behind a long one on a chain honours its own context:
// cancelled before its turn, it returns Canceled at once (not when the
// call ahead ends), its outputs untouched, and in its turn it fails the
// chain without running.
func TestChainQueuedCallHonoursItsContext(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		h := newHost(t, engine, func(cb *config.Callback) { cb.Limits.Timeout = 30 * time.Second })
		ch := h.NewChain("queued")
		x := abi.From([]float32{1, 2})
		spinCtx, stopSpin := context.WithCancel(context.Background())
		defer stopSpin()
		spin := ch.Submit(spinCtx, "spin", x)
		require.Eventually(t, func() bool {
			st, _ := h.PoolStats("spin")
			return st.Live-st.Idle == 1
		}, 30*time.Second, time.Millisecond, "the spin started")

		ctx, cancel := context.WithCancel(context.Background())
		out := abi.From([]float32{7, 7})
		done := make(chan error, 1)
		go func() {
			_, err := ch.InvokeInto(ctx, "scale", []host.Tensor{x, abi.Scalar[float32](2)}, []host.Tensor{out})
			done <- err
		}()
		cancel()
		select {
		case err := <-done:
			require.ErrorIs(t, err, host.Canceled)
			assert.ErrorIs(t, err, context.Canceled)
			assert.Contains(t, err.Error(), "canceled while waiting for its turn on the chain")
		case <-time.After(10 * time.Second):
			t.Fatal("the cancelled call waited for the 30 s spin ahead of it")
		}
		assert.Equal(t, []float32{7, 7}, abi.MustView[float32](out), "a call that never ran wrote nothing")

		stopSpin()
		_, err := spin.Wait(context.Background())
		require.ErrorIs(t, err, host.Canceled)
		var ce *host.CallbackError
		require.ErrorAs(t, ch.Barrier(context.Background()), &ce)
		assert.Equal(t, "spin", ce.Callback, "the chain's first failure is the spin")
		assert.Error(t, ch.Reset(), "Reset returns the failure it cleared")
	})
}

// Steps submitted while a chain's synchronous call runs on its caller's
// goroutine (the idle path) queue behind it, and run once it is over,
// with nothing else to start them.
func TestChainStepsQueuedDuringASynchronousCallRun(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ran := &concurrency{Handler: slog.DiscardHandler} // counts tap's log lines
		ctx := context.Background()
		h := newHostLogged(t, ctx, engine, nil, slog.New(ran))
		ch := h.NewChain("idle-path")
		done := make(chan error, 1)
		go func() {
			// busy(n): tens of milliseconds of guest work on the caller's goroutine
			_, err := ch.Invoke(ctx, "busy", abi.Scalar[int32](50_000_000))
			done <- err
		}()
		require.Eventually(t, func() bool {
			st, _ := h.PoolStats("busy")
			return st.Live > st.Idle
		}, 30*time.Second, time.Millisecond, "the synchronous call is running")
		for i := range 3 {
			ch.Submit(ctx, "tap", abi.From([]float32{float32(i)}))
		}
		require.NoError(t, <-done)
		// They run on their own, with no later call or barrier to start
		// them.
		require.Eventually(t, func() bool { return ran.lines.Load() == 3 }, 20*time.Second, time.Millisecond,
			"the steps queued behind the synchronous call never ran")
		require.NoError(t, ch.Barrier(ctx))
	})
}

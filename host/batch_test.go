package host_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
)

// parallelHost is newHost with batching parallel and a pool of instances.
func parallelHost(t testing.TB, engine string, instances int, tweak func(*config.Callback)) *host.Host {
	return newHost(t, engine, func(cb *config.Callback) {
		cb.Batching = config.BatchingParallel
		cb.MaxInstances = instances
		if tweak != nil {
			tweak(cb)
		}
	})
}

// scaleBatch is a batch of b scale calls of n elements each: x, factors
// and the outputs, filled with a sentinel.
func scaleBatch(b, n int, seed uint64) (x, f, out host.Tensor) {
	r := rand.New(rand.NewPCG(seed, 1))
	xs := make([]float32, b*n)
	for i := range xs {
		xs[i] = r.Float32()*200 - 100
	}
	fs := make([]float32, b)
	for i := range fs {
		fs[i] = r.Float32()*4 + 0.5
	}
	os := make([]float32, b*n)
	for i := range os {
		os[i] = -12345
	}
	return abi.From(xs, int64(b), int64(n)), abi.From(fs, int64(b)), abi.From(os, int64(b), int64(n))
}

func TestBatchMatchesOneCallPerElement(t *testing.T) {
	forEnginesAndProcess(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		par := parallelHost(t, engine, 4, nil)
		seq := newHost(t, engine, nil)
		const b, n = 37, 1000
		x, f, out := scaleBatch(b, n, 7)
		st, err := invokeBatchInto(ctx, par, "scale", []host.Tensor{x, f}, []host.Tensor{out})
		require.NoError(t, err)
		assert.Equal(t, uint64(b*(4*n+4)), st.BytesIn)
		assert.Equal(t, uint64(b*4*n), st.BytesOut)

		// The same batch through a sequential callback, and as b calls.
		_, _, seqOut := scaleBatch(b, n, 7)
		_, err = invokeBatchInto(ctx, seq, "scale", []host.Tensor{x, f}, []host.Tensor{seqOut})
		require.NoError(t, err)
		assert.Equal(t, out.Data, seqOut.Data)
		xs, fs, got := abi.MustView[float32](x), abi.MustView[float32](f), abi.MustView[float32](out)
		for i := range b {
			one, err := seq.Invoke(ctx, "scale", abi.From(xs[i*n:(i+1)*n]), abi.Scalar(fs[i]))
			require.NoError(t, err)
			require.Equal(t, abi.MustView[float32](one[0]), got[i*n:(i+1)*n], "element %d", i)
		}

		// InvokeBatch allocates the same result.
		outs, err := invokeBatch(ctx, par, "scale", x, f)
		require.NoError(t, err)
		require.Len(t, outs, 1)
		assert.Equal(t, abi.Shape{b, n}, outs[0].Shape)
		assert.Equal(t, out.Data, outs[0].Data)
	})
}

func TestBatchPassThroughAndEmpty(t *testing.T) {
	h := parallelHost(t, config.EngineWazero, 2, nil)
	ctx := context.Background()
	x := abi.From([]float32{1, 2, 3, 4, 5, 6}, 3, 2)
	out := abi.From(make([]float32, 6), 3, 2)
	_, err := invokeBatchInto(ctx, h, "tap", []host.Tensor{x}, []host.Tensor{out})
	require.NoError(t, err)
	assert.Equal(t, x.Data, out.Data, "a pass-through result is its input")

	// B = 0: nothing runs, nothing fails.
	st, err := invokeBatchInto(ctx, h, "scale", []host.Tensor{abi.From([]float32{}, 0, 4), abi.From([]float32{}, 0)},
		[]host.Tensor{abi.From([]float32{}, 0, 4)})
	require.NoError(t, err)
	assert.Zero(t, st.BytesIn)
}

func TestBatchRefusals(t *testing.T) {
	h := parallelHost(t, config.EngineWazero, 2, nil)
	ctx := context.Background()
	x, f, out := scaleBatch(4, 8, 1)
	for name, tc := range map[string]struct {
		in, out []host.Tensor
		want    string
	}{
		"no inputs":        {nil, []host.Tensor{out}, "at least one input"},
		"scalar input":     {[]host.Tensor{x, abi.Scalar[float32](2)}, []host.Tensor{out}, "no leading batch dimension"},
		"batch sizes":      {[]host.Tensor{x, abi.From(make([]float32, 3), 3)}, []host.Tensor{out}, "batch size 3, input 0 has 4"},
		"short data":       {[]host.Tensor{{DType: abi.F32, Shape: abi.Shape{4, 8}, Data: x.Data[:100]}, f}, []host.Tensor{out}, "needs 4 x 32 bytes"},
		"output shape":     {[]host.Tensor{x, f}, []host.Tensor{abi.From(make([]float32, 32), 32)}, "output 0: buffer is f32[32], result is f32[4,8]"},
		"output count":     {[]host.Tensor{x, f}, []host.Tensor{}, "got 0 output buffers"},
		"element mismatch": {[]host.Tensor{x, abi.From(make([]float32, 8), 4, 2)}, []host.Tensor{out}, "argument 1"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := invokeBatchInto(ctx, h, "scale", tc.in, tc.out)
			require.Error(t, err)
			assert.ErrorIs(t, err, host.InvalidArgument)
			assert.ErrorContains(t, err, tc.want)
			var ce *host.CallbackError
			require.ErrorAs(t, err, &ce)
			assert.Zero(t, ce.BatchSize, "a refused batch is no element's failure")
		})
	}
	assert.Equal(t, []float32{-12345, -12345}, abi.MustView[float32](out)[:2], "refused: output untouched")
}

// A failing element fails the batch with its index: the lowest failing
// index, every time, and the outputs keep every byte they had.
func TestBatchFailingElement(t *testing.T) {
	forEnginesAndProcess(t, func(t *testing.T, engine string) {
		for _, rule := range []string{config.BatchingParallel, config.BatchingSequential} {
			t.Run(rule, func(t *testing.T) {
				h := newHost(t, engine, func(cb *config.Callback) { cb.Batching, cb.MaxInstances = rule, 4 })
				ctx := context.Background()
				const b, n = 24, 256
				for trial := range 5 {
					x, f, out := scaleBatch(b, n, uint64(trial))
					fs := abi.MustView[float32](f)
					fs[9], fs[17] = -1, -2 // scale refuses a negative factor
					before := append([]byte(nil), out.Data...)
					_, err := invokeBatchInto(ctx, h, "scale", []host.Tensor{x, f}, []host.Tensor{out})
					require.Error(t, err)
					var ce *host.CallbackError
					require.ErrorAs(t, err, &ce)
					assert.Equal(t, 9, ce.Element)
					assert.Equal(t, b, ce.BatchSize)
					assert.ErrorIs(t, err, host.GuestError)
					assert.Equal(t, "negative factor", ce.GuestMessage)
					assert.Contains(t, err.Error(), "(batch element 9 of 24)")
					require.Equal(t, before, out.Data, "a failed batch writes no output")
				}
				// The host keeps serving: the same batch without the bad
				// factors succeeds.
				x, f, out := scaleBatch(b, n, 99)
				_, err := invokeBatchInto(ctx, h, "scale", []host.Tensor{x, f}, []host.Tensor{out})
				require.NoError(t, err)
			})
		}
	})
}

// Limits apply to each element: one element that runs past the timeout
// fails the batch as a Timeout naming it; a fuel budget that every element
// fits but the batch as a whole does not is no failure.
func TestBatchLimitsPerElement(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		h := parallelHost(t, engine, 2, func(cb *config.Callback) { cb.Limits.Timeout = 300 * time.Millisecond })
		ns := make([]int32, 8)
		for i := range ns {
			ns[i] = 1000
		}
		ns[5] = 1 << 30 // far past 300ms on either engine
		out := abi.From(make([]int32, 8), 8)
		_, err := invokeBatchInto(ctx, h, "busy", []host.Tensor{abi.From(ns, 8)}, []host.Tensor{out})
		require.Error(t, err)
		assert.ErrorIs(t, err, host.Timeout)
		var ce *host.CallbackError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, 5, ce.Element)
		assert.Equal(t, make([]byte, 32), out.Data)

		// Fuel: measure one element, then give each exactly that budget.
		one := newHost(t, engine, func(cb *config.Callback) { cb.Limits.Fuel = config.MaxFuel })
		_, st, err := invokeStats(ctx, one, "busy", abi.Scalar[int32](50000))
		require.NoError(t, err)
		require.True(t, st.FuelKnown)
		fuel := st.Fuel
		fh := parallelHost(t, engine, 2, func(cb *config.Callback) { cb.Limits.Fuel = fuel })
		for i := range ns {
			ns[i] = 50000
		}
		bst, err := invokeBatchInto(ctx, fh, "busy", []host.Tensor{abi.From(ns, 8)}, []host.Tensor{out})
		require.NoError(t, err, "every element fits the budget; the batch uses 8 times it")
		assert.Equal(t, 8*fuel, bst.Fuel)
		ns[3] = 50001 * 2
		_, err = invokeBatchInto(ctx, fh, "busy", []host.Tensor{abi.From(ns, 8)}, []host.Tensor{out})
		assert.ErrorIs(t, err, host.FuelExhausted)
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, 3, ce.Element)
	})
}

// concurrency counts the guest log lines being handled at once: the tap
// callback logs once per call, on the calling goroutine.
type concurrency struct {
	slog.Handler
	now, peak atomic.Int32
	lines     atomic.Int32
}

func (c *concurrency) Handle(ctx context.Context, r slog.Record) error {
	if text, _ := host.GuestLogText(r); text == "scaling" {
		c.lines.Add(1)
		n := c.now.Add(1)
		for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
		}
		time.Sleep(5 * time.Millisecond)
		c.now.Add(-1)
	}
	return nil
}

func (c *concurrency) Enabled(context.Context, slog.Level) bool { return true }
func (c *concurrency) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *concurrency) WithGroup(string) slog.Handler            { return c }

// concurrencyHost loads tap with the batching rule and pool size given,
// logging through a concurrency counter.
func concurrencyHost(t *testing.T, rule string, instances int) (*host.Host, *concurrency) {
	ctx := context.Background()
	cc := &concurrency{Handler: slog.DiscardHandler}
	h, err := host.New(ctx, nil, host.WithLogger(slog.New(cc)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close(ctx) })
	cb := config.DefaultCallback()
	cb.Name, cb.Export, cb.Signature, cb.Engine = "tap", "tap", testkitSigs["tap"], config.EngineWazero
	cb.Limits.Timeout, cb.Limits.MaxMemory = 5*time.Second, 1<<20
	cb.Batching, cb.MaxInstances = rule, instances
	require.NoError(t, h.LoadModule(ctx, cb, testkitWasm(t)))
	return h, cc
}

// The elements in flight never exceed the pool and GOMAXPROCS; a
// sequential rule and a chain run one at a time.
func TestBatchConcurrencyBound(t *testing.T) {
	ctx := context.Background()
	x := abi.From(make([]float32, 64*4), 64, 4)
	out := abi.From(make([]float32, 64*4), 64, 4)
	for _, tc := range []struct {
		rule      string
		instances int
		chain     bool
		want      int
	}{
		{config.BatchingParallel, 2, false, min(2, runtime.GOMAXPROCS(0))},
		{config.BatchingParallel, 64, false, runtime.GOMAXPROCS(0)},
		{config.BatchingSequential, 8, false, 1},
		{config.BatchingParallel, 8, true, 1},
	} {
		h, cc := concurrencyHost(t, tc.rule, tc.instances)
		c, err := h.Lookup("tap")
		require.NoError(t, err)
		if !tc.chain {
			assert.Equal(t, tc.want, c.BatchParallelism())
		}
		if tc.chain {
			_, err = chainBatchInto(ctx, h, h.Chain("c"), "tap", []host.Tensor{x}, []host.Tensor{out})
		} else {
			_, err = invokeBatchInto(ctx, h, "tap", []host.Tensor{x}, []host.Tensor{out})
		}
		require.NoError(t, err)
		assert.Equal(t, int32(64), cc.lines.Load(), "one call per element")
		assert.LessOrEqual(t, int(cc.peak.Load()), tc.want, "%+v", tc)
		if tc.want > 1 {
			// 64 elements of 5ms each on want workers: they overlap.
			assert.Greater(t, int(cc.peak.Load()), 1, "%+v", tc)
		}
		st, _ := h.PoolStats("tap")
		assert.LessOrEqual(t, st.Live, max(tc.want, 1))
	}
}

// A chain's batched call runs its elements in order and fails the chain
// at the first failing element.
func TestChainBatch(t *testing.T) {
	h := parallelHost(t, config.EngineWazero, 4, nil)
	ctx := context.Background()
	ch := h.NewChain("effects")
	x, f, out := scaleBatch(6, 16, 3)
	_, err := chainBatchInto(ctx, h, ch, "scale", []host.Tensor{x, f}, []host.Tensor{out})
	require.NoError(t, err)
	abi.MustView[float32](f)[2] = -1
	before := append([]byte(nil), out.Data...)
	_, err = chainBatchInto(ctx, h, ch, "scale", []host.Tensor{x, f}, []host.Tensor{out})
	var ce *host.CallbackError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 2, ce.Element)
	assert.Equal(t, "effects", ce.Chain)
	assert.Equal(t, uint64(2), ce.Seq)
	assert.Equal(t, before, out.Data)
	_, err = chainBatchInto(ctx, h, ch, "scale", []host.Tensor{x, f}, []host.Tensor{out})
	assert.ErrorIs(t, err, host.ErrChainFailed)
}

// Many batches at once from many goroutines share the pool (run with
// -race).
func TestBatchConcurrentCallers(t *testing.T) {
	h := parallelHost(t, config.EngineWazero, 3, nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for g := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x, f, out := scaleBatch(20, 64, uint64(g))
			if g%2 == 1 {
				abi.MustView[float32](f)[g] = -1
			}
			_, err := invokeBatchInto(ctx, h, "scale", []host.Tensor{x, f}, []host.Tensor{out})
			var ce *host.CallbackError
			switch {
			case g%2 == 0 && err != nil:
				errs[g] = err
			case g%2 == 1 && (!errors.As(err, &ce) || ce.Element != g):
				errs[g] = errors.Join(errors.New("want element failure"), err)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		assert.NoError(t, err)
	}
	st, _ := h.PoolStats("scale")
	assert.LessOrEqual(t, st.Live, 3)
}

// A batch whose first element fails slowly, after the other worker ran
// its element and left: the batch fails naming element 0 (the finished
// worker's slot holds nothing to cancel).
func TestBatchSlowFirstFailureAfterTheOthersFinished(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		h := newHost(t, engine, func(cb *config.Callback) {
			cb.Batching, cb.MaxInstances = config.BatchingParallel, 2
			cb.Limits.Timeout = 200 * time.Millisecond
		})
		// busy(n) runs n rounds: element 0 far past the timeout, element 1 at once.
		rounds := abi.From([]int32{math.MaxInt32, 1}, 2)
		out := abi.From([]int32{-7, -7}, 2)
		_, err := invokeBatchInto(context.Background(), h, "busy", []host.Tensor{rounds}, []host.Tensor{out})
		var ce *host.CallbackError
		require.ErrorAs(t, err, &ce)
		assert.ErrorIs(t, err, host.Timeout)
		assert.Equal(t, 0, ce.Element)
		assert.Equal(t, []int32{-7, -7}, abi.MustView[int32](out), "a failed batch writes no output")
	})
}

// A batch whose output is its input (in place), or overlaps it one
// element on, still computes every element from its original input, and a
// failed one leaves the buffer as it was. A batch whose inputs and outputs are separate writes into the
// outputs as it goes, and a failure after elements have finished puts
// back every byte they wrote.
func TestBatchInPlaceAndRestore(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		for _, rule := range []string{config.BatchingParallel, config.BatchingSequential} {
			t.Run(rule, func(t *testing.T) {
				h := newHost(t, engine, func(cb *config.Callback) { cb.Batching, cb.MaxInstances = rule, 4 })
				ctx := context.Background()
				const b, n = 16, 300
				x, f, _ := scaleBatch(b, n, 5)
				orig := append([]float32(nil), abi.MustView[float32](x)...)
				fs := abi.MustView[float32](f)
				_, err := invokeBatchInto(ctx, h, "scale", []host.Tensor{x, f}, []host.Tensor{x})
				require.NoError(t, err)
				got := abi.MustView[float32](x)
				for i := range got {
					require.Equal(t, orig[i]*fs[i/n], got[i], "in place: value %d", i)
				}

				// Output i is input i+1's bytes: element i must not write
				// them before element i+1 has read its input.
				x, f, _ = scaleBatch(b+1, n, 8)
				xs := abi.MustView[float32](x)
				orig = append([]float32(nil), xs...)
				fs = abi.MustView[float32](f)[:b]
				in := abi.From(xs[:b*n], b, n)
				shifted := abi.From(xs[n:], b, n)
				_, err = invokeBatchInto(ctx, h, "scale", []host.Tensor{in, abi.From(fs, b)}, []host.Tensor{shifted})
				require.NoError(t, err)
				for i, v := range xs[n:] {
					require.Equal(t, orig[i]*fs[i/n], v, "shifted: value %d", i)
				}

				x, f, _ = scaleBatch(b, n, 6)
				before := append([]byte(nil), x.Data...)
				abi.MustView[float32](f)[b-1] = -1 // the last element fails
				_, err = invokeBatchInto(ctx, h, "scale", []host.Tensor{x, f}, []host.Tensor{x})
				require.Error(t, err)
				require.Equal(t, before, x.Data, "a failed in-place batch leaves its buffer as it was")

				// Separate outputs: every element but the last runs first.
				x, f, out := scaleBatch(b, n, 7)
				abi.MustView[float32](f)[b-1] = -1
				before = append([]byte(nil), out.Data...)
				_, err = invokeBatchInto(ctx, h, "scale", []host.Tensor{x, f}, []host.Tensor{out})
				var ce *host.CallbackError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, b-1, ce.Element)
				require.Equal(t, before, out.Data, "a failed batch puts back what its finished elements wrote")
			})
		}
	})
}

// The staging buffer a guarded batch reuses grows with the batch: a
// larger batch after a smaller one gets a buffer of its own size.
func TestBatchLargerAfterSmaller(t *testing.T) {
	h := parallelHost(t, config.EngineWazero, 2, nil)
	ctx := context.Background()
	for _, b := range []int{2, 16, 4, 64} {
		x, f, out := scaleBatch(b, 64, uint64(b))
		_, err := invokeBatchInto(ctx, h, "scale", []host.Tensor{x, f}, []host.Tensor{out})
		require.NoError(t, err, "batch of %d", b)
		xs, fs, got := abi.MustView[float32](x), abi.MustView[float32](f), abi.MustView[float32](out)
		for i := range got {
			require.Equal(t, xs[i]*fs[i/64], got[i], "batch of %d, value %d", b, i)
		}
	}
}

// The batch size is checked before anything runs: 2^31-1 elements pass
// the size check (the call is then refused for its second input's data),
// 2^31 do not; and a batch whose byte size overflows is refused, not
// wrapped.
func TestBatchSizeBounds(t *testing.T) {
	h := newHost(t, config.EngineWazero, nil)
	ctx := context.Background()
	empty := func(shape ...int64) host.Tensor {
		return host.Tensor{DType: abi.F32, Shape: shape}
	}
	_, err := invokeBatchInto(ctx, h, "scale", []host.Tensor{empty(math.MaxInt32, 0), empty(math.MaxInt32)}, nil)
	require.ErrorIs(t, err, host.InvalidArgument)
	assert.NotContains(t, err.Error(), "out of range", "2^31-1 elements is a batch size in range")
	assert.Contains(t, err.Error(), "argument 1: f32[2147483647] needs 2147483647 x 4 bytes", "refused for the factors' data, after the size check")
	_, err = invokeBatchInto(ctx, h, "scale", []host.Tensor{empty(math.MaxInt32+1, 0), empty(math.MaxInt32 + 1)}, nil)
	require.ErrorIs(t, err, host.InvalidArgument)
	assert.Contains(t, err.Error(), "batch size 2147483648 is out of range")
	// 2^24 elements of 2^38 floats: 2^64 bytes, which wraps to 0 in
	// 64 bits, as long as the (empty) data given.
	_, err = invokeBatchInto(ctx, h, "scale", []host.Tensor{empty(1<<24, 1<<38), empty(1 << 24)}, nil)
	require.ErrorIs(t, err, host.InvalidArgument)
	assert.Contains(t, err.Error(), "needs 16777216 x 1099511627776 bytes of data, has 0")
}

// The plan cached for one call's input types is never taken for another
// call's: a dtype or an input count that differs is refused as on a first
// call, after calls the cache served, for plain calls, batches and a
// session's calls alike.
func TestCachedPlanNeverServesOtherTypes(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		h := newHost(t, engine, func(cb *config.Callback) { cb.MaxInstances = 1 })
		ctx := context.Background()
		f := abi.Scalar[float32](2)
		for range 2 {
			outs, err := h.Invoke(ctx, "scale", abi.From([]float32{1, 2, 3, 4}), f)
			require.NoError(t, err)
			assert.Equal(t, []float32{2, 4, 6, 8}, abi.MustView[float32](outs[0]))
		}
		_, err := h.Invoke(ctx, "scale", abi.From([]int32{1, 2, 3, 4}), f)
		require.ErrorIs(t, err, host.InvalidArgument, "s32[4] after f32[4]")
		for range 2 {
			_, err = h.Invoke(ctx, "tap", abi.From([]float32{1, 2, 3, 4}))
			require.NoError(t, err)
		}
		_, err = h.Invoke(ctx, "tap", abi.From([]int32{1, 2, 3, 4}))
		require.ErrorIs(t, err, host.InvalidArgument, "tap's one input, s32[4] after f32[4]")

		xs := abi.From([]float32{1, 2, 3, 4}, 2, 2)
		fs := abi.From([]float32{1, 10}, 2)
		for range 2 {
			outs, err := invokeBatch(ctx, h, "scale", xs, fs)
			require.NoError(t, err)
			assert.Equal(t, []float32{1, 2, 30, 40}, abi.MustView[float32](outs[0]))
		}
		_, err = invokeBatch(ctx, h, "scale", abi.From([]int32{1, 2, 3, 4}, 2, 2), fs)
		require.ErrorIs(t, err, host.InvalidArgument, "a batch of s32 after one of f32")
		_, err = invokeBatch(ctx, h, "scale", xs, fs, fs)
		require.ErrorIs(t, err, host.InvalidArgument, "three inputs after two")
		assert.NotErrorIs(t, err, host.HostPanic)
		for range 2 {
			_, err = invokeBatch(ctx, h, "tap", xs)
			require.NoError(t, err)
		}
		_, err = invokeBatch(ctx, h, "tap", abi.From([]int32{1, 2, 3, 4}, 2, 2))
		require.ErrorIs(t, err, host.InvalidArgument, "a batch of tap's one input, s32 after f32")

		// A session's plan (its input in guest memory) and a plain call's
		// of the same types stay apart.
		s, err := h.NewSession(ctx, "scale")
		require.NoError(t, err)
		x, err := s.Alloc(ctx, abi.F32, 4)
		require.NoError(t, err)
		copy(abi.MustView[float32](x), []float32{5, 6, 7, 8})
		outs, _, err := s.Invoke(ctx, x, f)
		require.NoError(t, err)
		assert.Equal(t, []float32{10, 12, 14, 16}, abi.MustView[float32](outs[0]))
		s.Release(ctx)
		outs, err = h.Invoke(ctx, "scale", abi.From([]float32{1, 1, 1, 1}), f)
		require.NoError(t, err)
		assert.Equal(t, []float32{2, 2, 2, 2}, abi.MustView[float32](outs[0]))
		// and a batch whose elements have the session's types
		s, err = h.NewSession(ctx, "scale")
		require.NoError(t, err)
		y, err := s.Alloc(ctx, abi.F32, 4)
		require.NoError(t, err)
		_, _, err = s.Invoke(ctx, y, f)
		require.NoError(t, err)
		s.Release(ctx)
		outs, err = invokeBatch(ctx, h, "scale", abi.From([]float32{1, 2, 3, 4}, 1, 4), abi.From([]float32{3}, 1))
		require.NoError(t, err)
		assert.Equal(t, []float32{3, 6, 9, 12}, abi.MustView[float32](outs[0]))
	})
}

package host_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
)

// The tests' shorthands for the requests they make most, each a Do.

func invokeStats(ctx context.Context, h *host.Host, name string, inputs ...host.Tensor) ([]host.Tensor, host.Stats, error) {
	req := host.Request{Callback: name, Inputs: inputs}
	st, err := h.Do(ctx, &req)
	return req.Outputs, st, err
}

func invokeBatchInto(ctx context.Context, h *host.Host, name string, inputs, outputs []host.Tensor) (host.Stats, error) {
	return h.Do(ctx, &host.Request{Callback: name, Inputs: inputs, Outputs: outputs, Batch: true})
}

func invokeBatch(ctx context.Context, h *host.Host, name string, inputs ...host.Tensor) ([]host.Tensor, error) {
	req := host.Request{Callback: name, Inputs: inputs, Batch: true}
	_, err := h.Do(ctx, &req)
	return req.Outputs, err
}

func chainBatchInto(ctx context.Context, h *host.Host, ch *host.Chain, name string, inputs, outputs []host.Tensor) (host.Stats, error) {
	return h.Do(ctx, &host.Request{Callback: name, Inputs: inputs, Outputs: outputs, Batch: true, Chain: ch.Name()})
}

func invokeIntoWithin(ctx context.Context, c *host.Callback, budget time.Duration, inputs, outputs []host.Tensor) (host.Stats, error) {
	return c.Do(ctx, &host.Request{Inputs: inputs, Outputs: outputs, Budget: budget})
}

// A Request's own terms are checked by Do, the one owner, on every path:
// a negative budget, one past config.MaxTimeout, and a budget on a batch
// are refused as InvalidArgument before anything runs; 0 is no budget.
// Outputs nil allocates them and sets Outputs; given outputs are written.
// A chained request runs in the chain, and a refused or failed one fails
// it.
func TestRequestTerms(t *testing.T) {
	ctx := context.Background()
	h := newHost(t, config.EngineWazero, nil)
	x, f := abi.From([]float32{1, 2, 3}), abi.Scalar[float32](2)
	sc, err := h.Lookup("scale")
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		req  host.Request
		msg  string
	}{
		{"negative budget", host.Request{Budget: -time.Nanosecond}, "budget -1ns: give a budget from 1ns to 1h0m0s, or none"},
		{"budget past the bound", host.Request{Budget: config.MaxTimeout + 1}, "give a budget from 1ns to 1h0m0s"},
		{"budget on a batch", host.Request{Budget: time.Second, Batch: true}, "a batched call takes no budget"},
		{"budget on a chained batch", host.Request{Budget: time.Second, Batch: true, Chain: "terms"}, "a batched call takes no budget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			untouched := []float32{9, 9, 9}
			req := tc.req
			req.Callback, req.Inputs, req.Outputs = "scale", []host.Tensor{x, f}, []host.Tensor{abi.From(untouched)}
			_, err := h.Do(ctx, &req)
			require.Error(t, err)
			assert.Equal(t, host.InvalidArgument, abi.KindOf(err), "%v", err)
			assert.ErrorContains(t, err, tc.msg)
			assert.ErrorContains(t, err, `"scale"`, "the error names the callback")
			assert.Equal(t, []float32{9, 9, 9}, untouched)
			_, err = sc.Do(ctx, &req)
			assert.ErrorContains(t, err, tc.msg, "Callback.Do checks the same")
		})
	}
	assert.ErrorContains(t, h.Chain("terms").Reset(), "a batched call takes no budget", "a refused chained request fails its chain, as a refused chained call does")

	req := host.Request{Callback: "scale", Inputs: []host.Tensor{x, f}}
	st, err := h.Do(ctx, &req)
	require.NoError(t, err)
	require.Len(t, req.Outputs, 1)
	assert.Equal(t, []float32{2, 4, 6}, abi.MustView[float32](req.Outputs[0]))
	assert.Equal(t, uint64(12), st.BytesOut)

	out := make([]float32, 3)
	_, err = sc.Do(ctx, &host.Request{Callback: "ignored", Inputs: []host.Tensor{x, f}, Outputs: []host.Tensor{abi.From(out)}, Budget: time.Second})
	require.NoError(t, err)
	assert.Equal(t, []float32{2, 4, 6}, out)

	// Chained: in order, and a failure fails the chain until Reset.
	for _, do := range []func(*host.Request) (host.Stats, error){
		func(r *host.Request) (host.Stats, error) { return h.Do(ctx, r) },
		func(r *host.Request) (host.Stats, error) { return sc.Do(ctx, r) },
	} {
		req := host.Request{Callback: "scale", Inputs: []host.Tensor{x, f}, Chain: "c"}
		_, err = do(&req)
		require.NoError(t, err)
		assert.Equal(t, []float32{2, 4, 6}, abi.MustView[float32](req.Outputs[0]))
		bad := host.Request{Callback: "scale", Inputs: []host.Tensor{x}, Chain: "c", Budget: time.Second}
		_, err = do(&bad)
		assert.Equal(t, host.InvalidArgument, abi.KindOf(err), "%v", err)
		_, err = do(&req)
		var ce *host.ChainError
		require.ErrorAs(t, err, &ce, "the chain failed with the bad request")
		assert.ErrorContains(t, h.Chain("c").Reset(), "got 1 inputs")
	}
}

// A chained request's budget bounds it as an unordered one's does: a
// runaway step stops at the caller's deadline, not the callback's timeout.
func TestChainedRequestBudget(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		h := newHost(t, engine, func(cb *config.Callback) { cb.Limits.Timeout = 30 * time.Second })
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel() // a failure here never leaves the spin for Close to wait on
		done := make(chan error, 1)
		go func() {
			_, err := h.Do(ctx, &host.Request{Callback: "spin", Chain: "budgeted", Budget: 50 * time.Millisecond,
				Inputs: []host.Tensor{abi.From([]float32{1})}})
			done <- err
		}()
		select {
		case err := <-done:
			require.ErrorIs(t, err, host.Timeout)
			assert.ErrorIs(t, err, context.DeadlineExceeded, "the caller's budget ended it: %v", err)
		case <-time.After(20 * time.Second):
			t.Fatal("a chained request's 50 ms budget did not stop a 30 s spin")
		}
	})
}

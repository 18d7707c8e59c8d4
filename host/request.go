package host

import (
	"context"
	"fmt"
	"time"

	"github.com/seed4b3e0ccb/callbox/config"
)

// Request is one call as a value: the callback, its inputs, where its
// results go, and the caller's terms. Every way of calling callbox fills
// one in — the conveniences below, the C library, Python, Elixir and the
// XLA handlers — and Do runs it, so each check and derived fact (the
// outputs' fit, with a batch dimension; the budget's bounds; the deadline,
// the earliest of the callback's timeout, the budget and ctx; the batching
// rule; the output types) has one owner.
//
// Host and Callback make calls three ways: Host.Do and Callback.Do (the
// latter on a callback resolved once: the hot path of a caller that calls
// one callback many times) run a Request, and Host.Invoke is Do with
// Callback and Inputs set, returning the outputs. Callback.Start steps
// through a call's phases (the GPU path and the XLA handlers).
type Request struct {
	// Callback is the callback's name or content id. Callback.Do ignores
	// it.
	Callback string
	// Inputs are the call's inputs, as the signature takes them (with
	// Batch, each with the batch dimension in front).
	Inputs []Tensor
	// Outputs, when not nil, receive the results: one tensor per result,
	// of the dtype and shape the signature derives (with Batch, the batch
	// dimension in front), its bytes written only if the call succeeds.
	// When nil, Do allocates them and sets Outputs; a result that passes
	// an input through is then that input tensor itself.
	Outputs []Tensor
	// Batch makes the call a batched one: every input and output has a
	// leading batch dimension B, and the callback runs once per element,
	// as its batching rule says (in a chain, in order). Stats then sum the
	// elements' (Wall is the whole batch's), and a failure names the
	// element. A batch takes no Budget.
	Batch bool
	// Budget, when positive, is the caller's limit on the call, at most
	// config.MaxTimeout: when it passes after the call began and before
	// the callback's own timeout, the call stops there, as the engines
	// stop timeouts, and fails as a Timeout that wraps
	// context.DeadlineExceeded. It is a context deadline without the
	// context (context.WithTimeout arms a timer and reads the clock for
	// each call; here the call's own clock reading is the start). Waiting
	// for an instance counts against it.
	Budget time.Duration
	// Chain, when set, makes the call the next step of the named chain
	// (Host.Chain): it runs after every call and tap submitted to that
	// chain before it, synchronously, and its failure fails the chain.
	Chain string
}

// Do runs req (see Request). It returns the call's stats and a
// *CallbackError (or *ChainError, for a chained call on a failed chain)
// on failure; with req.Outputs nil it sets req.Outputs to the results.
func (h *Host) Do(ctx context.Context, req *Request) (Stats, error) {
	if req.Chain != "" {
		// A copy goes to the chain (whose step may outlive this frame), so
		// that req itself stays on the caller's stack on every path.
		r := *req
		st, err := h.Chain(req.Chain).do(ctx, &r)
		req.Outputs = r.Outputs
		return st, err
	}
	c, err := h.lookup(req.Callback)
	if err != nil {
		return Stats{}, err
	}
	defer c.leave()
	return c.do(ctx, req, c.BatchParallelism())
}

// Do runs req on this callback (req.Callback is not read). See Host.Do.
func (c *Callback) Do(ctx context.Context, req *Request) (Stats, error) {
	if req.Chain != "" {
		// The chain finds its step's callback by name, as every chain step.
		r := *req
		r.Callback = c.name
		st, err := c.h.Do(ctx, &r)
		req.Outputs = r.Outputs
		return st, err
	}
	if err := c.enter(); err != nil {
		return Stats{}, err
	}
	defer c.leave()
	return c.do(ctx, req, c.BatchParallelism())
}

// do runs an admitted request on c: the checks of its own terms, then the
// call, single or batched, a batch's elements at most workers at once;
// with req.Outputs nil it sets them to the results.
func (c *Callback) do(ctx context.Context, req *Request, workers int) (Stats, error) {
	if cerr := c.checkRequest(req); cerr != nil {
		return Stats{}, cerr
	}
	var (
		st   Stats
		cerr *CallbackError
	)
	switch {
	case req.Batch && req.Outputs == nil:
		var outs []Tensor
		if outs, st, cerr = c.invokeBatchAlloc(ctx, req.Inputs, workers); cerr == nil {
			req.Outputs = outs
		}
	case req.Batch:
		st, cerr = c.invokeBatch(ctx, req.Inputs, req.Outputs, workers, true)
	default:
		r := request{inputs: req.Inputs, outputs: req.Outputs, into: req.Outputs != nil, budget: req.Budget}
		if st, cerr = c.invoke(ctx, &r); cerr == nil && !r.into {
			req.Outputs = r.outputs
		}
	}
	if cerr != nil {
		return st, cerr
	}
	return st, nil
}

// Refuse is the error the host gives a call of c it refuses before
// running it, for a door that found err in the call's arguments before
// the host could see them (a NULL data pointer, non-row-major strides, a
// tensor in device memory): InvalidArgument, naming the callback and
// worded as the host's own refusals, with err's text.
func (c *Callback) Refuse(err error) error {
	return c.fail(InvalidArgument, err.Error(), err)
}

// checkRequest is the checks of a request's own terms (the inputs and
// outputs are checked against the signature by the call's phases).
func (c *Callback) checkRequest(req *Request) *CallbackError {
	switch {
	case req.Budget < 0 || req.Budget > config.MaxTimeout:
		return c.fail(InvalidArgument, fmt.Sprintf("budget %v: give a budget from 1ns to %v, or none", req.Budget, config.MaxTimeout), nil)
	case req.Batch && req.Budget != 0:
		return c.fail(InvalidArgument, "a batched call takes no budget: its elements run under the callback's timeout", nil)
	}
	return nil
}

// do runs req as the chain's next step (see Request.Chain). A batch's
// elements run in order, one at a time: an ordered effect stays ordered.
func (ch *Chain) do(ctx context.Context, req *Request) (Stats, error) {
	if req.Batch || req.Budget != 0 {
		var st Stats
		err := ch.Do(ctx, req.Callback, func(ctx context.Context, c *Callback) error {
			var err error
			st, err = c.do(ctx, req, 1)
			return err
		})
		return st, err
	}
	outs, st, err := ch.invokeSync(ctx, syncCall{callback: req.Callback, inputs: req.Inputs, into: req.Outputs})
	if err == nil && req.Outputs == nil {
		req.Outputs = outs
	}
	return st, err
}

package host

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/seed4b3e0ccb/callbox/abi"
	"sync"
)

// Chain runs calls strictly in submission order, one at a time, as an
// ordered effect (JAX's io_callback(ordered=True), Nx's io_callback on a
// token). Calls are numbered from 1 in submission order.
//
// Failure policy: the first call or tap on a chain that fails fails the
// chain. Every call and tap submitted after it — queued or submitted later —
// does not run and returns a *ChainError wrapping the first failure (which
// callback, which sequence number). Barrier returns that first failure. A
// cancelled context fails the call it belongs to, and so the chain: an
// ordered chain cannot skip a step. Start a new chain to continue.
//
// Inputs of asynchronous calls (Submit, Tap) are read when the call runs:
// do not modify them until it has completed.
//
// A Chain is safe for concurrent use; concurrent submitters are ordered by
// who submits first.
type Chain struct {
	h    *Host
	name string

	mu      sync.Mutex
	queue   []*Future
	running bool
	seq     uint64
	first   *CallbackError
}

// NewChain starts an empty chain of its own, not in the host's registry.
// The name appears in errors.
func (h *Host) NewChain(name string) *Chain {
	return &Chain{h: h, name: name}
}

// Chain returns the host's chain of that name, creating it on first use:
// every caller in the process that names the same chain (a compiled
// program's chain attribute, say) gets the same one and is ordered with
// the others. Registered chains live as long as the host. A new chain
// keeps its own copy of name, so name may view memory the caller reuses
// (a C string, say).
func (h *Host) Chain(name string) *Chain {
	h.mu.RLock()
	ch, ok := h.chains[name]
	h.mu.RUnlock()
	if ok {
		return ch
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if ch, ok = h.chains[name]; !ok {
		name = strings.Clone(name)
		ch = &Chain{h: h, name: name}
		h.chains[name] = ch
	}
	return ch
}

// Name is the chain's name.
func (ch *Chain) Name() string { return ch.name }

// Future is the pending result of a submitted call.
type Future struct {
	ch       *Chain
	ctx      context.Context
	callback string
	inputs   []Tensor
	into     []Tensor // caller-provided outputs (InvokeInto), or nil
	// step, when set, is the call itself (Chain.Do) instead of an invoke.
	step    func(context.Context, *Callback) error
	seq     uint64
	tap     bool
	barrier bool

	// The channel is made only when someone waits: most submitted calls
	// and taps are never waited on one by one. A future's own lock keeps
	// completing it off the chain's lock, which submitters hold.
	mu       sync.Mutex
	finished bool
	done     chan struct{}
	// started: the chain has begun running the call (its buffers may be in
	// use). abandoned: its caller's context ended before that; the chain
	// then fails at this call with abandoned as the error, never touching
	// its buffers (invokeSync).
	started   bool
	abandoned *CallbackError

	outputs []Tensor
	stats   Stats
	err     error
}

// Seq is the call's sequence number on its chain.
func (f *Future) Seq() uint64 { return f.seq }

// Done is closed when the call has finished (or was skipped).
func (f *Future) Done() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done == nil {
		f.done = make(chan struct{})
		if f.finished {
			close(f.done)
		}
	}
	return f.done
}

// Wait blocks until the call finished or ctx is done. A cancelled wait does
// not cancel the call; cancel the context the call was submitted with.
func (f *Future) Wait(ctx context.Context) ([]Tensor, error) {
	select {
	case <-f.Done():
		return f.outputs, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Stats returns the call's stats once Done.
func (f *Future) Stats() Stats {
	<-f.Done()
	return f.stats
}

// Submit queues a call and returns at once. The call runs after every call
// submitted before it on this chain, with ctx.
func (ch *Chain) Submit(ctx context.Context, callback string, inputs ...Tensor) *Future {
	return ch.enqueue(&Future{ctx: ctx, callback: callback, inputs: inputs})
}

// Invoke submits a call and waits for it: Submit followed by Wait(ctx).
// On an idle chain the call runs on the caller's goroutine, with no
// hand-off to the chain's worker.
func (ch *Chain) Invoke(ctx context.Context, callback string, inputs ...Tensor) ([]Tensor, error) {
	outputs, _, err := ch.invokeSync(ctx, syncCall{callback: callback, inputs: inputs})
	return outputs, err
}

// InvokeInto is Invoke writing the results into caller-provided outputs
// (as Host.Do with Outputs set: a failed call leaves them untouched). It returns
// when the call is over and keeps no reference to inputs or outputs
// afterwards, so buffers lent for the call's duration (an XLA FFI
// handler's) may be passed.
func (ch *Chain) InvokeInto(ctx context.Context, callback string, inputs, outputs []Tensor) (Stats, error) {
	_, st, err := ch.invokeSync(ctx, syncCall{callback: callback, inputs: inputs, into: outputs})
	return st, err
}

// Do runs step as the chain's next call on the named callback (name or
// content id), synchronously, in order with every other call and tap of
// the chain: for callers that drive the phases of a call themselves
// (Callback.Start and Call: the GPU path stages inputs with device
// copies). A *CallbackError from step fails the chain as a failed call
// does; any other error is recorded with its own Kind (abi.KindOf), or as
// a HostPanic of that callback when it has none. If
// the chain has already failed, step does not run and Do returns the
// *ChainError.
func (ch *Chain) Do(ctx context.Context, callback string, step func(context.Context, *Callback) error) error {
	_, _, err := ch.invokeSync(ctx, syncCall{callback: callback, run: step})
	return err
}

// syncCall is what a synchronous call asks of its chain.
type syncCall struct {
	callback string
	inputs   []Tensor
	into     []Tensor
	run      func(context.Context, *Callback) error
}

// invokeSync runs s as the chain's next call and waits for it. An idle
// chain runs it at once on the caller's goroutine, with its Future on the
// caller's stack (the path every ordered XLA call takes: no allocation);
// a busy one queues a Future behind the calls ahead of it.
func (ch *Chain) invokeSync(ctx context.Context, s syncCall) ([]Tensor, Stats, error) {
	ch.mu.Lock()
	if ch.running || len(ch.queue) > 0 {
		ch.mu.Unlock()
		f := &Future{ctx: ctx, callback: s.callback, inputs: s.inputs, into: s.into, step: s.run}
		ch.enqueue(f)
		select {
		case <-f.Done():
		case <-ctx.Done():
			// Not started yet: the caller goes now, and the call, in its
			// turn, fails the chain without running (its buffers are never
			// touched). Started: wait for it, so the caller's buffers are
			// not used after we return.
			if e := f.abandon(ctx); e != nil {
				return nil, Stats{}, e
			}
			<-f.Done()
		}
		return f.outputs, f.stats, f.err
	}
	// Idle: take the chain's turn ourselves. Anything submitted meanwhile
	// queues behind us and is drained after.
	ch.seq++
	f := Future{ctx: ctx, callback: s.callback, inputs: s.inputs, into: s.into, step: s.run, seq: ch.seq}
	ch.running = true
	first := ch.first
	ch.mu.Unlock()
	ch.run(&f, first)
	ch.mu.Lock()
	if len(ch.queue) > 0 {
		ch.mu.Unlock()
		go ch.drain()
	} else {
		ch.running = false
		ch.mu.Unlock()
	}
	return f.outputs, f.stats, f.err
}

// Tap queues a side-effect call whose outputs are discarded (JAX's id_tap).
// It is ordered with the chain's other calls; its error surfaces at the
// next Barrier and fails the chain like any call's.
func (ch *Chain) Tap(ctx context.Context, callback string, inputs ...Tensor) {
	ch.enqueue(&Future{ctx: ctx, callback: callback, inputs: inputs, tap: true})
}

// Barrier waits until every call and tap submitted before it has finished
// (JAX's barrier_wait) and returns the chain's first failure, or nil. It
// returns ctx's error if ctx is done first.
func (ch *Chain) Barrier(ctx context.Context) error {
	f := ch.enqueue(&Future{ctx: ctx, barrier: true})
	select {
	case <-f.Done():
	case <-ctx.Done():
		return barrierEnded(ctx.Err())
	}
	if first := ch.Err(); first != nil {
		return first
	}
	return nil
}

// Reset clears the chain's failure so that later calls run again, and
// returns the failure it cleared (nil if it was healthy). It is for chains
// that outlive one program run (registered chains, Host.Chain): a failed
// run fails its own later calls, and the next run starts clean. Calls
// already queued behind the failure still fail with it.
func (ch *Chain) Reset() error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	first := ch.first
	ch.first = nil
	if first == nil {
		return nil
	}
	return first
}

// Err returns the chain's first failure, or nil while it is healthy.
func (ch *Chain) Err() error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.first == nil {
		return nil
	}
	return ch.first
}

func (ch *Chain) enqueue(f *Future) *Future {
	f.ch = ch
	ch.mu.Lock()
	if !f.barrier {
		ch.seq++
		f.seq = ch.seq
	}
	ch.queue = append(ch.queue, f)
	start := !ch.running
	ch.running = true
	ch.mu.Unlock()
	if start {
		go ch.drain()
	}
	return f
}

// abandon withdraws a queued call whose caller's context ended, if the
// chain has not started it: it returns the error the call fails with (and
// fails the chain with, in its turn), or nil when the call has started.
func (f *Future) abandon(ctx context.Context) *CallbackError {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.started {
		return nil
	}
	e := &CallbackError{Callback: f.callback, Chain: f.ch.name, Seq: f.seq, kind: Canceled,
		Message: "canceled while waiting for its turn on the chain", Err: ctx.Err()}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		e.kind, e.Message = Timeout, "timeout: the caller's deadline passed while waiting for its turn on the chain"
	}
	f.abandoned = e
	return e
}

// begin marks a queued f started, unless its caller abandoned it: then it
// returns the error f fails with. (A call run on its caller's goroutine,
// invokeSync's idle path, cannot be abandoned and needs no mark.)
func (f *Future) begin() *CallbackError {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.abandoned == nil {
		f.started = true
	}
	return f.abandoned
}

// finish marks a call done and wakes its waiters.
func (ch *Chain) finish(f *Future) {
	f.mu.Lock()
	f.finished = true
	if f.done != nil {
		close(f.done)
	}
	f.mu.Unlock()
}

// drain runs queued calls in order, taking the queue a batch at a time; it
// exits when the queue is empty, so an idle chain holds no goroutine.
func (ch *Chain) drain() {
	var batch []*Future
	for {
		ch.mu.Lock()
		if len(ch.queue) == 0 {
			ch.running = false
			ch.mu.Unlock()
			return
		}
		batch, ch.queue = ch.queue, batch[:0]
		first := ch.first
		ch.mu.Unlock()
		for i, f := range batch {
			if e := f.begin(); e != nil {
				// Its caller left before its turn: it fails the chain here,
				// as a canceled call would, without running.
				if first == nil {
					ch.failWith(e)
				}
				f.err = e
			} else {
				ch.run(f, first)
			}
			if f.err != nil && first == nil {
				first = ch.firstFailure()
			}
			ch.finish(f)
			batch[i] = nil
		}
	}
}

// firstFailure reads the chain's first failure.
func (ch *Chain) firstFailure() *CallbackError {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.first
}

// run runs call f (number f.seq) of the chain, unless the chain has
// already failed (first), and fails the chain when the call fails.
func (ch *Chain) run(f *Future, first *CallbackError) {
	if f.barrier {
		return
	}
	if first != nil {
		f.err = &ChainError{Chain: ch.name, Seq: f.seq, Callback: f.callback, First: first}
		return
	}
	c, err := ch.h.lookup(f.callback)
	if err != nil {
		ce := &CallbackError{Callback: f.callback, Chain: ch.name, Seq: f.seq, kind: InvalidArgument, Message: err.Error(), Err: err}
		ch.failWith(ce)
		f.err = ce
		return
	}
	defer c.leave()
	if f.step != nil {
		if err := f.step(f.ctx, c); err != nil {
			var ce *CallbackError
			if !errors.As(err, &ce) {
				kind := abi.KindOf(err)
				if kind == abi.KindNone {
					kind = HostPanic
				}
				ce = c.fail(kind, err.Error(), err)
			}
			ce.Chain, ce.Seq = ch.name, f.seq
			ch.failWith(ce)
			f.err = ce
		}
		return
	}
	r := request{inputs: f.inputs, outputs: f.into, into: f.into != nil, chain: ch.name, seq: f.seq, path: pathChain}
	if f.tap {
		r.path = pathTap
	}
	st, cerr := c.invoke(f.ctx, &r)
	f.stats = st
	if cerr != nil {
		ch.failWith(cerr)
		f.err = cerr
		return
	}
	if !f.tap && f.into == nil {
		f.outputs = r.outputs
	}
}

func (ch *Chain) failWith(e *CallbackError) {
	ch.mu.Lock()
	if ch.first == nil {
		ch.first = e
	}
	ch.mu.Unlock()
}

// Tap runs a side-effect call asynchronously, unordered with respect to
// other taps; its outputs are discarded and its error is returned by the
// next Barrier. Inputs must not be modified until the tap has run.
func (h *Host) Tap(ctx context.Context, callback string, inputs ...Tensor) {
	h.taps.Go(func() error {
		c, err := h.lookup(callback)
		if err != nil {
			return err
		}
		defer c.leave()
		r := request{inputs: inputs, path: pathTap}
		if _, cerr := c.invoke(ctx, &r); cerr != nil {
			return cerr
		}
		return nil
	})
}

// Barrier waits for every pending Tap (JAX's barrier_wait) and returns the
// first error among the taps since the previous Barrier, then clears it.
func (h *Host) Barrier(ctx context.Context) error {
	if err := h.taps.Wait(ctx); err != nil {
		return barrierEnded(err)
	}
	return h.taps.Take()
}

// barrierEnded is a barrier's wait cut short by its context: Canceled, or
// Timeout for a deadline, wrapping the context's error. Every door reports
// it the same way; the taps and steps waited for run on, and the next
// barrier reports them.
func barrierEnded(err error) error {
	k := Canceled
	if errors.Is(err, context.DeadlineExceeded) {
		k = Timeout
	}
	return &waitEndedError{kind: k, err: err}
}

// waitEndedError is a wait the caller ended (barrierEnded).
type waitEndedError struct {
	kind Kind
	err  error
}

func (e *waitEndedError) Error() string {
	return fmt.Sprintf("barrier: the wait ended (%v); the taps and queued steps run on", e.err)
}
func (e *waitEndedError) Unwrap() error        { return e.err }
func (e *waitEndedError) Kind() Kind           { return e.kind }
func (e *waitEndedError) Is(target error) bool { return abi.IsKind(e.kind, target) }

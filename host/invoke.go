package host

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/sandbox"
)

// Stats describe one call.
type Stats struct {
	Wall       time.Duration // whole call, waiting for an instance included
	Wait       time.Duration // waiting for an instance, creating one included
	Guest      time.Duration // time inside the callback export
	BytesIn    uint64        // input bytes copied into guest memory
	BytesOut   uint64        // output bytes copied out of guest memory
	PeakMemory uint64        // guest linear memory after the call, in bytes
	Fuel       uint64        // fuel consumed, when FuelKnown
	// FuelKnown: the callback has a fuel budget, so both engines metered
	// the call and Fuel is what it used (a floor after a timeout).
	FuelKnown   bool
	NewInstance bool // the call instantiated the module
}

// Invoke calls a callback with inputs and returns its outputs, allocated at
// the shapes its signature derives. An output that passes an input through
// is that input tensor itself, not a copy. It is Do with Callback and
// Inputs set; Do with Outputs nil also returns the call's stats, and Do
// with Outputs set writes the results into the caller's tensors.
func (h *Host) Invoke(ctx context.Context, name string, inputs ...Tensor) ([]Tensor, error) {
	c, err := h.lookup(name)
	if err != nil {
		return nil, err
	}
	defer c.leave()
	r := request{inputs: inputs}
	if _, cerr := c.invoke(ctx, &r); cerr != nil {
		return nil, cerr
	}
	return r.outputs, nil
}

// request is one call's inputs, its outputs, and where it sits in a chain.
type request struct {
	inputs  []Tensor
	outputs []Tensor
	budget  time.Duration // the caller's limit (Request.Budget); 0: none
	into    bool          // outputs are caller-provided
	view    bool          // outputs are views of guest memory (Session)
	inputAt []uint32      // guest addresses of inputs already in guest memory
	chain   string
	seq     uint64
	path    callPath // how the call was made (telemetry)
}

// invoke runs one call through every phase; it always returns a
// *CallbackError on failure.
func (c *Callback) invoke(ctx context.Context, r *request) (st Stats, err *CallbackError) {
	cl := call{c: c}
	ctx, span := c.startSpan(ctx)
	if span != nil && r.chain != "" {
		span.SetAttributes(AttrChain.String(r.chain), AttrSeq.Int64(int64(r.seq)))
	}
	defer func() {
		if p := recover(); p != nil {
			cl.kept = false
			err = c.fail(HostPanic, fmt.Sprintf("host panic during the call: %v", p), nil)
		}
		var callsBefore uint64
		if cl.g != nil && cl.g.calls > 0 {
			callsBefore = cl.g.calls - 1
		}
		cl.finish(ctx)
		st = cl.st
		if err != nil {
			err.Chain, err.Seq = r.chain, r.seq
			c.recordFailure(r.inputs, err, st, callsBefore)
		}
		c.record(ctx, r.path, &st, err, span)
	}()
	cl.began, cl.budget = c.h.clock.now(), r.budget
	p, err := c.planFor(r.inputs, r.inputAt)
	if err != nil {
		return
	}
	if r.into {
		if err = c.checkOutputs(p.specs, r.outputs); err != nil {
			return
		}
	}
	if err = cl.start(ctx, c, p); err != nil {
		return
	}
	cl.stage(r.inputs)
	if err = cl.run(ctx); err != nil {
		return
	}
	err = cl.deliver(r)
	return
}

// acquireError reports a failure to get an instance.
func (c *Callback) acquireError(ctx context.Context, err error) *CallbackError {
	var t *sandbox.Trap
	if errors.As(err, &t) {
		e := c.trapError(t)
		e.Message = "instantiation: " + e.Message
		return e
	}
	if errors.Is(err, errWaitBound) {
		return c.fail(Overloaded, fmt.Sprintf("overloaded: every instance (max_instances %d) stayed busy for max_wait %v; the callback did not run",
			c.spec.MaxInstances, c.spec.Limits.MaxWait), err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return c.fail(Timeout, "timeout: the caller's deadline passed while waiting for an instance", err)
	}
	if ctx.Err() != nil {
		return c.fail(Canceled, "canceled while waiting for an instance", ctx.Err())
	}
	return c.fail(ABIViolation, err.Error(), err)
}

func (c *Callback) checkOutputs(specs []abi.OutputSpec, outs []Tensor) *CallbackError {
	if len(outs) != len(specs) {
		err := abi.OutputCountError(c.sig, len(outs), len(specs))
		return c.fail(InvalidArgument, err.Error(), nil)
	}
	for i, s := range specs {
		o := outs[i]
		if !s.Fits(o.DType, o.Shape) {
			err := abi.OutputMismatchError(i, o.DType, o.Shape, s)
			return c.fail(InvalidArgument, err.Error(), nil)
		}
		// Only the size matters: an output's old content (uninitialized
		// memory from XLA, say, which is not 0/1 for pred) is never read.
		if n, _ := s.Shape.ByteLen(s.DType); uint64(len(o.Data)) != n {
			err := abi.OutputSizeError(i, o.Type(), n, len(o.Data))
			return c.fail(InvalidArgument, err.Error(), err)
		}
	}
	return nil
}

func sameBuffer(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || unsafe.SliceData(a) == unsafe.SliceData(b))
}

// callError converts an error from the sandbox into a CallbackError.
func (c *Callback) callError(err error, during string) *CallbackError {
	var t *sandbox.Trap
	var e *CallbackError
	if errors.As(err, &t) {
		e = c.trapError(t)
	} else {
		e = c.fail(ABIViolation, err.Error(), err)
	}
	if during != "" {
		e.Message = during + ": " + e.Message
	}
	return e
}

// logDroppedError notes an error message set during a call that returned
// OK: the ABI drops it, but an operator may want to know.
func (c *Callback) logDroppedError(ctx context.Context, msg string) {
	c.logger.DebugContext(ctx, "guest set an error message but returned OK; dropped", "message", msg)
}

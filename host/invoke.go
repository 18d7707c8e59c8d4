package host

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/internal/sandbox"
)

// Stats describe one call.
type Stats struct {
	Wall        time.Duration // whole call, waiting for an instance included
	Guest       time.Duration // time inside the callback export
	BytesIn     uint64        // input bytes copied into guest memory
	BytesOut    uint64        // output bytes copied out of guest memory
	PeakMemory  uint64        // guest linear memory after the call, in bytes
	Fuel        uint64        // fuel consumed, when FuelKnown
	FuelKnown   bool
	NewInstance bool // the call instantiated the module
}

// Invoke calls a callback with inputs and returns its outputs, allocated at
// the shapes its signature derives. An output that passes an input through
// is that input tensor itself, not a copy.
func (h *Host) Invoke(ctx context.Context, name string, inputs ...Tensor) ([]Tensor, error) {
	outs, _, err := h.InvokeStats(ctx, name, inputs...)
	return outs, err
}

// InvokeStats is Invoke that also returns the call's stats.
func (h *Host) InvokeStats(ctx context.Context, name string, inputs ...Tensor) ([]Tensor, Stats, error) {
	c, err := h.lookup(name)
	if err != nil {
		return nil, Stats{}, err
	}
	defer h.inflight.Done()
	r := request{inputs: inputs}
	st, cerr := c.invoke(ctx, &r)
	if cerr != nil {
		return nil, st, cerr
	}
	return r.outputs, st, nil
}

// InvokeInto calls a callback writing its results into caller-provided
// outputs, whose dtypes and shapes must be the ones the signature derives.
// A failed call leaves every output byte untouched.
func (h *Host) InvokeInto(ctx context.Context, name string, inputs []Tensor, outputs []Tensor) (Stats, error) {
	c, err := h.lookup(name)
	if err != nil {
		return Stats{}, err
	}
	defer h.inflight.Done()
	r := request{inputs: inputs, outputs: outputs, into: true}
	st, cerr := c.invoke(ctx, &r)
	if cerr != nil {
		return st, cerr
	}
	return st, nil
}

// request is one call's inputs, its outputs, and where it sits in a chain.
type request struct {
	inputs  []Tensor
	outputs []Tensor
	into    bool     // outputs are caller-provided
	view    bool     // outputs are views of guest memory (Session)
	inputAt []uint32 // guest addresses of inputs already in guest memory
	chain   string
	seq     uint64
}

// invoke runs one call; it always returns a *CallbackError on failure.
func (c *callback) invoke(ctx context.Context, r *request) (st Stats, err *CallbackError) {
	start := time.Now()
	defer func() {
		st.Wall = time.Since(start)
		if err != nil {
			err.Chain, err.Seq = r.chain, r.seq
		}
	}()

	p, cerr := c.planFor(r.inputs, r.inputAt)
	if cerr != nil {
		return st, cerr
	}
	if r.into {
		if cerr := c.checkOutputs(p.specs, r.outputs); cerr != nil {
			return st, cerr
		}
	}
	specs, layout := p.specs, p.layout

	// One deadline for the whole call: every guest entry it makes
	// (instantiation, _initialize, callbox_alloc/free, the callback) runs
	// against it.
	deadline := sandbox.Deadline(start, c.spec.Limits.Timeout)
	g, created, gerr := c.pool.get(ctx, deadline)
	if gerr != nil {
		return st, c.acquireError(ctx, gerr)
	}
	if !created {
		g.inst.SetDeadline(deadline)
	}
	st.NewInstance = created
	healthy := false
	defer func() {
		if p := recover(); p != nil {
			err = c.fail(HostPanic, fmt.Sprintf("host panic during the call: %v", p), nil)
			healthy = false
		}
		if healthy {
			c.pool.release(ctx, g)
		} else {
			c.pool.discard(ctx, g)
		}
	}()

	var kept bool
	kept, err = c.run(ctx, g, layout, r, specs, &st)
	healthy = kept
	return st, err
}

// callPlan is everything about a call that depends only on its input types:
// the output specs the signature derives and the frame layout. It is
// immutable and cached per callback, so a stream of calls with the same
// shapes binds the signature and plans the frame once.
type callPlan struct {
	inputAt []uint32
	metas   []abi.TensorMeta
	specs   []abi.OutputSpec
	layout  *abi.FrameLayout
}

// matches reports whether inputs have exactly the plan's types and
// placement.
func (p *callPlan) matches(inputs []Tensor, inputAt []uint32) bool {
	if len(inputs) != len(p.metas) || !slices.Equal(inputAt, p.inputAt) {
		return false
	}
	for i, in := range inputs {
		if in.DType != p.metas[i].DType || !in.Shape.Equal(p.metas[i].Shape) {
			return false
		}
	}
	return true
}

// planFor validates the inputs and returns the call's plan, from the cache
// when the input types repeat.
func (c *callback) planFor(inputs []Tensor, inputAt []uint32) (*callPlan, *CallbackError) {
	for i, in := range inputs {
		if verr := in.Validate(); verr != nil {
			ae := &abi.ArgumentError{Index: i, Reason: verr.Error()}
			return nil, c.fail(InvalidArgument, ae.Error(), ae)
		}
	}
	if p := c.lastPlan.Load(); p != nil && p.matches(inputs, inputAt) {
		return p, nil
	}
	metas := make([]abi.TensorMeta, len(inputs))
	for i, in := range inputs {
		metas[i] = abi.TensorMeta{DType: in.DType, Shape: append(abi.Shape(nil), in.Shape...)}
	}
	specs, berr := c.sig.Bind(metas)
	if berr != nil {
		return nil, c.fail(InvalidArgument, berr.Error(), berr)
	}
	outBytes := uint64(0)
	for _, s := range specs {
		n, _ := s.Shape.ByteLen(s.DType)
		if s.Alias < 0 {
			outBytes += n
		}
	}
	if outBytes > c.spec.Limits.MaxOutput {
		msg := fmt.Sprintf("results need %s, above max_output %s", sandbox.FormatBytes(outBytes), sandbox.FormatBytes(c.spec.Limits.MaxOutput))
		return nil, c.fail(InvalidArgument, msg, nil)
	}
	at := slices.Clone(inputAt)
	layout, perr := abi.Plan(metas, specs, abi.PlanOptions{Skewed: c.skewed, InputAt: at})
	if perr != nil {
		return nil, c.fail(InvalidArgument, perr.Error(), perr)
	}
	p := &callPlan{inputAt: at, metas: metas, specs: specs, layout: layout}
	c.lastPlan.Store(p)
	return p, nil
}

// acquireError reports a failure to get an instance.
func (c *callback) acquireError(ctx context.Context, err error) *CallbackError {
	var t *sandbox.Trap
	if errors.As(err, &t) {
		e := c.trapError(t)
		e.Message = "instantiation: " + e.Message
		return e
	}
	if ctx.Err() != nil {
		return c.fail(Canceled, "canceled while waiting for an instance", ctx.Err())
	}
	return c.fail(ABIViolation, err.Error(), err)
}

func (c *callback) checkOutputs(specs []abi.OutputSpec, outs []Tensor) *CallbackError {
	if len(outs) != len(specs) {
		return c.fail(InvalidArgument, fmt.Sprintf("got %d output buffers, signature %s has %d results", len(outs), c.sig, len(specs)), nil)
	}
	for i, s := range specs {
		o := outs[i]
		if o.DType != s.DType || !o.Shape.Equal(s.Shape) {
			return c.fail(InvalidArgument, fmt.Sprintf("output %d: buffer is %s, result is %s%s", i, o.Type(), s.DType, s.Shape), nil)
		}
		if err := o.Validate(); err != nil {
			return c.fail(InvalidArgument, fmt.Sprintf("output %d: %v", i, err), err)
		}
	}
	return nil
}

// run writes the frame, calls the guest, checks what it did, and copies the
// outputs out. kept reports whether the instance may serve another call.
func (c *callback) run(ctx context.Context, g *guest, layout *abi.FrameLayout, r *request, specs []abi.OutputSpec, st *Stats) (kept bool, _ *CallbackError) {
	if err := g.ensureScratch(ctx, layout.Size); err != nil {
		return false, c.callError(err, "allocating the call frame")
	}
	base := g.scratch.Off
	mem := g.inst.Memory()
	frame := mem[base : uint64(base)+uint64(layout.Size)]
	g.calls++
	if err := layout.WriteMeta(frame, base, g.calls); err != nil {
		return false, c.fail(HostPanic, err.Error(), err)
	}
	g.meta = append(g.meta[:0], frame[:layout.MetaLen]...)
	for i, in := range r.inputs {
		if reg := layout.Inputs[i]; !reg.Abs {
			st.BytesIn += uint64(copy(frame[reg.Off:reg.End()], in.Data))
		}
	}

	g.stack[0] = uint64(base)
	callStart := time.Now()
	callErr := g.inst.Call(ctx, g.fn, g.stack[:1])
	st.Guest = time.Since(callStart)
	mem = g.inst.Memory()
	st.PeakMemory = uint64(len(mem))
	st.Fuel, st.FuelKnown = g.inst.FuelConsumed()
	state := g.inst.State()
	if callErr != nil {
		e := c.callError(callErr, "")
		if state.ErrorMessage != "" && e.kind != ABIViolation && e.kind != HostPanic {
			e.GuestMessage = state.ErrorMessage
			if e.kind == Unreachable {
				// An abort after callbox.error is how SDKs report a panic.
				e.kind, e.Message = GuestError, "guest aborted"
			}
		}
		return false, e
	}
	status := abi.Status(int32(uint32(g.stack[0])))
	// Memory never shrinks, so the frame is still in bounds.
	frame = mem[base : uint64(base)+uint64(layout.Size)]
	if err := layout.Verify(frame, base, g.meta); err != nil {
		return false, c.fail(ABIViolation, err.Error(), err)
	}
	if status != abi.StatusOK {
		if !status.Valid() {
			msg := fmt.Sprintf("status %d is not an ABI v1 status", int32(status))
			return false, c.fail(ABIViolation, msg, nil)
		}
		e := c.fail(GuestError, "guest returned "+status.String(), nil)
		e.Status, e.GuestMessage = status, state.ErrorMessage
		// RESOURCE_EXHAUSTED after a refused memory.grow is a MemoryLimit
		// (ABI.md, section 4; other statuses stay GuestError). wazero
		// reports refusals (MemoryDenied); wasmtime's C API does not, so,
		// as for traps (sandbox.MemoryLimitTrap), a guest whose memory is
		// within a page of the limit counts too: both engines then agree.
		if status == abi.StatusResourceExhausted && state.MemoryLimitHit(uint64(len(mem))) {
			e.kind = MemoryLimit
			e.Message = sandbox.MemoryLimitMessage(c.spec.Limits.MaxMemory, "guest returned "+status.String())
			return false, e
		}
		return true, e
	}
	if state.ErrorMessage != "" {
		c.logDroppedError(ctx, state.ErrorMessage)
	}

	// Success: only now are outputs written.
	if !r.into {
		r.outputs = make([]Tensor, len(specs))
	}
	for i, s := range specs {
		if s.Alias >= 0 {
			in := r.inputs[s.Alias]
			if !r.into {
				r.outputs[i] = in
			} else if !sameBuffer(r.outputs[i].Data, in.Data) {
				copy(r.outputs[i].Data, in.Data)
			}
			continue
		}
		reg := layout.Outputs[i]
		if r.view {
			// Zero-copy: the output is a view of the frame in guest memory.
			r.outputs[i] = Tensor{DType: s.DType, Shape: s.Shape, Data: frame[reg.Off:reg.End():reg.End()]}
			continue
		}
		if !r.into {
			t, err := abi.New(s.DType, s.Shape...)
			if err != nil {
				return true, c.fail(InvalidArgument, err.Error(), err)
			}
			r.outputs[i] = t
		}
		st.BytesOut += uint64(copy(r.outputs[i].Data, frame[reg.Off:reg.End()]))
	}
	return true, nil
}

func sameBuffer(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || unsafe.SliceData(a) == unsafe.SliceData(b))
}

// callError converts an error from the sandbox into a CallbackError.
func (c *callback) callError(err error, during string) *CallbackError {
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
func (c *callback) logDroppedError(ctx context.Context, msg string) {
	c.logger.DebugContext(ctx, "guest set an error message but returned OK; dropped", "message", msg)
}

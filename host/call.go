package host

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unsafe"

	"go.opentelemetry.io/otel/trace"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/sandbox"
)

// The phases of a call. Every way of calling a callback — Invoke,
// InvokeInto, a Session, a Chain, the C and XLA FFI bridge, the GPU path —
// goes through the same steps, and a caller that needs to can step
// through them itself (Callback.Start and Call):
//
//	resolve  Host.Lookup: by name or content id, once, no allocation
//	plan     Callback.Plan: bind the signature, derive outputs, lay out the frame
//	acquire  Callback.Start: take an instance from the pool; the call's one
//	         deadline starts here and covers every guest entry that follows
//	stage    Call.Input: each input's place in guest memory, for the caller
//	         to fill (a Go copy, a C memcpy, a device-to-host copy)
//	run      Call.Run: call the guest, then verify the frame and guard bytes
//	deliver  Call.Output: each result's place in guest memory, valid until
//	         Close (copy it out, or start a host-to-device copy from it)
//	release  Call.Close: the instance goes back to its pool, or is discarded
//	         when the call failed

// Lookup resolves a loaded callback by name or by content id ("cb1-…", as
// Info.ID gives). It does not allocate. An id that no loaded callback has
// fails with an error saying the module changed or is not loaded; an
// unknown name lists the loaded ones. Both match ErrUnknownCallback.
func (h *Host) Lookup(nameOrID string) (*Callback, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.closed {
		return nil, ErrClosed
	}
	if c, ok := h.callbacks[nameOrID]; ok {
		return c, nil
	}
	if c, ok := h.byID[nameOrID]; ok {
		return c, nil
	}
	return nil, h.unknownLocked(nameOrID)
}

// ErrAmbiguousID is returned for a content id that names callbacks with
// different settings. Its kind is InvalidArgument.
var ErrAmbiguousID error = &kindedError{InvalidArgument, "ambiguous content id"}

// unknownLocked explains a failed lookup; h.mu is held.
func (h *Host) unknownLocked(nameOrID string) error {
	if names, ok := h.ambiguous[nameOrID]; ok {
		return fmt.Errorf("content id %s names %d callbacks with different settings (%s): a call by id could run under either's limits; call one by name: %w",
			nameOrID, len(names), strings.Join(names, ", "), ErrAmbiguousID)
	}
	if strings.HasPrefix(nameOrID, abi.CallbackIDPrefix) {
		return fmt.Errorf("no loaded callback has id %s: its module, export or signature changed since the id was taken, or it is not loaded: %w", nameOrID, ErrUnknownCallback)
	}
	names := make([]string, 0, len(h.callbacks))
	for n := range h.callbacks {
		names = append(names, n)
	}
	sort.Strings(names)
	loaded := "none is loaded"
	if len(names) > 0 {
		loaded = "loaded: " + strings.Join(names, ", ")
	}
	return fmt.Errorf("callback %q (%s): %w", nameOrID, loaded, ErrUnknownCallback)
}

// enter admits one call on the callback: it fails after the host's Close,
// or once a Reload replaced or removed the callback (ErrReplaced); Close,
// and the retirement of a replaced callback, wait for every admitted call
// to leave.
func (c *Callback) enter() error {
	h := c.h
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.closed {
		return ErrClosed
	}
	if c.retired {
		return c.replacedError()
	}
	h.inflight.Add(1)
	c.inflight.Add(1)
	return nil
}

// leave ends a call admitted by enter or lookup.
func (c *Callback) leave() {
	c.inflight.Done()
	c.h.inflight.Done()
}

// Name is the callback's name in the config.
func (c *Callback) Name() string { return c.name }

// ID is the callback's content-addressed id (abi.CallbackID).
func (c *Callback) ID() string { return c.id }

// Signature is the callback's resolved signature.
func (c *Callback) Signature() *abi.Signature { return c.sig }

// Info describes the callback.
func (c *Callback) Info() Info { return c.info() }

// Plan is what a call's input types decide: the result types and the
// frame layout. It is immutable and may be reused for every call with the
// same input types.
type Plan struct{ p *callPlan }

// Plan binds the signature to input types and lays out the frame. A
// mismatch is an InvalidArgument *CallbackError naming the argument.
// Plans of repeated input types come from a cache.
func (c *Callback) Plan(inputs []abi.TensorMeta) (*Plan, error) {
	p, cerr := c.planMetas(inputs)
	if cerr != nil {
		return nil, cerr
	}
	return &Plan{p: p}, nil
}

// Outputs are the results' dtypes and shapes, and which results pass an
// input through (Alias >= 0).
func (p *Plan) Outputs() []abi.OutputSpec { return p.p.specs }

// Inputs are the input types the plan was made for.
func (p *Plan) Inputs() []abi.TensorMeta { return p.p.metas }

// Call is one call stepped through by hand: Callback.Start acquired an
// instance and wrote the frame; fill each Input, Run, read each Output,
// then Close. A Call is not safe for concurrent use, and must be closed.
type Call struct {
	cl   call
	done bool
	ctx  context.Context // the caller's, with the call's span (telemetry)
	span trace.Span
	err  *CallbackError // Run's failure, for telemetry
}

// Start acquires an instance for one call with the given plan and writes
// the call frame. The callback's timeout starts now and covers every guest
// entry of the call, the frame allocation included.
func (c *Callback) Start(ctx context.Context, p *Plan) (*Call, error) {
	if err := c.enter(); err != nil {
		return nil, err
	}
	call := &Call{}
	call.ctx, call.span = c.startSpan(ctx)
	if cerr := call.cl.start(call.ctx, c, p.p); cerr != nil {
		call.cl.finish(call.ctx)
		c.record(call.ctx, pathStep, &call.cl.st, cerr, call.span)
		c.leave()
		return nil, cerr
	}
	return call, nil
}

// Input is input i's place in guest memory, len = its byte size: fill it
// before Run. The guest may read it; it is only valid until Close.
func (c *Call) Input(i int) []byte { return c.cl.inputBytes(i) }

// Run calls the guest and verifies what it did. On failure (a
// *CallbackError) the outputs must not be read; Close discards the
// instance if the failure broke it.
func (c *Call) Run(ctx context.Context) error {
	if c.done || c.cl.g == nil {
		return ErrClosed
	}
	if cerr := c.cl.runGuarded(ctx); cerr != nil {
		c.err = cerr
		return cerr
	}
	return nil
}

// Output is result i's bytes in guest memory after a successful Run, valid
// until Close. A pass-through result is its input's place.
func (c *Call) Output(i int) []byte {
	if !c.cl.ok {
		return nil
	}
	return c.cl.outputBytes(i)
}

// Memory describes the guest memory the call's instance works in; see
// GuestMemory.
func (c *Call) Memory() GuestMemory { return c.cl.memory() }

// Stats are the call's stats so far.
func (c *Call) Stats() Stats { return c.cl.st }

// Close releases the instance to its pool, or discards it when the call
// broke it. It is safe to call more than once.
func (c *Call) Close(ctx context.Context) {
	if c.done {
		return
	}
	c.done = true
	cb := c.cl.c
	c.cl.finish(ctx)
	cb.record(c.ctx, pathStep, &c.cl.st, c.err, c.span)
	cb.leave()
}

// GuestMemory describes one instance's linear memory, for a caller that
// copies to and from it directly (a device DMA engine, say) and may pin it
// once: Base is its first byte and Size its current accessible length (it
// only grows). Stable reports that the memory never moves for the life of
// the instance, so Base may be cached under Instance, the instance's
// number (unique within the host); when false, re-read Base on every call. Which
// engines guarantee it: docs/RATIONALE.md, "Guest memory does not move".
type GuestMemory struct {
	Instance uint64
	Base     unsafe.Pointer
	Size     uint64
	Stable   bool
}

// call is the state of one call through its phases. The Go API paths keep
// it on the stack; Call wraps it for callers that step through by hand.
type call struct {
	c     *Callback
	p     *callPlan
	g     *guest
	frame []byte // the frame in guest memory
	st    Stats
	began time.Time
	// kept: the instance may serve another call (nothing has broken it).
	kept bool
	// ok: the guest ran and every check passed; outputs may be read.
	ok bool
	// callerDeadline is the call's deadline when it is its caller's (its
	// context's, or began plus budget: pool.get), zero when it is the
	// callback's own timeout.
	callerDeadline time.Time
	// budget: the caller's limit on the call from began (0: none).
	budget time.Duration
}

// start is the acquire phase: an instance, its scratch region large enough
// for the plan's frame, and the frame's metadata written.
func (cl *call) start(ctx context.Context, c *Callback, p *callPlan) *CallbackError {
	cl.c, cl.p = c, p
	if cl.began.IsZero() {
		cl.began = c.h.clock.now()
	}
	g, created, callerDeadline, err := c.pool.get(ctx, cl.began, c.spec.Limits.Timeout, cl.budget, true)
	cl.callerDeadline = callerDeadline
	cl.st.Wait = c.sinceUnlessUntimed(cl.began)
	if err != nil {
		return cl.callerTimeout(c.acquireError(ctx, err))
	}
	cl.g, cl.kept, cl.st.NewInstance = g, true, created
	return cl.callerTimeout(cl.prepare(ctx))
}

// callerTimeout words a Timeout of a call whose deadline was its
// caller's (earlier than the callback's timeout) as the caller's, naming
// when it fell, whichever engine or wall saw it first, and makes it wrap
// context.DeadlineExceeded; other errors pass unchanged.
func (cl *call) callerTimeout(e *CallbackError) *CallbackError {
	if e == nil || cl.callerDeadline.IsZero() || e.kind != Timeout {
		return e
	}
	e.Message = fmt.Sprintf("timeout: the caller's deadline passed (%v after the call began)", cl.callerDeadline.Sub(cl.began).Round(time.Microsecond))
	if !errors.Is(e.Err, context.DeadlineExceeded) {
		e.Err = fmt.Errorf("%w (%w)", context.DeadlineExceeded, e.Err)
	}
	return e
}

// prepare makes the instance's scratch region large enough for the plan's
// frame and writes the frame's metadata.
func (cl *call) prepare(ctx context.Context) *CallbackError {
	c, p := cl.c, cl.p
	err := cl.g.ensureScratch(ctx, p.layout.Size)
	for try := 1; try < renewTries && errors.Is(err, sandbox.ErrNotStarted); try++ {
		// The instance's worker had died before the frame's allocation
		// reached it (isolation: process; killed, say, while the instance
		// waited in the pool): nothing ran, so the call takes a new
		// instance, as the run phase does.
		g, rerr := c.pool.renew(ctx, cl.g)
		if rerr != nil {
			cl.g, cl.kept = nil, false // renew released the slot
			return c.callError(rerr, "instantiate")
		}
		cl.g, cl.st.NewInstance = g, true
		err = g.ensureScratch(ctx, p.layout.Size)
	}
	if err != nil {
		cl.kept = false
		return c.callError(err, "allocating the call frame")
	}
	g := cl.g
	base := g.scratch.Off
	cl.frame = g.inst.Memory()[base : uint64(base)+uint64(p.layout.Size)]
	g.calls++
	if err := p.layout.WriteMeta(cl.frame, base, g.calls); err != nil {
		cl.kept = false
		return c.fail(HostPanic, err.Error(), err)
	}
	g.meta = append(g.meta[:0], cl.frame[:p.layout.MetaLen]...)
	return nil
}

// inputBytes is input i's place in guest memory.
func (cl *call) inputBytes(i int) []byte {
	reg := cl.p.layout.Inputs[i]
	if reg.Abs {
		mem := cl.g.inst.Memory()
		return mem[reg.Off:reg.End():reg.End()]
	}
	return cl.frame[reg.Off:reg.End():reg.End()]
}

// outputBytes is result i's place in guest memory (its input's, for a
// pass-through).
func (cl *call) outputBytes(i int) []byte {
	if a := cl.p.specs[i].Alias; a >= 0 {
		return cl.inputBytes(a)
	}
	reg := cl.p.layout.Outputs[i]
	return cl.frame[reg.Off:reg.End():reg.End()]
}

// stage copies host tensors into their places (inputs already in guest
// memory, Abs, stay where they are).
func (cl *call) stage(inputs []Tensor) {
	for i, in := range inputs {
		if reg := cl.p.layout.Inputs[i]; !reg.Abs {
			cl.st.BytesIn += uint64(copy(cl.frame[reg.Off:reg.End()], in.Data))
		}
	}
}

// runGuarded is run with host panics contained as HostPanic.
func (cl *call) runGuarded(ctx context.Context) (err *CallbackError) {
	defer func() {
		if p := recover(); p != nil {
			cl.kept, cl.ok = false, false
			err = cl.c.fail(HostPanic, fmt.Sprintf("host panic during the call: %v", p), nil)
		}
	}()
	return cl.run(ctx)
}

// run is the run phase: call the guest, then check what it did.
func (cl *call) run(ctx context.Context) *CallbackError {
	c, g, layout := cl.c, cl.g, cl.p.layout
	base := g.scratch.Off
	g.stack[0] = uint64(base)
	var callErr error
	for try := 1; ; try++ {
		if c.h.untimed {
			callErr = g.inst.Call(ctx, g.fn, g.stack[:1])
		} else {
			callStart := time.Since(cl.began)
			callErr = g.inst.Call(ctx, g.fn, g.stack[:1])
			cl.st.Guest = time.Since(cl.began) - callStart
		}
		if try == renewTries || !errors.Is(callErr, sandbox.ErrNotStarted) || !cl.inputsInFrame() {
			break
		}
		// Its worker had died before the call reached it (isolation:
		// process): nothing ran, so the call runs on a new instance,
		// its inputs copied over from the old frame.
		if e := cl.renew(ctx); e != nil {
			return e
		}
		g = cl.g
		base = g.scratch.Off
		g.stack[0] = uint64(base)
	}
	mem := g.inst.Memory()
	cl.st.PeakMemory = uint64(len(mem))
	if c.spec.Limits.Fuel > 0 { // fuel is measured, alike on both engines, where it is budgeted
		cl.st.Fuel, cl.st.FuelKnown = g.inst.FuelConsumed()
	}
	report := g.inst.LastCall()
	if callErr != nil {
		cl.kept = false
		e := cl.callerTimeout(c.callError(callErr, ""))
		if report.GuestError != "" && e.kind != ABIViolation && e.kind != HostPanic {
			e.GuestMessage = report.GuestError
			if e.kind == Unreachable {
				// An abort after callbox.error is how SDKs report a panic.
				e.kind, e.Message = GuestError, "guest aborted"
			}
		}
		return e
	}
	status := abi.Status(int32(uint32(g.stack[0])))
	// Memory never shrinks, so the frame is still in bounds; on an engine
	// whose memory can move it is re-sliced from the current view.
	cl.frame = mem[base : uint64(base)+uint64(layout.Size)]
	if err := layout.Verify(cl.frame, base, g.meta); err != nil {
		cl.kept = false
		return c.fail(ABIViolation, err.Error(), err)
	}
	if status != abi.StatusOK {
		if !status.Valid() {
			cl.kept = false
			return c.fail(ABIViolation, fmt.Sprintf("status %d is not an ABI v1 status", int32(status)), nil)
		}
		e := c.fail(GuestError, "guest returned "+status.String(), nil)
		e.Status, e.GuestMessage = status, report.GuestError
		// RESOURCE_EXHAUSTED after a refused memory.grow is a MemoryLimit
		// (ABI.md, section 4; other statuses stay GuestError). wazero
		// reports refusals (MemoryDenied); wasmtime's C API does not, so,
		// as for traps, a guest whose memory is
		// within a page of the limit counts too: both engines then agree.
		if status == abi.StatusResourceExhausted && report.MemoryLimitHit(c.spec.Limits.MaxMemory, uint64(len(mem))) {
			cl.kept = false
			e.kind = MemoryLimit
			e.Message = sandbox.MemoryLimitMessage(c.spec.Limits.MaxMemory, "guest returned "+status.String())
		}
		return e
	}
	if report.GuestError != "" {
		c.logDroppedError(ctx, report.GuestError)
	}
	cl.ok = true
	return nil
}

// renewTries bounds the tries of one call whose worker died before the
// call reached it: the frame's allocation (prepare) and the run.
const renewTries = 3

// inputsInFrame reports whether every input lives in the call frame (none
// in guest memory outside it, as a session's do): only then can the call
// move to another instance.
func (cl *call) inputsInFrame() bool {
	for _, reg := range cl.p.layout.Inputs {
		if reg.Abs {
			return false
		}
	}
	return true
}

// renew moves the call to a new instance (pool.renew): the frame is
// prepared there and the staged inputs copied from the old frame.
func (cl *call) renew(ctx context.Context) *CallbackError {
	c := cl.c
	saved := append([]byte(nil), cl.frame...)
	g, err := c.pool.renew(ctx, cl.g)
	if err != nil {
		cl.g, cl.kept = nil, false // renew released the slot
		return cl.callerTimeout(c.callError(err, "instantiate"))
	}
	cl.g, cl.kept, cl.st.NewInstance = g, true, true
	if e := cl.prepare(ctx); e != nil {
		return cl.callerTimeout(e)
	}
	for _, reg := range cl.p.layout.Inputs {
		copy(cl.frame[reg.Off:reg.End()], saved[reg.Off:reg.End()])
	}
	return nil
}

// deliver is the deliver phase for the Go API: results copied into the
// caller's outputs (into), newly allocated, or handed out as views of guest
// memory (view). Pass-through results are the caller's own input.
func (cl *call) deliver(r *request) *CallbackError {
	specs := cl.p.specs
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
		src := cl.outputBytes(i)
		if r.view {
			r.outputs[i] = Tensor{DType: s.DType, Shape: s.Shape, Data: src}
			continue
		}
		if !r.into {
			t, err := abi.New(s.DType, s.Shape...)
			if err != nil {
				return cl.c.fail(InvalidArgument, err.Error(), err)
			}
			r.outputs[i] = t
		}
		cl.st.BytesOut += uint64(copy(r.outputs[i].Data, src))
	}
	return nil
}

// memory describes the instance's linear memory.
func (cl *call) memory() GuestMemory {
	mem := cl.g.inst.Memory()
	gm := GuestMemory{Instance: cl.g.id, Size: uint64(len(mem)), Stable: cl.g.stable}
	if len(mem) > 0 {
		gm.Base = unsafe.Pointer(unsafe.SliceData(mem))
	}
	return gm
}

// finish is the release phase.
func (cl *call) finish(ctx context.Context) {
	if cl.g != nil {
		if cl.kept {
			cl.c.pool.release(ctx, cl.g)
		} else {
			cl.c.pool.discard(ctx, cl.g)
		}
		cl.g = nil
	}
	if cl.c != nil && !cl.began.IsZero() {
		// A call refused or failed before it had an instance has a Wall
		// too: an operator's histograms must see waits that ended in a
		// timeout.
		cl.st.Wall = cl.c.sinceUnlessUntimed(cl.began)
	}
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

// matchesMetas reports whether metas are exactly the plan's input types,
// with every input in the frame.
func (p *callPlan) matchesMetas(metas []abi.TensorMeta) bool {
	if len(metas) != len(p.metas) || p.inputAt != nil {
		return false
	}
	for i, m := range metas {
		if m.DType != p.metas[i].DType || !m.Shape.Equal(p.metas[i].Shape) {
			return false
		}
	}
	return true
}

// planFor validates host tensors and returns the call's plan, from the
// cache when the input types repeat.
func (c *Callback) planFor(inputs []Tensor, inputAt []uint32) (*callPlan, *CallbackError) {
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
	return c.newPlan(metas, slices.Clone(inputAt))
}

// planMetas returns the plan for input types, from the cache when they
// repeat.
func (c *Callback) planMetas(inputs []abi.TensorMeta) (*callPlan, *CallbackError) {
	if p := c.lastPlan.Load(); p != nil && p.matchesMetas(inputs) {
		return p, nil
	}
	metas := make([]abi.TensorMeta, len(inputs))
	for i, in := range inputs {
		if !in.DType.Valid() {
			ae := &abi.ArgumentError{Index: i, Reason: fmt.Sprintf("unknown dtype %d", in.DType)}
			return nil, c.fail(InvalidArgument, ae.Error(), ae)
		}
		if _, err := in.Shape.ByteLen(in.DType); err != nil {
			ae := &abi.ArgumentError{Index: i, Reason: err.Error()}
			return nil, c.fail(InvalidArgument, ae.Error(), ae)
		}
		metas[i] = abi.TensorMeta{DType: in.DType, Shape: append(abi.Shape(nil), in.Shape...)}
	}
	return c.newPlan(metas, nil)
}

// newPlan binds the signature, checks max_output and lays out the frame.
func (c *Callback) newPlan(metas []abi.TensorMeta, inputAt []uint32) (*callPlan, *CallbackError) {
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
		msg := fmt.Sprintf("results need %s, above max_output %s", config.FormatSize(outBytes), config.FormatSize(c.spec.Limits.MaxOutput))
		return nil, c.fail(InvalidArgument, msg, nil)
	}
	layout, perr := abi.Plan(metas, specs, abi.PlanOptions{Skewed: c.skewed, InputAt: inputAt})
	if perr != nil {
		return nil, c.fail(InvalidArgument, perr.Error(), perr)
	}
	p := &callPlan{inputAt: inputAt, metas: metas, specs: specs, layout: layout}
	c.lastPlan.Store(p)
	return p, nil
}

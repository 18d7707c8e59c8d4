package host

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/sandbox"
)

// ErrSessionClosed is returned by a Session used after Release, or after a
// failed call broke its instance.
var ErrSessionClosed = errors.New("session released or broken")

// Session is the zero-copy API: it holds one instance of a callback so the
// caller can build input tensors directly in the guest's memory (Alloc) and
// read outputs in place, without the two copies of Invoke. For tensors of
// a few MiB and up the copies dominate a call; a session removes both.
//
// Lifetimes: a tensor from Alloc is valid until Release. Outputs of Invoke
// are views of guest memory valid until the next Invoke or Release; copy
// what you keep. Inputs that are not in the session's guest memory are
// copied as usual. A Session is not safe for concurrent use.
//
// The guest can read and write its own memory, tensors from Alloc
// included: treat their contents after a call as untrusted guest output.
type Session struct {
	h      *Host
	c      *Callback
	g      *guest
	mu     sync.Mutex
	broken bool
	done   bool
}

// NewSession takes an instance of the named callback out of its pool (or
// instantiates one) until Release.
func (h *Host) NewSession(ctx context.Context, name string) (*Session, error) {
	c, err := h.lookup(name)
	if err != nil {
		return nil, err
	}
	g, _, _, err := c.pool.get(ctx, time.Now(), c.spec.Limits.Timeout, 0, false)
	if err != nil {
		c.leave()
		return nil, c.acquireError(ctx, err)
	}
	return &Session{h: h, c: c, g: g}, nil
}

// Alloc allocates a tensor in the guest's memory with the guest's own
// allocator. Fill its Data, then pass it to Invoke: it is not copied. The
// block the guest returns is checked against the call frame and every
// other live block: an allocator that hands out overlapping memory breaks
// the ABI, and the session with it.
func (s *Session) Alloc(ctx context.Context, dtype abi.DType, shape ...int64) (Tensor, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done || s.broken {
		return Tensor{}, ErrSessionClosed
	}
	n, err := abi.Shape(shape).ByteLen(dtype)
	if err != nil {
		return Tensor{}, err
	}
	if n > abi.MaxTensorBytes {
		return Tensor{}, fmt.Errorf("%s%v does not fit a wasm32 memory", dtype, shape)
	}
	s.g.inst.SetDeadline(sandbox.Deadline(time.Now(), s.c.spec.Limits.Timeout))
	reg, err := s.g.allocate(ctx, uint32(max(n, 1)))
	if err != nil {
		s.broken = true
		return Tensor{}, s.c.callError(err, "allocating a session tensor")
	}
	s.g.blocks = append(s.g.blocks, reg)
	mem := s.g.inst.Memory()
	return Tensor{DType: dtype, Shape: append(abi.Shape(nil), shape...), Data: mem[reg.Off : uint64(reg.Off)+n : uint64(reg.Off)+n]}, nil
}

// inBlock returns the guest address of b when it lies inside one of the
// session's live blocks (from Alloc), or 0. Only those are passed in
// place: they are disjoint from the call frame by construction, while
// anything else in guest memory (an earlier call's output, say) may be
// overwritten by the frame.
func (s *Session) inBlock(mem, b []byte) uint32 {
	if len(b) == 0 || len(mem) == 0 {
		return 0
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p < base || p-base+uintptr(len(b)) > uintptr(len(mem)) {
		return 0
	}
	off := uint64(p - base)
	if off == 0 || off%abi.MinDataAlign != 0 {
		return 0
	}
	for _, reg := range s.g.blocks {
		if off >= uint64(reg.Off) && off+uint64(len(b)) <= reg.End() {
			return uint32(off)
		}
	}
	return 0
}

// Invoke calls the callback. Inputs in the session's tensors (from Alloc)
// are passed in place; any other input is copied; outputs are views of
// guest memory. On failure the session is broken: Release it.
func (s *Session) Invoke(ctx context.Context, inputs ...Tensor) ([]Tensor, Stats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done || s.broken {
		return nil, Stats{}, ErrSessionClosed
	}
	cl := call{c: s.c, g: s.g, kept: true, began: s.c.h.clock.now()}
	ctx, span := s.c.startSpan(ctx)
	mem := s.g.inst.Memory()
	var inputAt []uint32
	for i, in := range inputs {
		if at := s.inBlock(mem, in.Data); at != 0 {
			if inputAt == nil {
				inputAt = make([]uint32, len(inputs))
			}
			inputAt[i] = at
		}
	}
	r := request{inputs: inputs, view: true, inputAt: inputAt}
	p, cerr := s.c.planFor(inputs, inputAt)
	if cerr == nil {
		cl.p = p
		// The session's instance serves one host call after another: each
		// (this Invoke, an Alloc, the Release) has a deadline of its own.
		s.g.inst.SetDeadline(sandbox.Deadline(cl.began, s.c.spec.Limits.Timeout))
		cerr = s.runGuarded(ctx, &cl, &r)
	}
	cl.st.Wall = s.c.sinceUnlessUntimed(cl.began)
	s.c.record(ctx, pathSession, &cl.st, cerr, span)
	if cerr != nil {
		if !cl.kept {
			s.broken = true
		}
		return nil, cl.st, cerr
	}
	return r.outputs, cl.st, nil
}

// runGuarded runs the prepare, stage, run and deliver phases on the
// session's instance, with host panics contained.
func (s *Session) runGuarded(ctx context.Context, cl *call, r *request) (err *CallbackError) {
	defer func() {
		if p := recover(); p != nil {
			cl.kept = false
			err = s.c.fail(HostPanic, fmt.Sprintf("host panic during the call: %v", p), nil)
		}
	}()
	if err = cl.prepare(ctx); err != nil {
		return err
	}
	cl.stage(r.inputs)
	if err = cl.run(ctx); err != nil {
		return err
	}
	return cl.deliver(r)
}

// Release frees the session's tensors and returns the instance to its pool
// (or discards it, if a call broke it). Views from the session are invalid
// afterwards.
func (s *Session) Release(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	s.done = true
	defer s.c.leave()
	if !s.broken {
		s.g.inst.SetDeadline(sandbox.Deadline(time.Now(), s.c.spec.Limits.Timeout))
		for len(s.g.blocks) > 0 {
			reg := s.g.blocks[len(s.g.blocks)-1]
			s.g.blocks = s.g.blocks[:len(s.g.blocks)-1]
			if err := s.g.release(ctx, reg); err != nil {
				s.broken = true
				break
			}
		}
	}
	if s.broken {
		s.c.pool.discard(ctx, s.g)
		return
	}
	s.c.pool.release(ctx, s.g)
}

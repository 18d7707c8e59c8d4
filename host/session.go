package host

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/internal/sandbox"
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
	c      *callback
	g      *guest
	mu     sync.Mutex
	allocs []abi.Region
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
	g, _, err := c.pool.get(ctx, sandbox.Deadline(time.Now(), c.spec.Limits.Timeout))
	if err != nil {
		h.inflight.Done()
		return nil, c.acquireError(ctx, err)
	}
	return &Session{h: h, c: c, g: g}, nil
}

// Alloc allocates a tensor in the guest's memory with the guest's own
// allocator. Fill its Data, then pass it to Invoke: it is not copied.
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
	s.allocs = append(s.allocs, reg)
	mem := s.g.inst.Memory()
	return Tensor{DType: dtype, Shape: append(abi.Shape(nil), shape...), Data: mem[reg.Off : uint64(reg.Off)+n : uint64(reg.Off)+n]}, nil
}

// guestAddr returns the guest address of b when it lies inside the guest's
// memory, or 0.
func guestAddr(mem, b []byte) uint32 {
	if len(b) == 0 || len(mem) == 0 {
		return 0
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p < base || p-base+uintptr(len(b)) > uintptr(len(mem)) {
		return 0
	}
	off := uint32(p - base)
	if off == 0 || off%abi.MinDataAlign != 0 {
		return 0
	}
	return off
}

// Invoke calls the callback. Inputs already in the guest's memory (from
// Alloc, or outputs of a previous call) are passed in place; outputs are
// views of guest memory. On failure the session is broken: Release it.
func (s *Session) Invoke(ctx context.Context, inputs ...Tensor) ([]Tensor, Stats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done || s.broken {
		return nil, Stats{}, ErrSessionClosed
	}
	start := time.Now()
	mem := s.g.inst.Memory()
	var inputAt []uint32
	for i, in := range inputs {
		at := guestAddr(mem, in.Data)
		if at != 0 && s.g.scratch.Len > 0 && at < s.g.scratch.Off+s.g.scratch.Len && at+uint32(len(in.Data)) > s.g.scratch.Off {
			// A previous call's output lives in the frame this call
			// overwrites: pass a copy of it instead.
			inputs = slices.Clone(inputs)
			inputs[i].Data = slices.Clone(in.Data)
			continue
		}
		if at != 0 {
			if inputAt == nil {
				inputAt = make([]uint32, len(inputs))
			}
			inputAt[i] = at
		}
	}
	r := request{inputs: inputs, view: true, inputAt: inputAt}
	p, cerr := s.c.planFor(inputs, inputAt)
	if cerr != nil {
		return nil, Stats{Wall: time.Since(start)}, cerr
	}
	var st Stats
	s.g.inst.SetDeadline(sandbox.Deadline(start, s.c.spec.Limits.Timeout))
	kept, cerr := s.c.runGuarded(ctx, s.g, p.layout, &r, p.specs, &st)
	st.Wall = time.Since(start)
	if cerr != nil {
		if !kept {
			s.broken = true
		}
		return nil, st, cerr
	}
	return r.outputs, st, nil
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
	defer s.h.inflight.Done()
	if !s.broken {
		s.g.inst.SetDeadline(sandbox.Deadline(time.Now(), s.c.spec.Limits.Timeout))
		for _, reg := range s.allocs {
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

// runGuarded is run with host panics contained, for callers that manage the
// instance themselves.
func (c *callback) runGuarded(ctx context.Context, g *guest, layout *abi.FrameLayout, r *request, specs []abi.OutputSpec, st *Stats) (kept bool, err *CallbackError) {
	defer func() {
		if p := recover(); p != nil {
			kept, err = false, c.fail(HostPanic, fmt.Sprintf("host panic during the call: %v", p), nil)
		}
	}()
	return c.run(ctx, g, layout, r, specs, st)
}

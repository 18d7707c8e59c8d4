package host

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/sandbox"
)

// The types of the exports a guest's calls resolve (the ABI's, owned by
// sandbox's load check).
var (
	callbackSig = sandbox.CallbackType()
	allocSig, _ = sandbox.ExportType(abi.ExportAlloc)
	freeSig, _  = sandbox.ExportType(abi.ExportFree)
)

// guest is one instance with its resolved exports and its scratch region,
// the guest memory the host writes call frames into and reuses call after
// call.
type guest struct {
	id      uint64 // unique within the host
	onClose func(instance uint64)
	inst    sandbox.Instance
	fn      sandbox.Function // the callback export
	alloc   sandbox.Function
	free    sandbox.Function // callbox_free, once resolved
	hasFree bool             // the module exports callbox_free
	scratch abi.Region       // absolute guest address and size; Len 0 = none yet
	// blocks are live session tensors (Session.Alloc), until Release.
	blocks []abi.Region
	calls  uint64
	meta   []byte // host copy of the last frame's metadata
	stack  [4]uint64
	// stable: the instance's memory never moves (sandbox.MemoryStable).
	stable bool
	// deadline is the deadline of the host call the instance serves now
	// (Instance.SetDeadline's).
	deadline time.Time
	// maxMemory is the callback's max_memory (0: none).
	maxMemory uint64
}

// newGuest instantiates the module, runs _initialize and resolves the
// exports a call needs, all against deadline: the deadline of the host call
// (or load) it serves, which stays set on the instance. The probe instance
// made at load also checks the ABI version; later instances of the same
// module bytes need not.
func (c *Callback) newGuest(ctx context.Context, deadline time.Time, probe bool) (*guest, error) {
	inst, err := c.mod.Instantiate(ctx, deadline)
	if err != nil {
		return nil, err
	}
	g := &guest{inst: inst, id: c.h.instances.Add(1), onClose: c.h.onInstanceClose, stable: sandbox.MemoryStable(c.engine, inst), deadline: deadline, maxMemory: c.spec.Limits.MaxMemory}
	fail := func(err error) (*guest, error) {
		_ = inst.Close(ctx)
		return nil, err
	}
	if init, err := inst.Export(abi.ExportInitialize, nil, nil); err == nil {
		if err := inst.Call(ctx, init, g.stack[:0]); err != nil {
			return fail(fmt.Errorf("%s: %w", abi.ExportInitialize, err))
		}
	}
	if probe {
		ver, err := inst.Export(abi.ExportVersion, nil, []sandbox.ValType{sandbox.I32})
		if err != nil {
			return fail(err)
		}
		if err := inst.Call(ctx, ver, g.stack[:1]); err != nil {
			return fail(fmt.Errorf("%s: %w", abi.ExportVersion, err))
		}
		if v := int32(uint32(g.stack[0])); v != abi.Version {
			return fail(fmt.Errorf("guest reports ABI version %d, this host implements version %d", v, abi.Version))
		}
	}
	if g.fn, err = inst.Export(c.spec.Export, callbackSig.Params, callbackSig.Results); err != nil {
		return fail(err)
	}
	if g.alloc, err = inst.Export(abi.ExportAlloc, allocSig.Params, allocSig.Results); err != nil {
		return fail(err)
	}
	g.hasFree = c.hasFre // callbox_free is resolved on first use: a fresh instance never needs it
	return g, nil
}

// close closes the instance, first telling the host's instance observer
// (WithInstanceClose) so it can let go of the memory (unpin it, say).
func (g *guest) close(ctx context.Context) {
	if g.onClose != nil && g.id != 0 {
		g.onClose(g.id)
	}
	_ = g.inst.Close(ctx)
}

// ensureScratch makes the scratch region at least size bytes. It reuses the
// current region whenever it is large enough, so a pooled instance serving
// calls of the same shapes never grows its memory after the first.
func (g *guest) ensureScratch(ctx context.Context, size uint32) error {
	if g.scratch.Len >= size && g.scratch.Len > 0 {
		return nil
	}
	want := max(uint64(size), 2*uint64(g.scratch.Len), 4096)
	want = (want + 4095) &^ 4095
	if want > abi.MaxTensorBytes {
		want = uint64(size)
	}
	if g.scratch.Len > 0 {
		if err := g.release(ctx, g.scratch); err != nil {
			return err
		}
	}
	g.scratch = abi.Region{}
	reg, err := g.allocate(ctx, uint32(want))
	if err != nil {
		return err
	}
	g.scratch = reg
	return nil
}

// allocate asks the guest's allocator for size bytes, 64-byte aligned, and
// checks what it returns: a guest-controlled pointer.
func (g *guest) allocate(ctx context.Context, size uint32) (abi.Region, error) {
	g.stack[0], g.stack[1] = uint64(size), abi.DataAlign
	if err := g.inst.Call(ctx, g.alloc, g.stack[:2]); err != nil {
		return abi.Region{}, err
	}
	ptr := uint64(uint32(g.stack[0]))
	if ptr == 0 {
		msg := fmt.Sprintf("%s(%d, %d) returned 0: the guest could not allocate", abi.ExportAlloc, size, abi.DataAlign)
		report := g.inst.LastCall()
		memNow := uint64(len(g.inst.Memory()))
		limit := g.maxMemory
		if need := memNow + uint64(size); limit > 0 && need > limit {
			// The block cannot fit under max_memory whatever the guest's
			// allocator does: say so, and what max_memory the call needs
			// (the guest's memory now plus the block, rounded up to MiB).
			suggest := (need + 1<<20 - 1) &^ (1<<20 - 1)
			return abi.Region{}, &sandbox.Trap{Class: abi.MemoryLimit, Message: fmt.Sprintf(
				"the call needs %s of guest memory for its frame (inputs and outputs) on top of the %s the guest uses, beyond max_memory %s: set max_memory to at least %s (%s)",
				config.FormatSize(uint64(size)), config.FormatSize(memNow), config.FormatSize(limit), config.FormatSize(suggest), msg)}
		}
		if report.MemoryLimitHit(limit, memNow) {
			return abi.Region{}, &sandbox.Trap{Class: abi.MemoryLimit, Message: sandbox.MemoryLimitMessage(limit, msg)}
		}
		return abi.Region{}, &sandbox.Trap{Class: abi.GuestError, Message: msg}
	}
	mem := g.inst.Memory()
	if err := abi.CheckRange(uint64(len(mem)), ptr, uint64(size), abi.ExportAlloc+" result"); err != nil {
		return abi.Region{}, &sandbox.Trap{Class: abi.ABIViolation, Message: err.Error(), Cause: err}
	}
	if err := abi.CheckAligned(ptr, abi.DataAlign, abi.ExportAlloc+" result"); err != nil {
		return abi.Region{}, &sandbox.Trap{Class: abi.ABIViolation, Message: err.Error(), Cause: err}
	}
	reg := abi.Region{Off: uint32(ptr), Len: size}
	if err := g.checkDisjoint(reg); err != nil {
		return abi.Region{}, &sandbox.Trap{Class: abi.ABIViolation, Message: err.Error(), Cause: err}
	}
	return reg, nil
}

// checkDisjoint checks a block the guest's allocator returned against
// every block the host still holds: the scratch region (call frames) and
// the session's tensors. An allocator that hands out live memory twice
// would make the host pass one tensor's bytes as another's.
func (g *guest) checkDisjoint(reg abi.Region) error {
	overlaps := func(o abi.Region) bool {
		return o.Len > 0 && uint64(reg.Off) < o.End() && uint64(o.Off) < reg.End()
	}
	if overlaps(g.scratch) {
		return fmt.Errorf("%s returned [%#x, %#x), which overlaps the call frame at [%#x, %#x)", abi.ExportAlloc, reg.Off, reg.End(), g.scratch.Off, g.scratch.End())
	}
	for _, b := range g.blocks {
		if overlaps(b) {
			return fmt.Errorf("%s returned [%#x, %#x), which overlaps the live block at [%#x, %#x)", abi.ExportAlloc, reg.Off, reg.End(), b.Off, b.End())
		}
	}
	return nil
}

// release returns a region to the guest's allocator, when it has a free.
func (g *guest) release(ctx context.Context, reg abi.Region) error {
	if !g.hasFree {
		return nil
	}
	if g.free == nil {
		f, err := g.inst.Export(abi.ExportFree, freeSig.Params, nil)
		if err != nil {
			return err
		}
		g.free = f
	}
	g.stack[0], g.stack[1], g.stack[2] = uint64(reg.Off), uint64(reg.Len), abi.DataAlign
	return g.inst.Call(ctx, g.free, g.stack[:3])
}

// readSignatures returns the signature the callbox_signatures export
// declares for one export (nil when it declares none).
func (g *guest) readSignatures(ctx context.Context, export string) (*abi.Signature, error) {
	table, err := sandbox.ReadSignatureTable(ctx, g.inst)
	if err != nil {
		return nil, err
	}
	return table[export], nil
}

// pool holds a callback's instances. At most max exist at once; an idle
// one is reused, a broken one is closed and replaced on demand. With fresh
// isolation nothing is ever returned to the idle list.
type pool struct {
	c     *Callback
	fresh bool
	slots chan struct{} // one token per instance in use
	mu    sync.Mutex
	idle  []*guest
	live  int // instances created and not yet closed

	// For PoolStats: instances created (the probe included) and discarded.
	created, discarded atomic.Uint64
}

func newPool(c *Callback, max int) *pool {
	if max <= 0 {
		max = 1
	}
	return &pool{c: c, fresh: c.spec.FreshInstances(), slots: make(chan struct{}, max)}
}

// get returns an instance for one host call, waiting for a free slot until
// ctx is done. created reports a new instance. The call's one deadline,
// timeout from now (0: none), starts once the slot is taken (waiting for
// one is not guest time) and is armed on the instance: a new one is
// instantiated against it, an idle one has it set. Every guest entry the
// call makes runs against it.
//
// now is the caller's reading of the clock when the call began: a slot
// free at once starts the deadline from it (no clock read on the hot
// path); after a wait the clock is read again.
//
// budget, when not 0, is a limit of the caller's counted from now: when
// it ends before the callback's timeout, now plus budget is the call's
// deadline (returned as callerDeadline; zero when the deadline is the
// callback's own), and it bounds the wait for a slot. With bounded set (a
// call, not a session), ctx's deadline, when it is earlier, is the call's
// deadline instead, the same way: the engines enforce it as they enforce
// timeouts.
func (p *pool) get(ctx context.Context, now time.Time, timeout, budget time.Duration, bounded bool) (g *guest, created bool, callerDeadline time.Time, err error) {
	g, created, byCaller, deadline, err := p.acquire(ctx, now, timeout, budget, bounded)
	if byCaller {
		callerDeadline = deadline
	}
	return g, created, callerDeadline, err
}

func (p *pool) acquire(ctx context.Context, now time.Time, timeout, budget time.Duration, bounded bool) (g *guest, created, byCaller bool, deadline time.Time, err error) {
	select {
	case p.slots <- struct{}{}:
		limit := timeout
		if budget > 0 && (limit <= 0 || budget < limit) {
			limit, byCaller = budget, true
		}
		deadline = sandbox.Deadline(now, limit)
	default:
		var budgetEnd time.Time
		if budget > 0 {
			budgetEnd = now.Add(budget)
		}
		if err := p.waitSlot(ctx, now, budgetEnd, bounded); err != nil {
			return nil, false, false, deadline, err
		}
		now = p.c.h.clock.now()
		deadline = sandbox.Deadline(now, timeout)
		if !budgetEnd.IsZero() && (deadline.IsZero() || budgetEnd.Before(deadline)) {
			deadline, byCaller = budgetEnd, true
		}
	}
	if bounded {
		if d, ok := ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
			deadline, byCaller = d, true
		}
	}
	p.mu.Lock()
	for n := len(p.idle); n > 0; n = len(p.idle) {
		g = p.idle[n-1]
		p.idle = p.idle[:n-1]
		if sandbox.Alive(g.inst) {
			p.mu.Unlock()
			g.inst.SetDeadline(deadline)
			g.deadline = deadline
			return g, false, byCaller, deadline, nil
		}
		// Its worker process died (isolation: process) while it sat
		// idle: it is discarded, and the call takes another or a new one.
		p.live--
		p.mu.Unlock()
		p.discarded.Add(1)
		g.close(ctx)
		p.mu.Lock()
	}
	p.live++
	p.mu.Unlock()
	g, err = p.instantiate(ctx, deadline)
	if err != nil {
		p.mu.Lock()
		p.live--
		p.mu.Unlock()
		<-p.slots
		return nil, false, byCaller, deadline, err
	}
	p.created.Add(1)
	return g, true, byCaller, deadline, nil
}

// instantiate makes a new instance against deadline. An instantiation
// whose worker died (isolation: process: a worker killed from outside,
// say) is tried again on the worker that replaces it, up to
// instantiateTries in all and while the deadline allows: no guest code of
// the call's has run. A module whose every worker dies is held back by
// the restart backoff, which fails such tries at once.
func (p *pool) instantiate(ctx context.Context, deadline time.Time) (*guest, error) {
	for try := 1; ; try++ {
		t0 := p.c.h.clock.now()
		g, err := p.c.newGuest(ctx, deadline, false)
		p.c.recordInstantiate(ctx, time.Since(t0))
		if err == nil || try == instantiateTries || !errors.Is(err, WorkerDied) || ctx.Err() != nil ||
			!deadline.IsZero() && !p.c.h.clock.now().Before(deadline) {
			return g, err
		}
		p.c.logger.DebugContext(ctx, "callbox: instantiation lost its worker; trying a new one", "try", try, "error", err)
	}
}

// instantiateTries bounds instantiate's tries.
const instantiateTries = 3

// renew replaces, in the same slot, an instance whose worker died before
// a call reached it (sandbox.ErrNotStarted), with one on the worker that
// replaces it, against the same deadline. On failure the slot is
// released.
func (p *pool) renew(ctx context.Context, old *guest) (*guest, error) {
	deadline := old.deadline
	p.discarded.Add(1)
	old.close(ctx)
	g, err := p.instantiate(ctx, deadline)
	if err != nil {
		p.mu.Lock()
		p.live--
		p.mu.Unlock()
		<-p.slots
		return nil, err
	}
	p.created.Add(1)
	return g, nil
}

// errWaitBound is a wait for a slot that outlasted the callback's
// max_wait (acquireError makes it an Overloaded failure).
var errWaitBound = errors.New("max_wait passed")

// waitSlot waits for a free slot, from began, until ctx is done, the
// callback's max_wait passes (errWaitBound) or, when bounded, ctx's
// deadline or budgetEnd (when not zero) passes (context.DeadlineExceeded),
// whichever comes first.
func (p *pool) waitSlot(ctx context.Context, began, budgetEnd time.Time, bounded bool) error {
	end, byWait := budgetEnd, false
	if d, ok := ctx.Deadline(); ok && bounded && (end.IsZero() || d.Before(end)) {
		end = d
	}
	if mw := p.c.spec.Limits.MaxWait; mw > 0 {
		if w := began.Add(mw); end.IsZero() || w.Before(end) {
			end, byWait = w, true
		}
	}
	var expired <-chan time.Time
	if !end.IsZero() {
		t := time.NewTimer(time.Until(end))
		defer t.Stop()
		expired = t.C
	}
	select {
	case p.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-expired:
		if byWait {
			return errWaitBound
		}
		return context.DeadlineExceeded
	}
}

// release returns a healthy instance after a call.
func (p *pool) release(ctx context.Context, g *guest) {
	if p.fresh {
		p.discard(ctx, g)
		return
	}
	p.mu.Lock()
	p.idle = append(p.idle, g)
	p.mu.Unlock()
	<-p.slots
}

// discard closes an instance that must not serve another call.
func (p *pool) discard(ctx context.Context, g *guest) {
	p.discarded.Add(1)
	if !p.fresh { // with fresh isolation every call discards its instance
		p.c.logger.DebugContext(ctx, "callbox: instance discarded after a failed call", "instance", g.id)
	}
	g.close(ctx)
	p.mu.Lock()
	p.live--
	p.mu.Unlock()
	<-p.slots
}

// put adds an instance created outside get (the load-time probe).
func (p *pool) put(g *guest) {
	p.created.Add(1)
	p.mu.Lock()
	p.idle = append(p.idle, g)
	p.live++
	p.mu.Unlock()
}

// Live is the number of instances alive (idle or in use).
func (p *pool) liveCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.live
}

func (p *pool) close(ctx context.Context) {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.live -= len(idle)
	p.mu.Unlock()
	for _, g := range idle {
		g.close(ctx)
	}
}

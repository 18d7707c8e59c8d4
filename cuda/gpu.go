package cuda

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
)

// Mode chooses how a GPU moves bytes between the device and guest memory.
type Mode uint8

const (
	// Auto pins pooled instances whose memory is stable and copies
	// straight into and out of their memory; every other call copies
	// through the staging pool, or pageable when the pool is exhausted.
	Auto Mode = iota
	// Staged copies every call through the staging pool (pageable when it
	// is exhausted); guest memory is never pinned.
	Staged
	// Pageable copies straight between the device and unpinned guest
	// memory; nothing is ever pinned.
	Pageable
)

func (m Mode) String() string {
	switch m {
	case Auto:
		return "auto"
	case Staged:
		return "staged"
	case Pageable:
		return "pageable"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// CopyPath is how one call's bytes moved.
type CopyPath uint8

const (
	// PathNone: no call ran (or it copied nothing).
	PathNone CopyPath = iota
	// PathPinned: straight between the device and pinned guest memory.
	PathPinned
	// PathStaged: through a pinned staging buffer, plus a host copy.
	PathStaged
	// PathPageable: straight between the device and unpinned guest memory.
	PathPageable
)

func (p CopyPath) String() string {
	switch p {
	case PathNone:
		return "none"
	case PathPinned:
		return "pinned"
	case PathStaged:
		return "staged"
	case PathPageable:
		return "pageable"
	}
	return fmt.Sprintf("path(%d)", uint8(p))
}

// DefaultStagingLimit is the default cap on a GPU's pinned staging memory.
const DefaultStagingLimit = 256 << 20

// Options configure a GPU.
type Options struct {
	// Mode chooses pinned, staged or pageable copies (default Auto).
	Mode Mode
	// StagingLimit caps the pinned staging buffers' bytes (default
	// DefaultStagingLimit). A staged call that needs more than is free
	// copies pageable instead.
	StagingLimit uint64
	// Logger receives unpin failures (default slog.Default()).
	Logger *slog.Logger
}

// Buffer is a dense row-major tensor in device memory.
type Buffer struct {
	Ptr   DevicePtr
	DType abi.DType
	Shape abi.Shape
}

// Meta is the buffer's type.
func (b Buffer) Meta() abi.TensorMeta { return abi.TensorMeta{DType: b.DType, Shape: b.Shape} }

// Stats describe one GPU call.
type Stats struct {
	host.Stats
	// Path is how the call's bytes moved.
	Path CopyPath
	// Pinned: this call pinned guest memory (the instance's first GPU
	// call, or memory it grew by since); PinTime is what that, or
	// pinning a new staging buffer, cost.
	Pinned  bool
	PinTime time.Duration
	// Bytes queued each way; PassThrough counts results written in place
	// (an input buffer passed through: nothing copied back).
	D2HBytes, H2DBytes, D2DBytes uint64
	PassThrough                  int
	// Copy is the host's wait for the inputs to land plus its wait for the
	// results' copies (and the staged host copies).
	Copy time.Duration
}

// Totals are a GPU's counters since New.
type Totals struct {
	Calls         uint64 // calls that ran their copies
	PinnedCalls   uint64
	StagedCalls   uint64
	PageableCalls uint64
	// Pins counts registrations of guest memory (an instance's first GPU
	// call and each growth after); PinTime their cost; PinnedInstances
	// and PinnedBytes what is pinned now.
	Pins            uint64
	PinTime         time.Duration
	PinnedBytes     uint64
	PinnedInstances int
	// Unpins counts instances unpinned when the host closed them.
	Unpins uint64
	// StagingBuffers and StagingBytes are the staging pool now.
	StagingBuffers int
	StagingBytes   uint64
}

// Error is a GPU call's failure outside the guest: a buffer that does not
// fit the callback (InvalidArgument) or a device operation that failed
// (HostPanic: the host side's failure, reported as INTERNAL). A failure
// of the guest itself is the host's *host.CallbackError.
type Error struct {
	Callback string
	Chain    string // set by CallChain
	Seq      uint64
	kind     abi.Kind
	Msg      string
	Err      error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("callback %q", e.Callback)
	if e.Chain != "" {
		s += fmt.Sprintf(" (chain %q #%d)", e.Chain, e.Seq)
	}
	if e.kind == abi.InvalidArgument {
		s += " refused the GPU call before running it: " + e.Msg
	} else {
		s += " failed on the GPU path: " + e.Msg
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Kind is the failure's kind (abi.Kinder).
func (e *Error) Kind() abi.Kind { return e.kind }

// Is matches the error's Kind.
func (e *Error) Is(target error) bool { return abi.IsKind(e.kind, target) }

// GPU runs callbacks on device tensors. It is safe for concurrent use;
// each call names its own stream.
type GPU struct {
	dev     Device
	mode    Mode
	logger  *slog.Logger
	pins    pinCache
	staging stagingPool

	evMu   sync.Mutex
	events []Event

	calls, pinnedCalls, stagedCalls, pageableCalls atomic.Uint64
	pinCount, pinNanos, pinnedBytes, unpins        atomic.Uint64
}

// New returns a GPU path over dev. Create it before the host and pass
// Hooks() to host.New, so the host tells it before closing an instance
// whose memory it pinned. A GPU serves one host: instance numbers are
// unique within a host, and its pin cache is keyed on them.
func New(dev Device, opts Options) *GPU {
	if opts.StagingLimit == 0 {
		opts.StagingLimit = DefaultStagingLimit
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &GPU{
		dev: dev, mode: opts.Mode, logger: opts.Logger,
		pins:    pinCache{dev: dev, m: map[uint64]*pinnedMemory{}},
		staging: stagingPool{dev: dev, limit: opts.StagingLimit},
	}
}

// Mode is the GPU's copy mode.
func (g *GPU) Mode() Mode { return g.mode }

// Device is the device the GPU copies with.
func (g *GPU) Device() Device { return g.dev }

// Hooks is the host option that unpins an instance's memory before the
// host closes it.
func (g *GPU) Hooks() host.Option { return host.WithInstanceClose(g.InstanceClosed) }

// InstanceClosed unpins instance id's memory, if it was pinned. The host
// calls it (Hooks) while the memory is still mapped; the GPU path never
// releases an instance with copies in flight, so none touches it.
func (g *GPU) InstanceClosed(id uint64) {
	n, regions, err := g.pins.release(id)
	if regions > 0 {
		g.unpins.Add(1)
		g.pinnedBytes.Add(^(n - 1))
	}
	if err != nil {
		g.logger.Warn("callbox: unpinning guest memory failed", "instance", id, "error", err)
	}
}

// Totals are the GPU's counters.
func (g *GPU) Totals() Totals {
	bufs, bytes := g.staging.usage()
	return Totals{
		Calls: g.calls.Load(), PinnedCalls: g.pinnedCalls.Load(), StagedCalls: g.stagedCalls.Load(), PageableCalls: g.pageableCalls.Load(),
		Pins: g.pinCount.Load(), PinTime: time.Duration(g.pinNanos.Load()), PinnedBytes: g.pinnedBytes.Load(),
		PinnedInstances: g.pins.instances(), Unpins: g.unpins.Load(),
		StagingBuffers: bufs, StagingBytes: bytes,
	}
}

// Close frees the staging buffers and events. Close the host first (it
// unpins its instances through Hooks); no call may be running.
func (g *GPU) Close() error {
	err := g.staging.close()
	g.evMu.Lock()
	evs := g.events
	g.events = nil
	g.evMu.Unlock()
	for _, e := range evs {
		if derr := g.dev.DestroyEvent(e); derr != nil && err == nil {
			err = derr
		}
	}
	return err
}

func (g *GPU) event() (Event, error) {
	g.evMu.Lock()
	if n := len(g.events); n > 0 {
		e := g.events[n-1]
		g.events = g.events[:n-1]
		g.evMu.Unlock()
		return e, nil
	}
	g.evMu.Unlock()
	return g.dev.NewEvent()
}

func (g *GPU) putEvent(e Event) {
	g.evMu.Lock()
	g.events = append(g.events, e)
	g.evMu.Unlock()
}

// CallChain is Call run as chain ch's next step (host.Chain.Do): it waits
// for the chain's earlier calls, and fails without running after one of
// them failed. A GPU-path Error comes back with the chain's name and
// sequence number.
func (g *GPU) CallChain(ctx context.Context, ch *host.Chain, callback string, s Stream, inputs, outputs []Buffer) (Stats, error) {
	var st Stats
	var stepErr error
	err := ch.Do(ctx, callback, func(ctx context.Context, cb *host.Callback) error {
		st, stepErr = g.Call(ctx, cb, s, inputs, outputs)
		return stepErr
	})
	var ge *Error
	var ce *host.CallbackError
	if errors.As(stepErr, &ge) && errors.As(err, &ce) {
		ge.Chain, ge.Seq = ce.Chain, ce.Seq
		return st, ge
	}
	return st, err
}

// Call runs cb on device tensors: each input is copied from the device
// straight into its place in guest memory on stream s, s is synced, the
// guest runs under cb's limits, and each result is copied from guest
// memory into outputs[i] on s; Call returns once those copies completed,
// so the instance is never released with a copy in flight. outputs must
// have the types cb's signature derives (host.Callback.Plan). A result
// that passes an input through is written in place when its output buffer
// is that input's buffer (XLA's input_output_aliases), and copied device
// to device otherwise. A failed call leaves outputs as they were, except
// for a device failure while the results are copied back.
func (g *GPU) Call(ctx context.Context, cb *host.Callback, s Stream, inputs, outputs []Buffer) (Stats, error) {
	var st Stats
	began := time.Now()
	metas := make([]abi.TensorMeta, len(inputs))
	for i, in := range inputs {
		metas[i] = in.Meta()
	}
	plan, err := cb.Plan(metas)
	if err != nil {
		return st, err
	}
	specs := plan.Outputs()
	if err := g.check(cb, specs, inputs, outputs); err != nil {
		return st, err
	}
	call, err := cb.Start(ctx, plan)
	if err != nil {
		return st, err
	}
	c := gpuCall{g: g, cb: cb, s: s, call: call, st: &st}
	err = c.run(ctx, specs, inputs, outputs)
	call.Close(ctx)
	if c.stg != nil && !c.unsettled {
		// A buffer whose copies could not be waited for is never reused.
		g.staging.put(c.stg)
	}
	st.Stats = call.Stats()
	st.Wall = time.Since(began)
	return st, err
}

// check validates buffers against the plan before anything runs.
func (g *GPU) check(cb *host.Callback, specs []abi.OutputSpec, inputs, outputs []Buffer) error {
	if err := abi.CheckOutputs(cb.Signature(), specs, outputs); err != nil {
		return g.refuse(cb, err.Error())
	}
	for i, b := range inputs {
		if err := g.checkPtr(cb, "argument", i, b); err != nil {
			return err
		}
	}
	for i, b := range outputs {
		if err := g.checkPtr(cb, "result", i, b); err != nil {
			return err
		}
	}
	return nil
}

// checkPtr checks that a non-empty buffer is device (or managed) memory.
func (g *GPU) checkPtr(cb *host.Callback, what string, i int, b Buffer) error {
	n, err := b.Shape.ByteLen(b.DType)
	if err != nil {
		return g.refuse(cb, fmt.Sprintf("%s %d: %v", what, i, err))
	}
	if n == 0 {
		return nil
	}
	if b.Ptr == 0 {
		return g.refuse(cb, fmt.Sprintf("%s %d: null device pointer", what, i))
	}
	t, err := g.dev.PointerType(uintptr(b.Ptr))
	if err != nil {
		return &Error{Callback: cb.Name(), kind: abi.HostPanic, Msg: fmt.Sprintf("%s %d: asking the device about %#x", what, i, uintptr(b.Ptr)), Err: err}
	}
	if t != MemoryDevice && t != MemoryManaged {
		return g.refuse(cb, fmt.Sprintf("%s %d: %#x is %s, not device memory", what, i, uintptr(b.Ptr), t))
	}
	return nil
}

func (g *GPU) refuse(cb *host.Callback, msg string) error {
	return &Error{Callback: cb.Name(), kind: abi.InvalidArgument, Msg: msg}
}

// gpuCall is one call's copies.
type gpuCall struct {
	g    *GPU
	cb   *host.Callback
	s    Stream
	call *host.Call
	st   *Stats
	stg  *stagingBuf
	path CopyPath
	// regions: on the pinned path, where each registration of the
	// instance's memory starts (a copy is split at each).
	regions []unsafe.Pointer
	// unsettled: a wait for the call's copies failed, so they may still
	// be in flight (after a failed sync the device is as good as dead).
	unsettled bool
}

func (c *gpuCall) deviceErr(msg string, err error) error {
	return &Error{Callback: c.cb.Name(), kind: abi.HostPanic, Msg: msg, Err: err}
}

// choose picks the call's copy path and prepares it: pins the instance's
// memory, or takes a staging buffer of need bytes.
func (c *gpuCall) choose(need uint64) {
	g := c.g
	gm := c.call.Memory()
	if g.mode == Auto && gm.Stable && gm.Base != nil && c.cb.Info().Isolation == config.IsolationPooled && !g.pins.refused(gm.Instance) {
		res, err := g.pins.ensure(gm.Instance, gm.Base, gm.Size)
		if err == nil {
			if res.pinned {
				c.st.Pinned, c.st.PinTime = true, res.took
				g.pinCount.Add(1)
				g.pinNanos.Add(uint64(res.took))
				g.pinnedBytes.Add(res.bytes)
			}
			c.path, c.regions = PathPinned, res.regions
			return
		}
		g.logger.Warn("callbox: cannot pin guest memory; this instance copies through staging buffers", "callback", c.cb.Name(), "error", err)
	}
	if g.mode != Pageable && need > 0 {
		b, took, err := g.staging.get(need)
		if err != nil {
			g.logger.Warn("callbox: cannot allocate a pinned staging buffer; copying pageable", "callback", c.cb.Name(), "error", err)
		}
		if b != nil {
			c.stg, c.path = b, PathStaged
			c.st.PinTime += took
			return
		}
	}
	c.path = PathPageable
}

func alignUp(n uint64) uint64 { return (n + stagingAlign - 1) &^ (stagingAlign - 1) }

// run is the call after Start: copies in, sync, guest, copies out, wait.
func (c *gpuCall) run(ctx context.Context, specs []abi.OutputSpec, inputs, outputs []Buffer) error {
	g, call, st := c.g, c.call, c.st
	var inBytes, outBytes uint64
	for i := range inputs {
		inBytes += alignUp(uint64(len(call.Input(i))))
	}
	for i, s := range specs {
		if s.Alias < 0 {
			n, _ := s.Shape.ByteLen(s.DType)
			outBytes += alignUp(n)
		} else if outputs[i].Ptr == inputs[s.Alias].Ptr {
			st.PassThrough++
		}
	}
	c.choose(max(inBytes, outBytes))
	st.Path = c.path

	// Inputs: device -> guest memory (or the staging buffer), then sync.
	t0 := time.Now()
	off := uint64(0)
	for i, in := range inputs {
		dst := call.Input(i)
		n := uint64(len(dst))
		if n == 0 {
			continue
		}
		p := ptrOf(dst)
		if c.path == PathStaged {
			p = ptrOf(c.stg.mem[off : off+n])
			off += alignUp(n)
		}
		if err := c.copyD2H(p, in.Ptr, n); err != nil {
			// Earlier copies may be queued into guest memory: wait for
			// them before the instance can be released.
			if serr := g.dev.SyncStream(c.s); serr != nil {
				c.unsettled = true
			}
			return c.deviceErr(fmt.Sprintf("copying argument %d (%d bytes) to the host", i, n), err)
		}
		st.D2HBytes += n
	}
	if st.D2HBytes > 0 {
		if err := g.dev.SyncStream(c.s); err != nil {
			c.unsettled = true
			return c.deviceErr("waiting for the arguments to reach the host", err)
		}
	}
	if c.path == PathStaged {
		off = 0
		for i := range inputs {
			dst := call.Input(i)
			copy(dst, c.stg.mem[off:])
			off += alignUp(uint64(len(dst)))
		}
	}
	st.Copy = time.Since(t0)
	g.count(c.path)

	if err := call.Run(ctx); err != nil {
		return err
	}

	// Results: guest memory (or the staging buffer) -> device, then wait.
	t1 := time.Now()
	off = 0
	queued := false
	var cerr error
	for i, s := range specs {
		out := outputs[i]
		n, _ := s.Shape.ByteLen(s.DType)
		if n == 0 {
			continue
		}
		if s.Alias >= 0 {
			in := inputs[s.Alias]
			if out.Ptr == in.Ptr {
				continue // written in place: the input is the result
			}
			if err := g.dev.CopyD2D(out.Ptr, in.Ptr, n, c.s); err != nil {
				cerr = c.deviceErr(fmt.Sprintf("copying result %d (argument %d passed through)", i, s.Alias), err)
				break
			}
			queued = true
			st.D2DBytes += n
			continue
		}
		src := call.Output(i)
		if c.path == PathStaged {
			buf := c.stg.mem[off : off+n]
			copy(buf, src)
			src = buf
			off += alignUp(n)
		}
		if err := c.copyH2D(out.Ptr, ptrOf(src), n); err != nil {
			cerr = c.deviceErr(fmt.Sprintf("copying result %d (%d bytes) to the device", i, n), err)
			break
		}
		queued = true
		st.H2DBytes += n
	}
	if queued {
		if err := c.wait(); err != nil && cerr == nil {
			cerr = err
		}
	}
	st.Copy += time.Since(t1)
	return cerr
}

// copyD2H queues a copy of n bytes from the device to host memory at dst,
// split where it crosses from one pinned registration into the next.
func (c *gpuCall) copyD2H(dst unsafe.Pointer, src DevicePtr, n uint64) error {
	if c.path != PathPinned {
		return c.g.dev.CopyD2H(dst, src, n, c.s)
	}
	return pinnedPieces(c.regions, dst, n, func(p unsafe.Pointer, off, n uint64) error {
		return c.g.dev.CopyD2H(p, src+DevicePtr(off), n, c.s)
	})
}

// copyH2D queues a copy of n bytes from host memory at src to the device,
// split like copyD2H.
func (c *gpuCall) copyH2D(dst DevicePtr, src unsafe.Pointer, n uint64) error {
	if c.path != PathPinned {
		return c.g.dev.CopyH2D(dst, src, n, c.s)
	}
	return pinnedPieces(c.regions, src, n, func(p unsafe.Pointer, off, n uint64) error {
		return c.g.dev.CopyH2D(dst+DevicePtr(off), p, n, c.s)
	})
}

// wait blocks until everything the call queued on its stream completed: an
// event recorded after the copies, falling back to syncing the stream.
func (c *gpuCall) wait() error {
	g := c.g
	ev, err := g.event()
	if err == nil {
		if err = g.dev.RecordEvent(ev, c.s); err == nil {
			if err = g.dev.SyncEvent(ev); err == nil {
				g.putEvent(ev)
				return nil
			}
		}
		_ = g.dev.DestroyEvent(ev)
	}
	// The event failed; the copies may still be in flight, and the
	// instance must not be released before they complete.
	if serr := g.dev.SyncStream(c.s); serr != nil {
		c.unsettled = true
		return c.deviceErr("waiting for the results' copies", errors.Join(err, serr))
	}
	return nil
}

func (g *GPU) count(p CopyPath) {
	g.calls.Add(1)
	switch p {
	case PathPinned:
		g.pinnedCalls.Add(1)
	case PathStaged:
		g.stagedCalls.Add(1)
	case PathPageable:
		g.pageableCalls.Add(1)
	}
}

// EnvCopy names the environment variable a shared library reads the copy
// mode from (ParseMode): auto (default), staged or pageable.
const EnvCopy = "CALLBOX_CUDA_COPY"

// ParseMode parses a copy mode name (auto, staged, pageable; "" is auto).
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto", "pinned":
		return Auto, nil
	case "staged":
		return Staged, nil
	case "pageable":
		return Pageable, nil
	}
	return Auto, fmt.Errorf("%s=%q: want auto, staged or pageable", EnvCopy, s)
}

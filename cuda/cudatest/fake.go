// Package cudatest is a fake CUDA device for tests of the GPU path
// (package cuda): device memory is host memory, copies complete only at a
// sync, so a missing sync or a buffer reused too early shows up as wrong
// data.
package cudatest

import (
	"fmt"
	"sort"
	"sync"
	"unsafe"

	"github.com/seed4b3e0ccb/callbox/cuda"
)

// Poison is the byte a Fake device buffer holds until a copy into it
// completes, and the byte every destination of a queued copy holds until
// the copy completes.
const Poison = 0xDB

// FakeOp names a Fake method, for FailNext.
type FakeOp string

// The Fake operations that FailNext can make fail.
const (
	OpCopyD2H     FakeOp = "CopyD2H"
	OpCopyH2D     FakeOp = "CopyH2D"
	OpCopyD2D     FakeOp = "CopyD2D"
	OpSyncStream  FakeOp = "SyncStream"
	OpRecordEvent FakeOp = "RecordEvent"
	OpSyncEvent   FakeOp = "SyncEvent"
	OpRegister    FakeOp = "Register"
)

// FakeStats counts what a Fake was asked to do.
type FakeStats struct {
	Copies         int    // copies queued, every direction
	PinnedCopies   int    // host side entirely inside a registered range
	PageableCopies int    // host side not (entirely) registered
	D2HBytes       uint64 // bytes queued device to host
	H2DBytes       uint64 // bytes queued host to device
	D2DBytes       uint64 // bytes queued device to device
	Syncs          int    // SyncStream and SyncEvent calls
	Registers      int    // successful Register calls
	Unregisters    int    // successful Unregister calls
	Registered     uint64 // bytes registered now
}

// Fake is a cuda.Device over host memory, for tests. Its device buffers (Malloc)
// are host buffers filled with Poison. A copy is only queued when it is
// called: its destination is poisoned at once, and the bytes move — read
// from the source as it is then — when the copy completes, which is at a
// SyncStream of its stream or a SyncEvent of an event recorded after it.
// So code that reads a destination before syncing reads Poison, and code
// that reuses a source before its copy completed sends the new bytes: both
// show up as wrong data. It checks device ranges against its buffers,
// refuses double registrations, and records violations (an unregistration
// or a reuse of memory that a queued copy still touches).
type Fake struct {
	mu         sync.Mutex
	allocs     map[cuda.DevicePtr][]byte
	streams    map[cuda.Stream]*fakeStream
	nextStream cuda.Stream
	events     map[cuda.Event]*fakeEvent
	nextEvent  cuda.Event
	pinned     map[uintptr]uint64
	fail       map[FakeOp]error
	stats      FakeStats
	violations []string
}

// fakeOp is one queued copy: src is read, and dst written, when it
// completes. For a kernel (Produce) src is a private copy of its bytes.
type fakeOp struct {
	dst, src []byte
}

type fakeStream struct {
	pending []fakeOp
	done    uint64 // ops completed
	queued  uint64 // ops ever queued
}

type fakeEvent struct {
	s    cuda.Stream
	upTo uint64
}

var _ cuda.Device = (*Fake)(nil)

// NewFake returns an empty fake device.
func NewFake() *Fake {
	return &Fake{
		allocs:  map[cuda.DevicePtr][]byte{},
		streams: map[cuda.Stream]*fakeStream{0: {}},
		events:  map[cuda.Event]*fakeEvent{},
		pinned:  map[uintptr]uint64{},
		fail:    map[FakeOp]error{},
	}
}

// Malloc allocates n bytes of fake device memory, filled with Poison.
func (f *Fake) Malloc(n uint64) cuda.DevicePtr {
	b := make([]byte, max(n, 1))
	for i := range b {
		b[i] = Poison
	}
	p := cuda.DevicePtr(unsafe.Pointer(unsafe.SliceData(b)))
	f.mu.Lock()
	f.allocs[p] = b
	f.mu.Unlock()
	return p
}

// Free releases a Malloc'd buffer.
func (f *Fake) Free(p cuda.DevicePtr) {
	f.mu.Lock()
	delete(f.allocs, p)
	f.mu.Unlock()
}

// NewStream creates a stream.
func (f *Fake) NewStream() cuda.Stream {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextStream++
	s := cuda.Stream(0x5000 + f.nextStream)
	f.streams[s] = &fakeStream{}
	return s
}

// Produce queues a kernel on s that writes data (copied now) to p, as the
// program that made a callback's input would.
func (f *Fake) Produce(s cuda.Stream, p cuda.DevicePtr, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := f.streamLocked(s)
	if err != nil {
		return err
	}
	dst, err := f.deviceRangeLocked("Produce", p, uint64(len(data)))
	if err != nil {
		return err
	}
	f.queueLocked(st, fakeOp{dst: dst, src: append([]byte(nil), data...)})
	return nil
}

// Read is what device memory holds now: Poison where nothing was ever
// written or a queued copy has not completed.
func (f *Fake) Read(p cuda.DevicePtr, n uint64) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := f.deviceRangeLocked("Read", p, n)
	if err != nil {
		return nil
	}
	return append([]byte(nil), b...)
}

// Write sets device memory now (test setup), as a completed copy would.
func (f *Fake) Write(p cuda.DevicePtr, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, err := f.deviceRangeLocked("Write", p, uint64(len(data))); err == nil {
		copy(b, data)
	}
}

// Pending is the number of queued operations on s not yet completed.
func (f *Fake) Pending(s cuda.Stream) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st := f.streams[s]; st != nil {
		return len(st.pending)
	}
	return 0
}

// Stats counts what the fake was asked to do.
func (f *Fake) Stats() FakeStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// Registrations lists the registered host ranges as base -> length.
func (f *Fake) Registrations() map[uintptr]uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[uintptr]uint64, len(f.pinned))
	for p, n := range f.pinned {
		out[p] = n
	}
	return out
}

// Violations are the misuses the fake saw, in order.
func (f *Fake) Violations() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.violations...)
}

// FailNext makes the next call of op fail with err.
func (f *Fake) FailNext(op FakeOp, err error) {
	f.mu.Lock()
	f.fail[op] = err
	f.mu.Unlock()
}

func (f *Fake) injectedLocked(op FakeOp) error {
	if err, ok := f.fail[op]; ok {
		delete(f.fail, op)
		return err
	}
	return nil
}

func invalidValue(call, why string) error {
	return &cuda.RuntimeError{Call: call, Code: 1, Name: "cudaErrorInvalidValue", Msg: "invalid argument: " + why}
}

func (f *Fake) streamLocked(s cuda.Stream) (*fakeStream, error) {
	st := f.streams[s]
	if st == nil {
		return nil, &cuda.RuntimeError{Call: "stream", Code: 400, Name: "cudaErrorInvalidResourceHandle", Msg: fmt.Sprintf("invalid resource handle: no stream %#x", uintptr(s))}
	}
	return st, nil
}

// deviceRangeLocked is [p, p+n) of the device buffer it lies in.
func (f *Fake) deviceRangeLocked(call string, p cuda.DevicePtr, n uint64) ([]byte, error) {
	for base, b := range f.allocs {
		if p >= base && uint64(p-base)+n <= uint64(len(b)) {
			off := uint64(p - base)
			return b[off : off+n : off+n], nil
		}
	}
	return nil, invalidValue(call, fmt.Sprintf("[%#x, +%d) is not inside a device allocation", uintptr(p), n))
}

// hostRangeLocked checks a host range: not nil, not device memory. It
// reports whether the range is inside one registration.
func (f *Fake) hostRangeLocked(call string, p unsafe.Pointer, n uint64) (pinned bool, err error) {
	if p == nil {
		return false, invalidValue(call, "host pointer is nil")
	}
	if _, err := f.deviceRangeLocked(call, cuda.DevicePtr(p), 1); err == nil {
		return false, invalidValue(call, fmt.Sprintf("host pointer %p is device memory", p))
	}
	// As a real device does (seen on an H200, CUDA 12, driver 580): a
	// range that starts inside a registration must end inside it too; one
	// that crosses into the next registration is an invalid value.
	a := uintptr(p)
	for base, l := range f.pinned {
		if a >= base && uint64(a-base) < l {
			if uint64(a-base)+n > l {
				return false, invalidValue(call, fmt.Sprintf("host range [%#x, +%d) starts in the registration at %#x (%d bytes) and runs past its end", a, n, base, l))
			}
			return true, nil
		}
	}
	return false, nil
}

func (f *Fake) queueLocked(st *fakeStream, op fakeOp) {
	for i := range op.dst {
		op.dst[i] = Poison
	}
	st.pending = append(st.pending, op)
	st.queued++
}

// completeLocked runs st's queued ops until done reaches upTo.
func (f *Fake) completeLocked(st *fakeStream, upTo uint64) {
	for st.done < upTo && len(st.pending) > 0 {
		op := st.pending[0]
		st.pending = st.pending[1:]
		st.done++
		copy(op.dst, op.src)
	}
}

// copyLocked queues a copy of n bytes; a side is either host memory
// (hostDst, hostSrc) or device memory (devDst, devSrc).
func (f *Fake) copyLocked(op FakeOp, call string, hostDst unsafe.Pointer, devDst cuda.DevicePtr, hostSrc unsafe.Pointer, devSrc cuda.DevicePtr, n uint64, s cuda.Stream) error {
	if err := f.injectedLocked(op); err != nil {
		return err
	}
	st, err := f.streamLocked(s)
	if err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	side := func(host unsafe.Pointer, dev cuda.DevicePtr) ([]byte, error) {
		if op == OpCopyD2D || (host == nil && dev != 0) {
			return f.deviceRangeLocked(call, dev, n)
		}
		pinned, err := f.hostRangeLocked(call, host, n)
		if err != nil {
			return nil, err
		}
		if pinned {
			f.stats.PinnedCopies++
		} else {
			f.stats.PageableCopies++
		}
		return unsafe.Slice((*byte)(host), n), nil
	}
	var dst, src []byte
	switch op {
	case OpCopyD2H:
		if src, err = f.deviceRangeLocked(call, devSrc, n); err == nil {
			dst, err = side(hostDst, 0)
		}
	case OpCopyH2D:
		if dst, err = f.deviceRangeLocked(call, devDst, n); err == nil {
			src, err = side(hostSrc, 0)
		}
	default:
		if src, err = f.deviceRangeLocked(call, devSrc, n); err == nil {
			dst, err = f.deviceRangeLocked(call, devDst, n)
		}
	}
	if err != nil {
		return err
	}
	f.stats.Copies++
	switch op {
	case OpCopyD2H:
		f.stats.D2HBytes += n
	case OpCopyH2D:
		f.stats.H2DBytes += n
	default:
		f.stats.D2DBytes += n
	}
	f.queueLocked(st, fakeOp{dst: dst, src: src})
	return nil
}

func (f *Fake) CopyD2H(dst unsafe.Pointer, src cuda.DevicePtr, n uint64, s cuda.Stream) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.copyLocked(OpCopyD2H, "cudaMemcpyAsync(device to host)", dst, 0, nil, src, n, s)
}

func (f *Fake) CopyH2D(dst cuda.DevicePtr, src unsafe.Pointer, n uint64, s cuda.Stream) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.copyLocked(OpCopyH2D, "cudaMemcpyAsync(host to device)", nil, dst, src, 0, n, s)
}

func (f *Fake) CopyD2D(dst, src cuda.DevicePtr, n uint64, s cuda.Stream) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.copyLocked(OpCopyD2D, "cudaMemcpyAsync(device to device)", nil, dst, nil, src, n, s)
}

func (f *Fake) SyncStream(s cuda.Stream) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injectedLocked(OpSyncStream); err != nil {
		return err
	}
	st, err := f.streamLocked(s)
	if err != nil {
		return err
	}
	f.stats.Syncs++
	f.completeLocked(st, st.queued)
	return nil
}

func (f *Fake) NewEvent() (cuda.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextEvent++
	e := cuda.Event(0xE000 + f.nextEvent)
	f.events[e] = &fakeEvent{}
	return e, nil
}

func (f *Fake) RecordEvent(e cuda.Event, s cuda.Stream) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injectedLocked(OpRecordEvent); err != nil {
		return err
	}
	ev := f.events[e]
	if ev == nil {
		return &cuda.RuntimeError{Call: "cudaEventRecord", Code: 400, Name: "cudaErrorInvalidResourceHandle", Msg: "no such event"}
	}
	st, err := f.streamLocked(s)
	if err != nil {
		return err
	}
	ev.s, ev.upTo = s, st.queued
	return nil
}

func (f *Fake) SyncEvent(e cuda.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injectedLocked(OpSyncEvent); err != nil {
		return err
	}
	ev := f.events[e]
	if ev == nil {
		return &cuda.RuntimeError{Call: "cudaEventSynchronize", Code: 400, Name: "cudaErrorInvalidResourceHandle", Msg: "no such event"}
	}
	f.stats.Syncs++
	if st := f.streams[ev.s]; st != nil {
		f.completeLocked(st, ev.upTo)
	}
	return nil
}

func (f *Fake) DestroyEvent(e cuda.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.events[e] == nil {
		return &cuda.RuntimeError{Call: "cudaEventDestroy", Code: 400, Name: "cudaErrorInvalidResourceHandle", Msg: "no such event"}
	}
	delete(f.events, e)
	return nil
}

func (f *Fake) Register(p unsafe.Pointer, n uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injectedLocked(OpRegister); err != nil {
		return err
	}
	if p == nil || n == 0 {
		return invalidValue("cudaHostRegister", "empty range")
	}
	a := uintptr(p)
	for base, l := range f.pinned {
		if a < base+uintptr(l) && base < a+uintptr(n) {
			return &cuda.RuntimeError{Call: "cudaHostRegister", Code: 712, Name: "cudaErrorHostMemoryAlreadyRegistered",
				Msg: fmt.Sprintf("part or all of the requested memory range [%#x, +%d) is already registered at [%#x, +%d)", a, n, base, l)}
		}
	}
	f.pinned[a] = n
	f.stats.Registers++
	f.stats.Registered += n
	return nil
}

func (f *Fake) Unregister(p unsafe.Pointer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := uintptr(p)
	n, ok := f.pinned[a]
	if !ok {
		return &cuda.RuntimeError{Call: "cudaHostUnregister", Code: 713, Name: "cudaErrorHostMemoryNotRegistered", Msg: "pointer does not correspond to a registered memory region"}
	}
	if f.touchedLocked(a, n) {
		f.violations = append(f.violations, fmt.Sprintf("unregistered [%#x, +%d) while a queued copy still uses it", a, n))
	}
	delete(f.pinned, a)
	f.stats.Unregisters++
	f.stats.Registered -= n
	return nil
}

// touchedLocked reports whether a queued copy reads or writes [a, a+n).
func (f *Fake) touchedLocked(a uintptr, n uint64) bool {
	for _, st := range f.streams {
		for _, op := range st.pending {
			for _, b := range [][]byte{op.dst, op.src} {
				if len(b) == 0 {
					continue
				}
				p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
				if p < a+uintptr(n) && a < p+uintptr(len(b)) {
					return true
				}
			}
		}
	}
	return false
}

// Busy reports whether a queued copy still reads or writes the host or
// device range [p, p+n): memory that must not be reused yet. Code that
// releases a buffer may check it; the GPU path's tests do.
func (f *Fake) Busy(p unsafe.Pointer, n uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.touchedLocked(uintptr(p), n)
}

func (f *Fake) PointerType(addr uintptr) (cuda.MemoryType, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.deviceRangeLocked("cudaPointerGetAttributes", cuda.DevicePtr(addr), 1); err == nil {
		return cuda.MemoryDevice, nil
	}
	bases := make([]uintptr, 0, len(f.pinned))
	for b := range f.pinned {
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	for _, b := range bases {
		if addr >= b && uint64(addr-b) < f.pinned[b] {
			return cuda.MemoryHost, nil
		}
	}
	return cuda.MemoryUnregistered, nil
}

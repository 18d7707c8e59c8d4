package cuda

import (
	"fmt"
	"sync"
	"unsafe"
)

// RuntimeLibraries are the CUDA runtime libraries OpenRuntime tries, in
// order.
var RuntimeLibraries = []string{"libcudart.so.13", "libcudart.so.12"}

// cudaMemcpyKind values.
const (
	memcpyHostToDevice   = 1
	memcpyDeviceToHost   = 2
	memcpyDeviceToDevice = 3
)

// cudaEventDisableTiming: events only order work; timing costs.
const eventDisableTiming = 2

// pointerAttributes is struct cudaPointerAttributes as CUDA 12 and 13
// declare it: the four fields callbox reads, then reserved[8], which the
// runtime writes too (88 bytes in all). Declaring only the first four (24
// bytes, CUDA 11's layout) let cudaPointerGetAttributes write 64 bytes past
// a Go heap object into its neighbours: on an H200 with jaxlib 0.11.2 that
// corrupted wazero's state once in about a hundred GPU calls. slack leaves
// room for a later runtime that grows the struct again.
type pointerAttributes struct {
	Type          int32
	Device        int32
	DevicePointer uintptr
	HostPointer   uintptr
	Reserved      [8]int64
	slack         [16]int64
}

// Runtime is the CUDA runtime library loaded at run time. Its functions
// are called through purego: no cgo, no CUDA headers.
type Runtime struct {
	Library string // the library that was loaded

	memcpyAsync    func(dst, src uintptr, n uint64, kind int32, s uintptr) int32
	streamSync     func(s uintptr) int32
	eventCreate    func(ev *uintptr, flags uint32) int32
	eventRecord    func(ev, s uintptr) int32
	eventSync      func(ev uintptr) int32
	eventDestroy   func(ev uintptr) int32
	hostRegister   func(p uintptr, n uint64, flags uint32) int32
	hostUnregister func(p uintptr) int32
	pointerAttrs   func(attr *pointerAttributes, p uintptr) int32
	getLastError   func() int32
	errorName      func(code int32) string
	errorString    func(code int32) string
}

var _ Device = (*Runtime)(nil)

// symbols binds each runtime function the path uses.
func (r *Runtime) symbols() []struct {
	name string
	fn   any
} {
	return []struct {
		name string
		fn   any
	}{
		{"cudaMemcpyAsync", &r.memcpyAsync},
		{"cudaStreamSynchronize", &r.streamSync},
		{"cudaEventCreateWithFlags", &r.eventCreate},
		{"cudaEventRecord", &r.eventRecord},
		{"cudaEventSynchronize", &r.eventSync},
		{"cudaEventDestroy", &r.eventDestroy},
		{"cudaHostRegister", &r.hostRegister},
		{"cudaHostUnregister", &r.hostUnregister},
		{"cudaPointerGetAttributes", &r.pointerAttrs},
		{"cudaGetLastError", &r.getLastError},
		{"cudaGetErrorName", &r.errorName},
		{"cudaGetErrorString", &r.errorString},
	}
}

// check turns a cudaError_t into an error.
func (r *Runtime) check(call string, code int32) error {
	if code == 0 {
		return nil
	}
	return &RuntimeError{Call: call, Code: int(code), Name: r.errorName(code), Msg: r.errorString(code)}
}

func (r *Runtime) CopyD2H(dst unsafe.Pointer, src DevicePtr, n uint64, s Stream) error {
	return r.check("cudaMemcpyAsync(device to host)", r.memcpyAsync(uintptr(dst), uintptr(src), n, memcpyDeviceToHost, uintptr(s)))
}

func (r *Runtime) CopyH2D(dst DevicePtr, src unsafe.Pointer, n uint64, s Stream) error {
	return r.check("cudaMemcpyAsync(host to device)", r.memcpyAsync(uintptr(dst), uintptr(src), n, memcpyHostToDevice, uintptr(s)))
}

func (r *Runtime) CopyD2D(dst, src DevicePtr, n uint64, s Stream) error {
	return r.check("cudaMemcpyAsync(device to device)", r.memcpyAsync(uintptr(dst), uintptr(src), n, memcpyDeviceToDevice, uintptr(s)))
}

func (r *Runtime) SyncStream(s Stream) error {
	return r.check("cudaStreamSynchronize", r.streamSync(uintptr(s)))
}

func (r *Runtime) NewEvent() (Event, error) {
	var ev uintptr
	if err := r.check("cudaEventCreateWithFlags", r.eventCreate(&ev, eventDisableTiming)); err != nil {
		return 0, err
	}
	return Event(ev), nil
}

func (r *Runtime) RecordEvent(e Event, s Stream) error {
	return r.check("cudaEventRecord", r.eventRecord(uintptr(e), uintptr(s)))
}

func (r *Runtime) SyncEvent(e Event) error {
	return r.check("cudaEventSynchronize", r.eventSync(uintptr(e)))
}

func (r *Runtime) DestroyEvent(e Event) error {
	return r.check("cudaEventDestroy", r.eventDestroy(uintptr(e)))
}

func (r *Runtime) Register(p unsafe.Pointer, n uint64) error {
	return r.check(fmt.Sprintf("cudaHostRegister(%p, %d bytes)", p, n), r.hostRegister(uintptr(p), n, 0))
}

func (r *Runtime) Unregister(p unsafe.Pointer) error {
	return r.check(fmt.Sprintf("cudaHostUnregister(%p)", p), r.hostUnregister(uintptr(p)))
}

func (r *Runtime) PointerType(addr uintptr) (MemoryType, error) {
	var a pointerAttributes
	if code := r.pointerAttrs(&a, addr); code != 0 {
		// A failed query leaves a (non-sticky) error behind; clear it so
		// the next call does not report it.
		r.getLastError()
		return 0, r.check("cudaPointerGetAttributes", code)
	}
	return MemoryType(a.Type), nil
}

// LazyRuntime is a Device that loads the CUDA runtime on first use. A
// process that never makes a GPU call never loads it; on a machine without
// CUDA every method returns the one load error (matching ErrNoRuntime).
type LazyRuntime struct {
	once sync.Once
	rt   *Runtime
	err  error
}

var _ Device = (*LazyRuntime)(nil)

func (l *LazyRuntime) load() (*Runtime, error) {
	l.once.Do(func() { l.rt, l.err = OpenRuntime() })
	return l.rt, l.err
}

func (l *LazyRuntime) CopyD2H(dst unsafe.Pointer, src DevicePtr, n uint64, s Stream) error {
	r, err := l.load()
	if err != nil {
		return err
	}
	return r.CopyD2H(dst, src, n, s)
}

func (l *LazyRuntime) CopyH2D(dst DevicePtr, src unsafe.Pointer, n uint64, s Stream) error {
	r, err := l.load()
	if err != nil {
		return err
	}
	return r.CopyH2D(dst, src, n, s)
}

func (l *LazyRuntime) CopyD2D(dst, src DevicePtr, n uint64, s Stream) error {
	r, err := l.load()
	if err != nil {
		return err
	}
	return r.CopyD2D(dst, src, n, s)
}

func (l *LazyRuntime) SyncStream(s Stream) error {
	r, err := l.load()
	if err != nil {
		return err
	}
	return r.SyncStream(s)
}

func (l *LazyRuntime) NewEvent() (Event, error) {
	r, err := l.load()
	if err != nil {
		return 0, err
	}
	return r.NewEvent()
}

func (l *LazyRuntime) RecordEvent(e Event, s Stream) error {
	r, err := l.load()
	if err != nil {
		return err
	}
	return r.RecordEvent(e, s)
}

func (l *LazyRuntime) SyncEvent(e Event) error {
	r, err := l.load()
	if err != nil {
		return err
	}
	return r.SyncEvent(e)
}

func (l *LazyRuntime) DestroyEvent(e Event) error {
	r, err := l.load()
	if err != nil {
		return err
	}
	return r.DestroyEvent(e)
}

func (l *LazyRuntime) Register(p unsafe.Pointer, n uint64) error {
	r, err := l.load()
	if err != nil {
		return err
	}
	return r.Register(p, n)
}

func (l *LazyRuntime) Unregister(p unsafe.Pointer) error {
	r, err := l.load()
	if err != nil {
		return err
	}
	return r.Unregister(p)
}

func (l *LazyRuntime) PointerType(addr uintptr) (MemoryType, error) {
	r, err := l.load()
	if err != nil {
		return 0, err
	}
	return r.PointerType(addr)
}

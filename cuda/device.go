package cuda

import (
	"errors"
	"fmt"
	"unsafe"
)

// Stream is a CUDA stream (cudaStream_t, the same handle as the driver's
// CUstream, which XLA hands an FFI handler). 0 is the legacy default
// stream.
type Stream uintptr

// Event is a CUDA event (cudaEvent_t).
type Event uintptr

// DevicePtr is an address in device memory. It is kept as an integer, never
// as a Go pointer: the garbage collector must not see device addresses.
type DevicePtr uintptr

// MemoryType is what cudaPointerGetAttributes says an address is.
type MemoryType int32

// The memory types, numbered as cudaMemoryType.
const (
	MemoryUnregistered MemoryType = 0 // ordinary pageable host memory
	MemoryHost         MemoryType = 1 // page-locked host memory
	MemoryDevice       MemoryType = 2 // device memory
	MemoryManaged      MemoryType = 3 // managed (unified) memory
)

func (m MemoryType) String() string {
	switch m {
	case MemoryUnregistered:
		return "pageable host memory"
	case MemoryHost:
		return "pinned host memory"
	case MemoryDevice:
		return "device memory"
	case MemoryManaged:
		return "managed memory"
	}
	return fmt.Sprintf("memory type %d", int32(m))
}

// Device is the part of the CUDA runtime the GPU path uses. Copies are
// asynchronous: they are queued on a stream and may read their source and
// write their destination at any time until a SyncStream of that stream,
// or a SyncEvent of an event recorded after them, returns. Implementations
// are safe for concurrent use.
type Device interface {
	// CopyD2H queues a copy of n bytes from device memory to host memory.
	CopyD2H(dst unsafe.Pointer, src DevicePtr, n uint64, s Stream) error
	// CopyH2D queues a copy of n bytes from host memory to device memory.
	CopyH2D(dst DevicePtr, src unsafe.Pointer, n uint64, s Stream) error
	// CopyD2D queues a copy of n bytes within device memory.
	CopyD2D(dst, src DevicePtr, n uint64, s Stream) error
	// SyncStream waits until everything queued on s has completed.
	SyncStream(s Stream) error
	// NewEvent creates an event (without timing).
	NewEvent() (Event, error)
	// RecordEvent marks the point of s's queue that e's SyncEvent waits for.
	RecordEvent(e Event, s Stream) error
	// SyncEvent waits until the work before e's last record has completed.
	SyncEvent(e Event) error
	// DestroyEvent frees e.
	DestroyEvent(e Event) error
	// Register page-locks n bytes of host memory from p (cudaHostRegister).
	// Every page of the range must be accessible.
	Register(p unsafe.Pointer, n uint64) error
	// Unregister undoes the Register that started at p.
	Unregister(p unsafe.Pointer) error
	// PointerType says what kind of memory addr is.
	PointerType(addr uintptr) (MemoryType, error)
}

// RuntimeError is a failed CUDA runtime call.
type RuntimeError struct {
	Call string // the runtime function, "cudaMemcpyAsync"
	Code int    // cudaError_t
	Name string // "cudaErrorInvalidValue"
	Msg  string // "invalid argument"
}

func (e *RuntimeError) Error() string {
	if e.Name == "" {
		return fmt.Sprintf("%s failed: CUDA error %d", e.Call, e.Code)
	}
	return fmt.Sprintf("%s failed: %s (%d): %s", e.Call, e.Name, e.Code, e.Msg)
}

// ErrNoRuntime is matched (errors.Is) by every error that comes from a
// missing CUDA runtime.
var ErrNoRuntime = errors.New("CUDA runtime not available")

// ptrOf is the address of b's first byte (nil for an empty slice).
func ptrOf(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(b))
}

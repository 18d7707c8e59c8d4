// Package xla is callbox's XLA FFI handler for the CUDA platform,
// callbox_xla_ffi_cuda: a jitted JAX (or any XLA) program on a GPU calls a
// callback through jax.ffi.ffi_call, and its device buffers take the GPU
// path of package cuda (device -> guest memory on XLA's stream, the guest
// under its limits, guest memory -> device, the instance released only
// after the copies completed).
//
// Register it from JAX with platform="CUDA":
//
//	jax.ffi.register_ffi_target("callbox_cuda", jax.ffi.pycapsule(lib.callbox_xla_ffi_cuda), platform="CUDA")
//	y = jax.ffi.ffi_call("callbox_cuda", jax.ShapeDtypeStruct(x.shape, x.dtype))(x, callback="scale")
//
// Attributes: callback (string, required: a name or content id), chain
// (string, optional: run the call as that chain's next step). TOKEN
// buffers (ordering) are skipped. Failures come back as XLA errors whose
// code is the failure kind's absl code (abi.Kind.Code).
//
// The C ABI gives a handler no user data, so the host and GPU path it
// serves are installed process-wide with Install. A shared library wires
// it in three steps: import this package (its C symbols,
// callbox_xla_ffi_cuda, callbox_cuda_call_dlpack and callbox_cuda_stats,
// are then exported); create each host with a GPU path,
//
//	gpu, err := xla.NewGPU(os.Getenv, logger) // CALLBOX_CUDA_COPY
//	h, err := host.New(ctx, cfg, host.WithLogger(logger), gpu.Hooks())
//
// and Install(h, gpu) when h becomes the default host (Uninstall when it
// is cleared or closed). One GPU path serves one host.
package xla

/*
#include "xla_cuda.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/cuda"
	"github.com/seed4b3e0ccb/callbox/host"
)

// MaxBuffers is the most non-token arguments, and results, a call may have.
const MaxBuffers = C.CBCUDA_MAX_BUFFERS

// maxAttr bounds the callback and chain attributes.
const maxAttr = 4096

type target struct {
	h   *host.Host
	gpu *cuda.GPU
}

// installed is what the handler serves: the C ABI carries no handle, so it
// is process-wide (as the CPU handler's default host is).
var installed atomic.Pointer[target]

// Install makes the handler serve h's callbacks through gpu (created with
// cuda.New and passed to host.New as gpu.Hooks()). It replaces any earlier
// installation; calls already running finish on the old one.
func Install(h *host.Host, gpu *cuda.GPU) {
	installed.Store(&target{h: h, gpu: gpu})
}

// Uninstall stops serving; later calls fail with FAILED_PRECONDITION.
func Uninstall() { installed.Store(nil) }

// Handler is the address of callbox_xla_ffi_cuda (an XLA_FFI_Handler*),
// for registering it without the shared library's symbol table.
func Handler() unsafe.Pointer { return unsafe.Pointer(C.callbox_xla_ffi_cuda) }

// DLPackEntry is the address of callbox_cuda_call_dlpack.
func DLPackEntry() unsafe.Pointer { return C.cbcuda_dlpack_entry() }

// buf is one XLA buffer as the C side flattened it.
type buf struct {
	dtype int32
	index int32 // XLA's position
	data  uintptr
	dims  []int64
}

// ErrNotInstalled is the handler's error before Install.
var ErrNotInstalled = errors.New("callbox_xla_ffi_cuda: no host installed (install one before running the program: the library's set-default-host call, or xla.Install)")

// codeOf is the XLA error code for err.
func codeOf(err error) abi.Code {
	switch {
	case errors.Is(err, ErrNotInstalled), errors.Is(err, host.ErrClosed):
		return abi.CodeFailedPrecondition
	case errors.Is(err, host.ErrUnknownCallback):
		return abi.CodeNotFound
	}
	k := abi.KindOf(err)
	if k == abi.KindNone {
		return abi.CodeInternal
	}
	status := abi.StatusOK
	var ce *host.CallbackError
	if errors.As(err, &ce) {
		status = ce.Status
	}
	return k.Code(status)
}

// refused is an error for buffers the handler refuses before any copy.
type refused struct{ msg string }

func (r *refused) Error() string  { return "callbox_xla_ffi_cuda: " + r.msg }
func (r *refused) Kind() abi.Kind { return abi.InvalidArgument }

// buffers turns XLA's buffers into device buffers; every number is XLA's
// (so, through a program, the user's) and is checked.
func buffers(what string, bs []buf) ([]cuda.Buffer, error) {
	out := make([]cuda.Buffer, len(bs))
	for i, b := range bs {
		d := abi.DType(b.dtype)
		if !d.Valid() {
			return nil, &refused{fmt.Sprintf("%s %d: XLA element type %d is not one callbox supports", what, b.index, b.dtype)}
		}
		shape := make(abi.Shape, len(b.dims))
		for j, n := range b.dims {
			if n < 0 {
				return nil, &refused{fmt.Sprintf("%s %d: dimension %d is %d", what, b.index, j, n)}
			}
			shape[j] = n
		}
		out[i] = cuda.Buffer{Ptr: cuda.DevicePtr(b.data), DType: d, Shape: shape}
	}
	return out, nil
}

// serve runs one call for the handler.
func serve(ctx context.Context, t *target, s cuda.Stream, name, chain string, args, rets []buf) error {
	if t == nil {
		return ErrNotInstalled
	}
	ins, err := buffers("argument", args)
	if err != nil {
		return err
	}
	outs, err := buffers("result", rets)
	if err != nil {
		return err
	}
	if chain != "" {
		_, err = t.gpu.CallChain(ctx, t.h.Chain(chain), name, s, ins, outs)
		return err
	}
	cb, err := t.h.Lookup(name)
	if err != nil {
		return err
	}
	_, err = t.gpu.Call(ctx, cb, s, ins, outs)
	return err
}

// cBufs reads the C side's flat buffer list.
func cBufs(p *C.cbcuda_buf, n C.int64_t) ([]buf, error) {
	if n < 0 || n > MaxBuffers || (n > 0 && p == nil) {
		return nil, fmt.Errorf("bad buffer list (%d entries)", n)
	}
	if n == 0 {
		return nil, nil
	}
	cs := unsafe.Slice(p, n)
	out := make([]buf, n)
	for i, c := range cs {
		if c.rank < 0 || c.rank > abi.MaxRank {
			return nil, &refused{fmt.Sprintf("buffer %d has rank %d (callbox supports 0..%d)", c.index, c.rank, abi.MaxRank)}
		}
		b := buf{dtype: int32(c.dtype), index: int32(c.index), data: uintptr(c.data)}
		if c.rank > 0 {
			b.dims = append([]int64(nil), unsafe.Slice((*int64)(unsafe.Pointer(c.dims)), c.rank)...)
		}
		out[i] = b
	}
	return out, nil
}

// writeMsg copies s, NUL-terminated and truncated to fit, into the C
// buffer.
func writeMsg(p *C.char, capacity C.size_t, s string) {
	if p == nil || capacity == 0 {
		return
	}
	dst := unsafe.Slice((*byte)(unsafe.Pointer(p)), capacity)
	n := copy(dst[:capacity-1], s)
	dst[n] = 0
}

//export callboxCudaXLACall
func callboxCudaXLACall(stream C.uintptr_t, name *C.char, nameLen C.size_t, chain *C.char, chainLen C.size_t,
	args *C.cbcuda_buf, nargs C.int64_t, rets *C.cbcuda_buf, nrets C.int64_t, msg *C.char, msgCap C.size_t) (code C.int) {
	defer func() {
		// No Go panic may cross into XLA.
		if p := recover(); p != nil {
			writeMsg(msg, msgCap, fmt.Sprintf("callbox_xla_ffi_cuda: internal error: %v", p))
			code = C.int(abi.CodeInternal)
		}
	}()
	err := func() error {
		a, err := cBufs(args, nargs)
		if err != nil {
			return err
		}
		r, err := cBufs(rets, nrets)
		if err != nil {
			return err
		}
		if nameLen > maxAttr || chainLen > maxAttr {
			return &refused{fmt.Sprintf("callback or chain attribute longer than %d bytes", maxAttr)}
		}
		cb := C.GoStringN(name, C.int(nameLen))
		ch := ""
		if chain != nil && chainLen > 0 {
			ch = C.GoStringN(chain, C.int(chainLen))
		}
		return serve(context.Background(), installed.Load(), cuda.Stream(stream), cb, ch, a, r)
	}()
	if err == nil {
		return 0
	}
	writeMsg(msg, msgCap, err.Error())
	return C.int(codeOf(err))
}

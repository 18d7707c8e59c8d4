//go:build cgo

package main

/*
#define CALLBOX_BUILDING_LIBRARY 1
#include "include/callbox.h"
void *cbx_entry_addr(int which);
*/
import "C"

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"
	"unsafe"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/cuda"
	"github.com/seed4b3e0ccb/callbox/ffi/internal/dlpack"
	"github.com/seed4b3e0ccb/callbox/host"
)

// The GPU entries: the CUDA XLA handler's calls (xla.go, with a stream)
// and callbox_cuda_call_dlpack reach the default host's GPU path (package
// cuda) here; callbox_cuda_stats reports it. Every host opened through
// the library has a GPU path (openHost), whose CUDA runtime loads on the
// first GPU call.

// gpuCall runs a call on device buffers on stream s (on a chain when
// chain is not "").
func (bh *bridgeHost) gpuCall(ctx context.Context, chain string, ci *cbInfo, s cuda.Stream, ins, outs []cuda.Buffer) error {
	var err error
	if chain == "" {
		_, err = bh.gpu.Call(ctx, ci.cb, s, ins, outs)
		if errors.Is(err, host.ErrReplaced) {
			err = bh.retryReplaced(ci.name, func(cb *host.Callback) error {
				_, err := bh.gpu.Call(ctx, cb, s, ins, outs)
				return err
			})
		}
	} else {
		_, err = bh.gpu.CallChain(ctx, bh.h.Chain(chain), ci.name, s, ins, outs)
	}
	return err
}

// dlpackList views a C array of n tensor pointers (no copy of the
// tensors); role names it in errors.
func dlpackList(role string, p unsafe.Pointer, n uintptr) ([]*dlpack.Tensor, error) {
	if n == 0 {
		return nil, nil
	}
	if p == nil {
		return nil, badArg(arg(role+"s"), "NULL with a count of %d", n)
	}
	if n > maxTensors {
		return nil, badArg(arg(role+"s"), "count %d exceeds the maximum %d", n, maxTensors)
	}
	ts := unsafe.Slice((**dlpack.Tensor)(p), n)
	for i, t := range ts {
		if t == nil {
			return nil, badArg(argName{role, i}, "NULL tensor")
		}
	}
	return ts, nil
}

// dlpackBuffers describes CUDA DLPack tensors as device buffers, with the
// checks of the C API's host tensors (package dlpack holds the one set;
// only the memory accepted differs). All of a call's tensors must be on
// one device: *device is the first one's (-1 before it).
func dlpackBuffers(role string, ts []*dlpack.Tensor, device *int32) ([]cuda.Buffer, error) {
	bs := make([]cuda.Buffer, len(ts))
	for i, t := range ts {
		v, err := dlpack.Check(t, dlpack.OnDevice)
		if err != nil {
			return nil, dlError(role, i, err)
		}
		if *device >= 0 && t.Device.ID != *device {
			return nil, badArg(argName{role, i}, "on CUDA device %d, while an earlier tensor is on device %d", t.Device.ID, *device)
		}
		*device = t.Device.ID
		bs[i] = cuda.Buffer{Ptr: cuda.DevicePtr(uintptr(v.Addr)), DType: v.DType, Shape: append([]int64(nil), v.Shape...)}
	}
	return bs, nil
}

// cudaCallDLPack is callbox_cuda_call_dlpack in Go.
func cudaCallDLPack(callback *byte, stream uintptr, inputs unsafe.Pointer, nIn uintptr, outputs unsafe.Pointer, nOut uintptr) error {
	name, err := cString(callback, "callback")
	if err != nil {
		return err
	}
	ins, err := dlpackList("input", inputs, nIn)
	if err != nil {
		return err
	}
	outs, err := dlpackList("output", outputs, nOut)
	if err != nil {
		return err
	}
	ctx := context.Background()
	bh, err := getDefault(ctx)
	if err != nil {
		return err
	}
	if err := bh.open(); err != nil {
		return err
	}
	ci, err := bh.resolve(name)
	if err != nil {
		return err
	}
	device := int32(-1)
	gins, err := dlpackBuffers("input", ins, &device)
	if err != nil {
		return ci.refused(err)
	}
	gouts, err := dlpackBuffers("output", outs, &device)
	if err != nil {
		return ci.refused(err)
	}
	return bh.gpuCall(ctx, "", ci, cuda.Stream(stream), gins, gouts)
}

// retryReplaced runs call again on the version of callback name the host
// serves now, after a reload replaced the one a call had resolved (the
// call never ran: ErrReplaced is refused before anything starts). A
// reload that replaces it again in between makes it try again.
func (bh *bridgeHost) retryReplaced(name string, call func(*host.Callback) error) error {
	for {
		cb, err := bh.h.Lookup(name)
		if err != nil {
			return err
		}
		if err = call(cb); !errors.Is(err, host.ErrReplaced) {
			return err
		}
	}
}

// callbox_cuda_call_dlpack calls the default host's callback on DLPack
// tensors in CUDA memory (PyTorch, CuPy): inputs and outputs are arrays of
// tensor pointers (a DLManagedTensor* works: its tensor comes first),
// stream the CUDA stream the tensors are ordered on. It returns 0, or the
// failure's absl code (the one mapper, errors.go) with its message in msg.
//
//export cbxgo_cuda_call_dlpack
func cbxgo_cuda_call_dlpack(callback *C.char, stream C.uintptr_t, inputs unsafe.Pointer, nInputs C.size_t,
	outputs unsafe.Pointer, nOutputs C.size_t, msg *C.char, msgCap C.size_t) (code C.int) {
	defer func() {
		if p := recover(); p != nil {
			cd, m := xlaMessage(panicError("callbox_cuda_call_dlpack", p))
			writeMsg(msg, msgCap, m)
			code = C.int(cd)
		}
	}()
	err := cudaCallDLPack((*byte)(unsafe.Pointer(callback)), uintptr(stream), inputs, uintptr(nInputs), outputs, uintptr(nOutputs))
	if err == nil {
		return 0
	}
	cd, m := xlaMessage(err)
	writeMsg(msg, msgCap, m)
	return C.int(cd)
}

// writeMsg copies s, NUL-terminated and truncated to fit, into the C
// buffer p of capacity bytes (nothing when p is NULL or capacity 0).
func writeMsg(p *C.char, capacity C.size_t, s string) {
	if p == nil || capacity == 0 {
		return
	}
	dst := unsafe.Slice((*byte)(unsafe.Pointer(p)), capacity)
	n := copy(dst[:capacity-1], s)
	dst[n] = 0
}

// gpuStats is a GPU path's totals as callbox_cuda_stats reports them.
type gpuStats struct {
	Mode            string  `json:"mode"`
	Calls           uint64  `json:"calls"`
	PinnedCalls     uint64  `json:"pinned_calls"`
	StagedCalls     uint64  `json:"staged_calls"`
	PageableCalls   uint64  `json:"pageable_calls"`
	Pins            uint64  `json:"pins"`
	PinTimeMS       float64 `json:"pin_time_ms"`
	PinnedBytes     uint64  `json:"pinned_bytes"`
	PinnedInstances int     `json:"pinned_instances"`
	Unpins          uint64  `json:"unpins"`
	StagingBuffers  int     `json:"staging_buffers"`
	StagingBytes    uint64  `json:"staging_bytes"`
}

// statsJSON is the default host's GPU totals as JSON; "" when no default
// host is set or it is closed.
func statsJSON() string {
	h := defaultHost.h.Load()
	if h == 0 {
		return ""
	}
	bh, err := lookupHost(h)
	if err != nil || bh.open() != nil {
		return ""
	}
	g := bh.gpu
	tot := g.Totals()
	b, _ := json.Marshal(gpuStats{
		Mode: g.Mode().String(), Calls: tot.Calls, PinnedCalls: tot.PinnedCalls, StagedCalls: tot.StagedCalls, PageableCalls: tot.PageableCalls,
		Pins: tot.Pins, PinTimeMS: float64(tot.PinTime) / float64(time.Millisecond), PinnedBytes: tot.PinnedBytes,
		PinnedInstances: tot.PinnedInstances, Unpins: tot.Unpins, StagingBuffers: tot.StagingBuffers, StagingBytes: tot.StagingBytes,
	})
	return string(b)
}

// callbox_cuda_stats writes the default host's GPU totals as JSON
// (NUL-terminated, truncated to cap) and returns the JSON's length, or -1
// when no default host is set (or it is closed).
//
//export cbxgo_cuda_stats
func cbxgo_cuda_stats(buf *C.char, capacity C.size_t) (n C.int64_t) {
	defer func() {
		if p := recover(); p != nil {
			n = -1
		}
	}()
	s := statsJSON()
	if s == "" {
		return -1
	}
	writeMsg(buf, capacity, s)
	return C.int64_t(len(s))
}

// newGPU is the GPU path of a host the library opens: the CUDA runtime
// loaded on first use (a process that never calls on a GPU never loads
// it), the copy mode from CALLBOX_CUDA_COPY.
func newGPU(getenv func(string) string, logger *slog.Logger) (*cuda.GPU, error) {
	mode, err := cuda.ParseMode(getenv(cuda.EnvCopy))
	if err != nil {
		return nil, &bridgeError{kind: abi.InvalidArgument, msg: err.Error()}
	}
	return cuda.New(&cuda.LazyRuntime{}, cuda.Options{Mode: mode, Logger: logger}), nil
}

// cudaHandlerAddr and dlpackEntryAddr are the addresses of
// callbox_xla_ffi_cuda and callbox_cuda_call_dlpack, for tests that call
// them through a pointer, as XLA and a binding do (test files cannot use
// cgo).
func cudaHandlerAddr() unsafe.Pointer { return C.cbx_entry_addr(1) }

func dlpackEntryAddr() unsafe.Pointer { return C.cbx_entry_addr(2) }

// cpuHandlerAddr is the address of callbox_xla_ffi.
func cpuHandlerAddr() unsafe.Pointer { return C.cbx_entry_addr(0) }

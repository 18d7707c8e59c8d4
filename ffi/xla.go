//go:build cgo

package main

import (
	"context"
	"errors"
	"unsafe"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/cuda"
	"github.com/seed4b3e0ccb/callbox/ffi/internal/dlpack"
	"github.com/seed4b3e0ccb/callbox/ffi/internal/hugepage"
)

// xlaMaxBuffers is CBX_MAX_BUFFERS (xla_ffi.h).
const xlaMaxBuffers = 64

// xlaAPIVersion is the XLA FFI API version the handlers declare in the
// metadata handshake (CBX_XLA_API_MAJOR.MINOR, xla_ffi.h).
const xlaAPIVersion = "0.2"

// xlaBuf mirrors cbx_buf: one XLA buffer, tokens already skipped.
type xlaBuf struct {
	Data  unsafe.Pointer
	Dims  *int64
	Rank  int64
	DType int32
	Index int32 // position among XLA's arguments or results
}

// xlaCall mirrors cbx_call: an EXECUTE call decoded by xla.c (cbx_handle),
// or its refusal of a malformed frame.
type xlaCall struct {
	Stream      uintptr // the CUDA stream; 0: a host call (callbox_xla_ffi)
	Callback    *byte
	CallbackLen uintptr
	Chain       *byte // nil: no chain attribute
	ChainLen    uintptr
	Host        *byte // nil: no host attribute (the default host)
	HostLen     uintptr
	NumArgs     int64
	NumRets     int64
	Message     unsafe.Pointer // out: C string on failure (xlaexport.go)
	RefusalKind int32          // an abi.Kind when the decoder refused the frame
	Batched     int32          // attribute batched = "true": a batched call
	Refusal     [256]byte      // the refusal's message, NUL-terminated
	Args        [xlaMaxBuffers]xlaBuf
	Rets        [xlaMaxBuffers]xlaBuf
}

// xlaView checks one XLA buffer and views it: XLA's dtype numbers are
// abi.DType's, and its buffers are dense row-major, so the buffer is
// checked as the DLPack tensor it is (one set of tensor checks, package
// dlpack) in host or device memory.
func xlaView(v *dlpack.View, role string, b *xlaBuf, mem dlpack.Memory) error {
	d := abi.DType(b.DType)
	if b.DType < 0 || !d.Valid() {
		return badArg(argName{role, int(b.Index)}, "XLA dtype %d is not one callbox supports (pred, s8..s64, u8..u64, f16, bf16, f32, f64, c64, c128)", b.DType)
	}
	switch {
	case b.Rank < 0:
		return badArg(argName{role, int(b.Index)}, "rank %d is negative", b.Rank)
	case b.Rank > abi.MaxRank:
		return &argError{arg: argName{role, int(b.Index)}, reason: abi.RankError(int(b.Rank)).Error()}
	}
	dev := dlpack.CPU
	if mem == dlpack.OnDevice {
		dev = dlpack.CUDA
	}
	// Field by field: a composite literal is built aside and copied whole,
	// 16-byte loads over its narrower stores, which stalls on store
	// forwarding (the largest item of xlaView in a profile).
	var t dlpack.Tensor
	t.Data = b.Data
	t.Device.Type = dev
	t.NDim = int32(b.Rank)
	t.DType = dlpack.FromABI(d)
	t.Shape = b.Dims
	if err := dlpack.CheckInto(v, &t, mem); err != nil {
		return dlError(role, int(b.Index), err)
	}
	return nil
}

// xlaTensors views XLA buffers in host memory as tensors (no copy).
func xlaTensors(role string, bufs []xlaBuf, into []abi.Tensor) ([]abi.Tensor, error) {
	if len(bufs) > len(into) {
		into = make([]abi.Tensor, len(bufs))
	}
	out := into[:len(bufs)]
	var v dlpack.View
	for i := range bufs {
		if err := xlaView(&v, role, &bufs[i], dlpack.OnHost); err != nil {
			return nil, err
		}
		v.HostTensor(&out[i])
	}
	return out, nil
}

// xlaDeviceBuffers views XLA buffers in device memory as GPU buffers.
func xlaDeviceBuffers(role string, bufs []xlaBuf) ([]cuda.Buffer, error) {
	out := make([]cuda.Buffer, len(bufs))
	var v dlpack.View
	for i := range bufs {
		if err := xlaView(&v, role, &bufs[i], dlpack.OnDevice); err != nil {
			return nil, err
		}
		out[i] = cuda.Buffer{Ptr: cuda.DevicePtr(uintptr(v.Addr)), DType: v.DType, Shape: append(abi.Shape(nil), v.Shape...)}
	}
	return out, nil
}

// xlaCallHost is the open host a call of callback runs on: the one its
// attribute host names (xlaHost), else the default host.
func xlaCallHost(ctx context.Context, c *xlaCall, callback string) (*bridgeHost, error) {
	if c.Host != nil {
		return xlaHost(unsafe.String(c.Host, c.HostLen), callback)
	}
	bh, err := getDefault(ctx)
	if err != nil {
		var be *bridgeError
		if errors.As(err, &be) && be.callback == "" {
			// No host to ask: the handler's own error names the callback
			// the custom call named.
			return nil, &bridgeError{kind: be.kind, callback: callback, msg: be.msg}
		}
		return nil, err
	}
	if err := bh.open(); err != nil {
		return nil, err
	}
	return bh, nil
}

// xlaExecute runs one decoded XLA call on its host (xlaCallHost): on the
// host when it has no stream, on the host's GPU path on its stream
// otherwise. It returns the callback name (for messages) and the error.
func xlaExecute(ctx context.Context, c *xlaCall) (string, error) {
	if c.RefusalKind != 0 {
		n := 0
		for n < len(c.Refusal) && c.Refusal[n] != 0 {
			n++
		}
		return "", &bridgeError{kind: abi.Kind(c.RefusalKind), msg: string(c.Refusal[:n])}
	}
	callback := ""
	if c.Callback != nil {
		callback = unsafe.String(c.Callback, c.CallbackLen)
	}
	if callback == "" {
		return "", badArg(arg("attribute callback"), "empty (want a callback name or content id)")
	}
	chain := ""
	if c.Chain != nil {
		chain = unsafe.String(c.Chain, c.ChainLen)
		if chain == "" {
			return callback, badArg(arg("attribute chain"), "empty name")
		}
	}
	if c.NumArgs < 0 || c.NumArgs > xlaMaxBuffers || c.NumRets < 0 || c.NumRets > xlaMaxBuffers {
		return callback, badArg(arg("call"), "%d arguments and %d results (at most %d each)", c.NumArgs, c.NumRets, xlaMaxBuffers)
	}
	bh, err := xlaCallHost(ctx, c, callback)
	if err != nil {
		return callback, err
	}
	ci, err := bh.resolve(callback)
	if err != nil {
		return callback, err
	}
	if c.Stream != 0 {
		if c.Batched != 0 {
			return callback, &bridgeError{kind: abi.FailedPrecondition, callback: callback, msg: "a batched call (attribute batched) runs on the CPU handler only"}
		}
		ins, err := xlaDeviceBuffers("argument", c.Args[:c.NumArgs])
		if err != nil {
			return callback, ci.refused(err)
		}
		outs, err := xlaDeviceBuffers("result", c.Rets[:c.NumRets])
		if err != nil {
			return callback, ci.refused(err)
		}
		return callback, bh.gpuCall(ctx, chain, ci, cuda.Stream(c.Stream), ins, outs)
	}
	sc := scratchPool.Get().(*scratch)
	defer sc.release(uint64(c.NumArgs), uint64(c.NumRets))
	in, err := xlaTensors("argument", c.Args[:c.NumArgs], sc.in[:])
	if err != nil {
		return callback, ci.refused(err)
	}
	out, err := xlaTensors("result", c.Rets[:c.NumRets], sc.out[:])
	if err != nil {
		return callback, ci.refused(err)
	}
	for _, t := range out {
		hugepage.Advise(t.Data) // XLA's fresh result buffers (package hugepage)
	}
	return callback, bh.doOn(ctx, ci, chain, in, out, c.Batched != 0, 0)
}

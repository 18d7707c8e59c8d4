//go:build cgo

package main

import (
	"context"
	"fmt"
	"strings"
	"unsafe"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// xlaMaxBuffers is CBX_MAX_BUFFERS (xla_ffi.h).
const xlaMaxBuffers = 64

// xlaBuf mirrors cbx_buf: one XLA buffer, tokens already skipped.
type xlaBuf struct {
	Data  unsafe.Pointer
	Dims  *int64
	Rank  int64
	DType int32
	Index int32 // position among XLA's arguments or results
}

// xlaCall mirrors cbx_call: an EXECUTE call decoded by xla.c.
type xlaCall struct {
	Callback    *byte
	CallbackLen uintptr
	Chain       *byte // nil: no chain attribute
	ChainLen    uintptr
	NumArgs     int64
	NumRets     int64
	Message     unsafe.Pointer // out: C string on failure (xlaexport.go)
	Args        [xlaMaxBuffers]xlaBuf
	Rets        [xlaMaxBuffers]xlaBuf
}

// xlaTensors views XLA buffers as tensors (no copy). XLA's dtype numbers
// are abi.DType's.
func xlaTensors(role string, bufs []xlaBuf, into []abi.Tensor) ([]abi.Tensor, error) {
	out := into[:0]
	for i := range bufs {
		b := &bufs[i]
		a := argName{role, int(b.Index)}
		d := abi.DType(b.DType)
		if b.DType < 0 || !d.Valid() {
			return nil, badArg(a, "XLA dtype %d is not one callbox supports (pred, s8..s64, u8..u64, f16, bf16, f32, f64, c64, c128)", b.DType)
		}
		shape, err := shapeOf(a, b.Rank, b.Dims)
		if err != nil {
			return nil, err
		}
		t, err := viewTensor(a, d, shape, b.Data)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// xlaExecute runs one decoded XLA call on the default host; it returns the
// callback name as resolved (for messages) and the error.
func xlaExecute(ctx context.Context, c *xlaCall) (string, error) {
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
	bh, err := getDefault(ctx)
	if err != nil {
		return callback, err
	}
	if err := bh.open(); err != nil {
		return callback, err
	}
	sc := scratchPool.Get().(*scratch)
	defer sc.release(int(c.NumArgs), int(c.NumRets))
	in, err := xlaTensors("argument", c.Args[:c.NumArgs], sc.in[:])
	if err != nil {
		return callback, err
	}
	out, err := xlaTensors("result", c.Rets[:c.NumRets], sc.out[:])
	if err != nil {
		return callback, err
	}
	return callback, bh.call(ctx, chain, callback, in, out)
}

// xlaMessage is the XLA error message of a failed call: it names the
// kind and the callback, e.g.
//
//	callbox Timeout: callback "spin" failed: timeout after 250ms
func xlaMessage(callback string, err error) (abi.Code, string) {
	in := describe(err)
	msg := err.Error()
	if in.callback == "" && callback != "" {
		msg = fmt.Sprintf("callback %q: %s", strings.ToValidUTF8(callback, "?"), msg)
	}
	return in.code, "callbox " + in.kind.Ident() + ": " + msg
}

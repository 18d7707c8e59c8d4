//go:build cgo

package main

/*
#define CALLBOX_BUILDING_LIBRARY 1
#include <stdlib.h>
#include "include/callbox.h"
*/
import "C"

import (
	"context"
	"unsafe"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/config/configfile"
)

// Compile-time checks that the Go mirrors have the C layouts exactly: each
// line fails to compile (a negative array length) when the sizes or
// offsets differ in either direction.
var (
	_ [unsafe.Sizeof(C.callbox_tensor{}) - unsafe.Sizeof(dlTensor{})]byte
	_ [unsafe.Sizeof(dlTensor{}) - unsafe.Sizeof(C.callbox_tensor{})]byte
	_ [unsafe.Offsetof(C.callbox_tensor{}.ndim) - unsafe.Offsetof(dlTensor{}.NDim)]byte
	_ [unsafe.Offsetof(dlTensor{}.NDim) - unsafe.Offsetof(C.callbox_tensor{}.ndim)]byte
	_ [unsafe.Offsetof(C.callbox_tensor{}.dtype) - unsafe.Offsetof(dlTensor{}.DType)]byte
	_ [unsafe.Offsetof(dlTensor{}.DType) - unsafe.Offsetof(C.callbox_tensor{}.dtype)]byte
	_ [unsafe.Offsetof(C.callbox_tensor{}.strides) - unsafe.Offsetof(dlTensor{}.Strides)]byte
	_ [unsafe.Offsetof(dlTensor{}.Strides) - unsafe.Offsetof(C.callbox_tensor{}.strides)]byte
	_ [unsafe.Offsetof(C.callbox_tensor{}.byte_offset) - unsafe.Offsetof(dlTensor{}.ByteOffset)]byte
	_ [unsafe.Offsetof(dlTensor{}.ByteOffset) - unsafe.Offsetof(C.callbox_tensor{}.byte_offset)]byte
	_ [unsafe.Sizeof(C.callbox_type{}) - unsafe.Sizeof(dlType{})]byte
	_ [unsafe.Sizeof(dlType{}) - unsafe.Sizeof(C.callbox_type{})]byte
	_ [unsafe.Offsetof(C.callbox_type{}.shape) - unsafe.Offsetof(dlType{}.Shape)]byte
	_ [unsafe.Offsetof(dlType{}.Shape) - unsafe.Offsetof(C.callbox_type{}.shape)]byte
	_ [C.CALLBOX_MAX_RANK - abi.MaxRank]byte
	_ [abi.MaxRank - C.CALLBOX_MAX_RANK]byte
)

// cError allocates a callbox_error (C memory, freed by callbox_error_free).
func cError(err error) *C.callbox_error {
	if err == nil {
		return nil
	}
	in := describe(err)
	e := (*C.callbox_error)(C.calloc(1, C.sizeof_callbox_error))
	e.struct_size = C.uint32_t(C.sizeof_callbox_error)
	e.kind = C.int32_t(in.kind)
	e.code = C.int32_t(in.code)
	e.guest_status = C.int32_t(in.status)
	e.seq = C.uint64_t(in.seq)
	e.kind_name = C.CString(in.kind.Ident())
	e.callback = C.CString(in.callback)
	e.chain = C.CString(in.chain)
	e.message = C.CString(in.message)
	e.guest_message = C.CString(in.guest)
	e.text = C.CString(in.text)
	return e
}

// guard recovers a panic in an exported function into a HostPanic error:
// no Go panic crosses the C boundary. Use as defer guard(&ret, "name").
func guard(ret **C.callbox_error, where string) {
	if p := recover(); p != nil {
		*ret = cError(panicError(where, p))
	}
}

// goString views a NUL-terminated C string as a Go string without
// copying (cString); what names the argument in errors.
func goString(p *C.char, what string) (string, error) {
	return cString((*byte)(unsafe.Pointer(p)), what)
}

//export callbox_error_free
func callbox_error_free(e *C.callbox_error) {
	defer func() { _ = recover() }()
	if e == nil {
		return
	}
	for _, s := range []*C.char{e.kind_name, e.callback, e.chain, e.message, e.guest_message, e.text} {
		C.free(unsafe.Pointer(s))
	}
	C.free(unsafe.Pointer(e))
}

//export callbox_open
func callbox_open(path *C.char, out *C.callbox_host) (ret *C.callbox_error) {
	defer guard(&ret, "callbox_open")
	if out == nil {
		return cError(badArg(arg("out"), "NULL"))
	}
	*out = 0
	p, err := goString(path, "config_path")
	if err != nil {
		return cError(err)
	}
	cfg, err := configfile.Load(p)
	if err != nil {
		return cError(err)
	}
	return openInto(cfg, out)
}

//export callbox_open_config
func callbox_open_config(text, format, baseDir *C.char, out *C.callbox_host) (ret *C.callbox_error) {
	defer guard(&ret, "callbox_open_config")
	if out == nil {
		return cError(badArg(arg("out"), "NULL"))
	}
	*out = 0
	if text == nil {
		return cError(badArg(arg("text"), "NULL"))
	}
	data := C.GoString(text)
	f, err := goString(format, "format")
	if err != nil {
		return cError(err)
	}
	dir := ""
	if baseDir != nil {
		dir = C.GoString(baseDir)
	}
	cfg, err := configfile.LoadData("<config>", f, []byte(data), dir, nil)
	if err != nil {
		return cError(err)
	}
	return openInto(cfg, out)
}

func openInto(cfg *config.Config, out *C.callbox_host) *C.callbox_error {
	bh, err := openHost(context.Background(), cfg)
	if err != nil {
		return cError(err)
	}
	for _, ci := range bh.infos {
		info := (*C.callbox_callback_info)(C.calloc(1, C.sizeof_callbox_callback_info))
		info.name = C.CString(ci.name)
		info.id = C.CString(ci.id)
		info.signature = C.CString(ci.signature)
		info.engine = C.CString(ci.engine)
		info.batching = C.CString(ci.batching)
		info.num_inputs = C.int32_t(len(ci.sig.Params))
		info.num_outputs = C.int32_t(len(ci.sig.Results))
		ci.cinfo = unsafe.Pointer(info)
	}
	*out = C.callbox_host(register(bh))
	return nil
}

//export callbox_close
func callbox_close(h C.callbox_host) (ret *C.callbox_error) {
	defer guard(&ret, "callbox_close")
	bh, err := lookupHost(uint64(h))
	if err != nil {
		return cError(err)
	}
	first, err := bh.close(context.Background())
	if first {
		for _, ci := range bh.infos {
			info := (*C.callbox_callback_info)(ci.cinfo)
			ci.cinfo = nil
			if info == nil {
				continue
			}
			for _, s := range []*C.char{info.name, info.id, info.signature, info.engine, info.batching} {
				C.free(unsafe.Pointer(s))
			}
			C.free(unsafe.Pointer(info))
		}
	}
	return cError(err)
}

// enterHost looks up an open host and marks a call in flight; the caller
// must bh.leave().
func enterHost(h C.callbox_host) (*bridgeHost, error) {
	bh, err := lookupHost(uint64(h))
	if err != nil {
		return nil, err
	}
	if err := bh.enter(); err != nil {
		return nil, err
	}
	return bh, nil
}

// openHostFor looks up a host that is not closed, for calls (which the
// host itself tracks).
func openHostFor(h C.callbox_host) (*bridgeHost, error) {
	bh, err := lookupHost(uint64(h))
	if err != nil {
		return nil, err
	}
	return bh, bh.open()
}

//export callbox_callback_count
func callbox_callback_count(h C.callbox_host, out *C.size_t) (ret *C.callbox_error) {
	defer guard(&ret, "callbox_callback_count")
	if out == nil {
		return cError(badArg(arg("out"), "NULL"))
	}
	bh, err := enterHost(h)
	if err != nil {
		return cError(err)
	}
	defer bh.leave()
	*out = C.size_t(len(bh.infos))
	return nil
}

//export callbox_callback_at
func callbox_callback_at(h C.callbox_host, index C.size_t, out *C.callbox_callback_info) (ret *C.callbox_error) {
	defer guard(&ret, "callbox_callback_at")
	if out == nil {
		return cError(badArg(arg("out"), "NULL"))
	}
	bh, err := enterHost(h)
	if err != nil {
		return cError(err)
	}
	defer bh.leave()
	if uint64(index) >= uint64(len(bh.infos)) {
		return cError(badArg(arg("index"), "%d is out of range (the host has %d callbacks)", uint64(index), len(bh.infos)))
	}
	*out = *(*C.callbox_callback_info)(bh.infos[index].cinfo)
	return nil
}

// resolveC resolves a callback named by a C string, the C argument what
// (its absence or bad UTF-8 is an error naming it).
func (bh *bridgeHost) resolveC(key *C.char, what string) (*cbInfo, error) {
	name, err := goString(key, what)
	if err != nil {
		return nil, err
	}
	return bh.resolve(name)
}

//export callbox_callback_find
func callbox_callback_find(h C.callbox_host, key *C.char, out *C.callbox_callback_info) (ret *C.callbox_error) {
	defer guard(&ret, "callbox_callback_find")
	if out == nil {
		return cError(badArg(arg("out"), "NULL"))
	}
	bh, err := enterHost(h)
	if err != nil {
		return cError(err)
	}
	defer bh.leave()
	ci, err := bh.resolveC(key, "name_or_id")
	if err != nil {
		return cError(err)
	}
	*out = *(*C.callbox_callback_info)(ci.cinfo)
	return nil
}

//export callbox_output_types
func callbox_output_types(h C.callbox_host, callback *C.char, inputs *C.callbox_tensor, nIn C.size_t, outputs *C.callbox_type, nOut C.size_t) (ret *C.callbox_error) {
	defer guard(&ret, "callbox_output_types")
	bh, err := enterHost(h)
	if err != nil {
		return cError(err)
	}
	defer bh.leave()
	ci, err := bh.resolveC(callback, "callback")
	if err != nil {
		return cError(err)
	}
	in, err := typesFromDL((*dlTensor)(unsafe.Pointer(inputs)), uintptr(nIn))
	if err != nil {
		return cError(err)
	}
	specs, err := bh.outputTypes(ci, in)
	if err != nil {
		return cError(err)
	}
	if uintptr(nOut) != uintptr(len(specs)) {
		return cError(badArg(arg("num_outputs"), "%d, but callback %q has %d results", uint64(nOut), ci.name, len(specs)))
	}
	if len(specs) == 0 {
		return nil
	}
	if outputs == nil {
		return cError(badArg(arg("outputs"), "NULL with a count of %d", len(specs)))
	}
	outs := unsafe.Slice((*dlType)(unsafe.Pointer(outputs)), len(specs))
	for i, s := range specs {
		outs[i] = dlType{DType: dlFromDType(s.DType), NDim: int32(len(s.Shape))}
		copy(outs[i].Shape[:], s.Shape)
	}
	return nil
}

// typesFromDL reads only the dtypes and shapes of n C tensors.
func typesFromDL(p *dlTensor, n uintptr) ([]abi.Tensor, error) {
	if n == 0 {
		return nil, nil
	}
	if p == nil {
		return nil, badArg(arg("inputs"), "NULL with a count of %d", n)
	}
	if n > maxTensors {
		return nil, badArg(arg("inputs"), "count %d exceeds the maximum %d", n, maxTensors)
	}
	ts := unsafe.Slice(p, n)
	out := make([]abi.Tensor, n)
	for i := range ts {
		a := argName{"input", i}
		d, ok := dtypeFromDL(ts[i].DType)
		if !ok {
			return nil, badArg(a, "unknown dtype {code %d, bits %d, lanes %d}", ts[i].DType.Code, ts[i].DType.Bits, ts[i].DType.Lanes)
		}
		shape, err := shapeOf(a, int64(ts[i].NDim), ts[i].Shape)
		if err != nil {
			return nil, err
		}
		out[i] = abi.Tensor{DType: d, Shape: shape}
	}
	return out, nil
}

// doCall is callbox_call and callbox_chain_call.
func doCall(h C.callbox_host, chain, callback *C.char, inputs *C.callbox_tensor, nIn C.size_t, outputs *C.callbox_tensor, nOut C.size_t) error {
	return callDL(uint64(h), (*byte)(unsafe.Pointer(chain)), (*byte)(unsafe.Pointer(callback)),
		(*dlTensor)(unsafe.Pointer(inputs)), uintptr(nIn), (*dlTensor)(unsafe.Pointer(outputs)), uintptr(nOut))
}

//export callbox_call
func callbox_call(h C.callbox_host, callback *C.char, inputs *C.callbox_tensor, nIn C.size_t, outputs *C.callbox_tensor, nOut C.size_t) (ret *C.callbox_error) {
	defer guard(&ret, "callbox_call")
	return cError(doCall(h, nil, callback, inputs, nIn, outputs, nOut))
}

//export callbox_chain_call
func callbox_chain_call(h C.callbox_host, chain, callback *C.char, inputs *C.callbox_tensor, nIn C.size_t, outputs *C.callbox_tensor, nOut C.size_t) (ret *C.callbox_error) {
	defer guard(&ret, "callbox_chain_call")
	if chain == nil {
		return cError(badArg(arg("chain"), "NULL"))
	}
	return cError(doCall(h, chain, callback, inputs, nIn, outputs, nOut))
}

// doTap is callbox_tap and callbox_chain_tap.
func doTap(h C.callbox_host, chain, callback *C.char, inputs *C.callbox_tensor, nIn C.size_t) error {
	bh, err := openHostFor(h)
	if err != nil {
		return err
	}
	name, err := goString(callback, "callback")
	if err != nil {
		return err
	}
	chainName := ""
	if chain != nil {
		if chainName, err = goString(chain, "chain"); err != nil {
			return err
		}
		if chainName == "" {
			return badArg(arg("chain"), "empty name")
		}
	}
	sc := scratchPool.Get().(*scratch)
	defer sc.release(int(nIn), 0)
	in, err := fromDLs("input", (*dlTensor)(unsafe.Pointer(inputs)), uintptr(nIn), sc.in[:])
	if err != nil {
		return err
	}
	return bh.tap(context.Background(), chainName, name, in)
}

//export callbox_tap
func callbox_tap(h C.callbox_host, callback *C.char, inputs *C.callbox_tensor, nIn C.size_t) (ret *C.callbox_error) {
	defer guard(&ret, "callbox_tap")
	return cError(doTap(h, nil, callback, inputs, nIn))
}

//export callbox_chain_tap
func callbox_chain_tap(h C.callbox_host, chain, callback *C.char, inputs *C.callbox_tensor, nIn C.size_t) (ret *C.callbox_error) {
	defer guard(&ret, "callbox_chain_tap")
	if chain == nil {
		return cError(badArg(arg("chain"), "NULL"))
	}
	return cError(doTap(h, chain, callback, inputs, nIn))
}

//export callbox_barrier
func callbox_barrier(h C.callbox_host) (ret *C.callbox_error) {
	defer guard(&ret, "callbox_barrier")
	bh, err := enterHost(h)
	if err != nil {
		return cError(err)
	}
	defer bh.leave()
	return cError(bh.h.Barrier(context.Background()))
}

// chainOp runs a barrier or a reset on a named chain.
func chainOp(h C.callbox_host, chain *C.char, op func(bh *bridgeHost, name string) error) error {
	bh, err := enterHost(h)
	if err != nil {
		return err
	}
	defer bh.leave()
	name, err := goString(chain, "chain")
	if err != nil {
		return err
	}
	return op(bh, name)
}

//export callbox_chain_barrier
func callbox_chain_barrier(h C.callbox_host, chain *C.char) (ret *C.callbox_error) {
	defer guard(&ret, "callbox_chain_barrier")
	return cError(chainOp(h, chain, func(bh *bridgeHost, name string) error {
		return bh.chainBarrier(context.Background(), name)
	}))
}

//export callbox_chain_reset
func callbox_chain_reset(h C.callbox_host, chain *C.char) (ret *C.callbox_error) {
	defer guard(&ret, "callbox_chain_reset")
	return cError(chainOp(h, chain, func(bh *bridgeHost, name string) error {
		return bh.chainReset(context.Background(), name)
	}))
}

//export callbox_set_default_host
func callbox_set_default_host(h C.callbox_host) (ret *C.callbox_error) {
	defer guard(&ret, "callbox_set_default_host")
	return cError(setDefault(uint64(h)))
}

//export callbox_default_host
func callbox_default_host(out *C.callbox_host) (ret *C.callbox_error) {
	defer guard(&ret, "callbox_default_host")
	if out == nil {
		return cError(badArg(arg("out"), "NULL"))
	}
	*out = 0
	bh, err := getDefault(context.Background())
	if err != nil {
		return cError(err)
	}
	*out = C.callbox_host(bh.handle)
	return nil
}

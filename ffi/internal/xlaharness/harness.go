// Package xlaharness stands in for XLA in tests of the CUDA FFI handler: it
// builds call frames and an API table (whose Stream_Get returns the stream
// a test chose) in C, with the XLA FFI C ABI 0.1 layouts, and calls a
// handler with them.
package xlaharness

/*
#include <stdlib.h>
#include "harness.h"
*/
import "C"

import (
	"unsafe"
)

// Buf is one buffer argument or result. Type 0 means BUFFER (1); set it to
// test a handler's refusal of other kinds.
type Buf struct {
	Type  int32
	DType int32
	Data  uintptr
	Dims  []int64
	// Rank overrides len(Dims) when non-zero (a malformed frame).
	Rank int64
}

// Attr is a string attribute, or an int64 scalar one when IsInt.
type Attr struct {
	Name  string
	Str   string
	Int   int64
	IsInt bool
}

// Frame is one call.
type Frame struct {
	Args, Rets []Buf
	Attrs      []Attr
	Stream     uintptr
	// Knobs for malformed calls; zero values give a well-formed one.
	Stage       int // with SetStage; else EXECUTE (3)
	SetStage    bool
	FrameSize   int  // 0: 176
	APISize     int  // 0: the full table
	StreamFails bool // Stream_Get returns UNIMPLEMENTED, as on CPU
	NullAPI     bool
}

// Result is what the handler returned.
type Result struct {
	OK   bool // NULL: success
	Code int
	Msg  string
}

func setBuf(f *C.hx_frame, ret bool, i int, b Buf) {
	t := b.Type
	if t == 0 {
		t = 1
	}
	rank := int64(len(b.Dims))
	if b.Rank != 0 {
		rank = b.Rank
	}
	var dims *C.int64_t
	if len(b.Dims) > 0 {
		dims = (*C.int64_t)(C.malloc(C.size_t(8 * len(b.Dims))))
		defer C.free(unsafe.Pointer(dims))
		copy(unsafe.Slice((*int64)(unsafe.Pointer(dims)), len(b.Dims)), b.Dims)
	}
	if ret {
		C.hx_ret(f, C.int64_t(i), C.int32_t(t), C.int32_t(b.DType), C.uintptr_t(b.Data), C.int64_t(rank), dims)
	} else {
		C.hx_arg(f, C.int64_t(i), C.int32_t(t), C.int32_t(b.DType), C.uintptr_t(b.Data), C.int64_t(rank), dims)
	}
}

// Call calls handler (an XLA_FFI_Handler*) with fr.
func Call(handler unsafe.Pointer, fr Frame) Result {
	f := C.hx_new(C.int64_t(len(fr.Args)), C.int64_t(len(fr.Rets)), C.int64_t(len(fr.Attrs)))
	defer C.hx_free(f)
	for i, b := range fr.Args {
		setBuf(f, false, i, b)
	}
	for i, b := range fr.Rets {
		setBuf(f, true, i, b)
	}
	for i, a := range fr.Attrs {
		name := C.CString(a.Name)
		if a.IsInt {
			C.hx_attr_i64(f, C.int64_t(i), name, C.size_t(len(a.Name)), C.int64_t(a.Int))
		} else {
			val := C.CString(a.Str)
			C.hx_attr_str(f, C.int64_t(i), name, C.size_t(len(a.Name)), val, C.size_t(len(a.Str)))
			C.free(unsafe.Pointer(val))
		}
		C.free(unsafe.Pointer(name))
	}
	if fr.SetStage {
		C.hx_set_stage(f, C.int(fr.Stage))
	}
	if fr.FrameSize != 0 {
		C.hx_set_frame_size(f, C.size_t(fr.FrameSize))
	}
	if fr.APISize != 0 {
		C.hx_set_api_size(f, C.size_t(fr.APISize))
	}
	fail := C.int(0)
	if fr.StreamFails {
		fail = 1
	}
	C.hx_set_stream(f, C.uintptr_t(fr.Stream), fail)
	if fr.NullAPI {
		C.hx_set_null_api(f)
	}
	msg := (*C.char)(C.malloc(4096))
	defer C.free(unsafe.Pointer(msg))
	code := C.hx_call(f, handler, msg, 4096)
	if code == -1 {
		return Result{OK: true}
	}
	return Result{Code: int(code), Msg: C.GoString(msg)}
}

// Metadata runs the registration handshake. ok is true when the handler
// returned NULL; major, minor and traits are what it wrote.
func Metadata(handler unsafe.Pointer, frameworkMinor int32, apiTable bool) (major, minor int32, traits uint32, ok bool) {
	var ma, mi C.int32_t
	var tr C.uint32_t
	table := C.int(0)
	if apiTable {
		table = 1
	}
	code := C.hx_metadata(handler, C.int32_t(frameworkMinor), table, &ma, &mi, &tr)
	return int32(ma), int32(mi), uint32(tr), code == -1
}

// LiveErrors is the number of errors created and not destroyed.
func LiveErrors() int64 { return int64(C.hx_live_errors()) }

// StreamGets is the number of Stream_Get calls so far.
func StreamGets() int64 { return int64(C.hx_stream_gets()) }

// Tensor is a DLPack tensor for CallDLPack.
type Tensor struct {
	Data       uintptr
	DeviceType int32
	Shape      []int64
	Code, Bits uint8
}

// CallDLPack calls entry (shaped like callbox_cuda_call_dlpack) with
// DLTensors built in C memory. It returns the code (0: success) and the
// message.
func CallDLPack(entry unsafe.Pointer, callback string, stream uintptr, ins, outs []Tensor) (int, string) {
	build := func(ts []Tensor) (unsafe.Pointer, func()) {
		if len(ts) == 0 {
			return nil, func() {}
		}
		arr := (*[1 << 20]unsafe.Pointer)(C.malloc(C.size_t(8 * len(ts))))[:len(ts):len(ts)]
		for i, t := range ts {
			var shape *C.int64_t
			if len(t.Shape) > 0 {
				shape = (*C.int64_t)(C.malloc(C.size_t(8 * len(t.Shape))))
				copy(unsafe.Slice((*int64)(unsafe.Pointer(shape)), len(t.Shape)), t.Shape)
			}
			arr[i] = C.hx_tensor(C.uintptr_t(t.Data), C.int32_t(t.DeviceType), C.int32_t(len(t.Shape)), shape, C.uint8_t(t.Code), C.uint8_t(t.Bits))
			C.free(unsafe.Pointer(shape))
		}
		return unsafe.Pointer(&arr[0]), func() {
			for _, p := range arr {
				C.hx_free_tensor(p)
			}
			C.free(unsafe.Pointer(&arr[0]))
		}
	}
	in, freeIn := build(ins)
	defer freeIn()
	out, freeOut := build(outs)
	defer freeOut()
	name := C.CString(callback)
	defer C.free(unsafe.Pointer(name))
	msg := (*C.char)(C.malloc(4096))
	defer C.free(unsafe.Pointer(msg))
	code := C.hx_call_dlpack(entry, name, C.uintptr_t(stream), (*unsafe.Pointer)(in), C.size_t(len(ins)), (*unsafe.Pointer)(out), C.size_t(len(outs)), msg, 4096)
	return int(code), C.GoString(msg)
}

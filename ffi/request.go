//go:build cgo

package main

/*
#define CALLBOX_BUILDING_LIBRARY 1
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "include/callbox.h"
*/
import "C"

import (
	"math"
	"runtime/cgo"
	"time"
	"unsafe"
)

// requestSize17 is sizeof(callbox_request) in C API 1.7, the first
// version that has it: the least size callbox_request_run takes.
const requestSize17 = C.sizeof_callbox_request

// readRequest copies a caller's callbox_request into r: size bytes of it,
// where size is the caller's sizeof; fields past them stay 0. A size
// below 1.7's is refused, and so are non-zero bytes past the fields this
// library knows (a newer caller's terms it cannot honour), and the
// reserved field.
func readRequest(req *C.callbox_request, r *C.callbox_request) error {
	if req == nil {
		return badArg(arg("req"), "NULL")
	}
	size := uintptr(req.size)
	if size < requestSize17 {
		return badArg(arg("req"), "size is %d: set it to sizeof(callbox_request), %d bytes since 1.7", uint64(size), requestSize17)
	}
	if size > requestSize17 {
		tail := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(req), requestSize17)), min(size-requestSize17, 1<<20))
		for i, b := range tail {
			if b != 0 {
				return badArg(arg("req"), "byte %d of a %d-byte request is not 0: the request sets a field this library (C API %d.%d) does not know; upgrade libcallbox",
					requestSize17+uintptr(i), uint64(size), C.CALLBOX_VERSION_MAJOR, C.CALLBOX_VERSION_MINOR)
			}
		}
	}
	*r = *req
	if r.reserved != 0 {
		return badArg(arg("req.reserved"), "%d: must be 0", uint32(r.reserved))
	}
	if r.flags&^C.CALLBOX_REQUEST_BATCH != 0 {
		return badArg(arg("req.flags"), "%#x: unknown flags (CALLBOX_REQUEST_BATCH is %#x)", uint32(r.flags), uint32(C.CALLBOX_REQUEST_BATCH))
	}
	return nil
}

// budgetOf is a request's budget_ns as the host reads it: past
// math.MaxInt64 it stays past the host's bound, which refuses it.
func budgetOf(ns C.uint64_t) time.Duration { return time.Duration(min(uint64(ns), math.MaxInt64)) }

//export cbxgo_request_run
func cbxgo_request_run(h C.callbox_host, req *C.callbox_request) *C.callbox_error {
	return entry("callbox_request_run", func() error {
		var r C.callbox_request
		if err := readRequest(req, &r); err != nil {
			return err
		}
		tok, err := lookupCancel(uint64(r.cancel))
		if err != nil {
			return err
		}
		return dlCall(tok.context(), uint64(h), cbytes(r.chain), cbytes(r.callback), dlTensors(r.inputs), uintptr(r.num_inputs),
			dlTensors(r.outputs), uintptr(r.num_outputs), r.flags&C.CALLBOX_REQUEST_BATCH != 0, budgetOf(r.budget_ns))
	})
}

// callbox_request_async's checks, on the caller's thread: as
// cbxgo_async_prepare, for a request.
//
//export cbxgo_request_prepare
func cbxgo_request_prepare(h C.callbox_host, req *C.callbox_request, call *C.uintptr_t) *C.callbox_error {
	return entry("callbox_request_async", func() error {
		if err := outArg(call, "call"); err != nil {
			return err
		}
		var r C.callbox_request
		if err := readRequest(req, &r); err != nil {
			return err
		}
		a, err := prepareAsync(uint64(h), uint64(r.cancel), cbytes(r.chain), cbytes(r.callback), dlTensors(r.inputs), uintptr(r.num_inputs),
			dlTensors(r.outputs), uintptr(r.num_outputs))
		if err != nil {
			return err
		}
		a.batch, a.budget = r.flags&C.CALLBOX_REQUEST_BATCH != 0, budgetOf(r.budget_ns)
		*call = C.uintptr_t(cgo.NewHandle(a))
		return nil
	})
}

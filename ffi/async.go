//go:build cgo

package main

/*
#define CALLBOX_BUILDING_LIBRARY 1
#include "include/callbox.h"

// The done function's trampoline (exports.c): Go cannot call a C function
// pointer.
void cbx_call_done(callbox_done_fn fn, void *user, callbox_error *err);
*/
import "C"

import (
	"context"
	"strings"
	"unsafe"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/internal/dlpack"
)

// asyncCall is one callbox_call_async in flight: what the goroutine that
// runs it needs, in Go memory except the tensors' bytes, which the caller
// keeps valid until its done function runs.
type asyncCall struct {
	ctx             context.Context
	bh              *bridgeHost
	chain, callback string
	in, out         []abi.Tensor
	done            C.callbox_done_fn
	user            unsafe.Pointer
}

// callbox_call_async checks a call's arguments, then runs the call on a
// goroutine and returns: done(user, err) is called once from that
// goroutine's thread when the call is over (err NULL on success, else an
// error done's caller owns). A refused call returns its error and never
// calls done.
//
//export cbxgo_call_async
func cbxgo_call_async(h C.callbox_host, cancel C.callbox_cancel_token, chain, callback *C.char, inputs *C.callbox_tensor, nIn C.size_t, outputs *C.callbox_tensor, nOut C.size_t, done C.callbox_done_fn, user unsafe.Pointer) *C.callbox_error {
	return entry("callbox_call_async", func() error {
		if done == nil {
			return badArg(arg("done"), "NULL")
		}
		a, err := prepareAsync(uint64(h), uint64(cancel), cbytes(chain), cbytes(callback), dlTensors(inputs), uintptr(nIn), dlTensors(outputs), uintptr(nOut))
		if err != nil {
			return err
		}
		a.done, a.user = done, user
		go a.run()
		return nil
	})
}

// prepareAsync does the synchronous half of callbox_call_async: the host
// (entered: callbox_close waits for the call), the callback (an unknown
// one is refused now), the names and the cancel
// context (copied or taken now, so the caller may free its strings and
// fire its token at once), and the tensors checked, their shapes copied.
func prepareAsync(h, cancel uint64, chain, callback *byte, inputs *dlpack.Tensor, nIn uintptr, outputs *dlpack.Tensor, nOut uintptr) (a *asyncCall, err error) {
	bh, name, chainName, err := callSetup(h, chain, callback)
	if err != nil {
		return nil, err
	}
	if _, err := bh.resolve(name); err != nil {
		return nil, err
	}
	tok, err := lookupCancel(cancel)
	if err != nil {
		return nil, err
	}
	a = &asyncCall{ctx: tok.context(), bh: bh, chain: strings.Clone(chainName), callback: strings.Clone(name)}
	if a.in, err = fromDLs("input", inputs, nIn, nil); err != nil {
		return nil, forCallback(err, name)
	}
	if a.out, err = fromDLs("output", outputs, nOut, nil); err != nil {
		return nil, forCallback(err, name)
	}
	// One allocation for every shape: the caller's shape arrays need not
	// outlive this call.
	dims := 0
	for _, t := range a.in {
		dims += len(t.Shape)
	}
	for _, t := range a.out {
		dims += len(t.Shape)
	}
	shapes := make(abi.Shape, 0, dims)
	for _, ts := range [][]abi.Tensor{a.in, a.out} {
		for i := range ts {
			start := len(shapes)
			shapes = append(shapes, ts[i].Shape...)
			ts[i].Shape = shapes[start:len(shapes):len(shapes)]
		}
	}
	if err := bh.enter(); err != nil {
		return nil, err
	}
	return a, nil
}

// run makes the call, leaves the host (so that done may close it), and
// reports to done.
func (a *asyncCall) run() {
	err := a.call()
	C.cbx_call_done(a.done, a.user, cError(err))
}

// call is the call itself, a panic in it a HostPanic error.
func (a *asyncCall) call() (err error) {
	defer a.bh.leave()
	defer func() {
		if p := recover(); p != nil {
			err = panicError("callbox_call_async", p)
		}
	}()
	return a.bh.call(a.ctx, a.chain, a.callback, a.in, a.out)
}

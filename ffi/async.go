//go:build cgo

package main

/*
#define CALLBOX_BUILDING_LIBRARY 1
#include <stdint.h>
#include "include/callbox.h"
*/
import "C"

import (
	"context"
	"runtime/cgo"
	"strings"
	"time"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/ffi/internal/dlpack"
)

// asyncCall is one callbox_call_async between its checks and its run:
// what the run needs, in Go memory except the tensors' bytes, which the
// caller keeps valid until its done function runs.
type asyncCall struct {
	ctx             context.Context
	bh              *bridgeHost
	chain, callback string
	in, out         []abi.Tensor
	batch           bool          // callbox_request_async: CALLBOX_REQUEST_BATCH
	budget          time.Duration // callbox_request_async: budget_ns
}

// The calls go from the caller's thread to a worker thread of exports.c's
// pool, not to a goroutine: a goroutine started from a cgo callback waits
// in the caller's P's run queue, and the caller's thread, back in C, keeps
// that P in a system call until sysmon takes it back (20 us to 10 ms
// later; 100-200 us per call measured). A C worker blocked on a condition
// variable is woken directly.

// callbox_call_async's checks, on the caller's thread: on success *call is
// a handle for cbxgo_async_run (or cbxgo_async_drop).
//
//export cbxgo_async_prepare
func cbxgo_async_prepare(h C.callbox_host, cancel C.callbox_cancel_token, chain, callback *C.char, inputs *C.callbox_tensor, nIn C.size_t, outputs *C.callbox_tensor, nOut C.size_t, call *C.uintptr_t) *C.callbox_error {
	return entry("callbox_call_async", func() error {
		if err := outArg(call, "call"); err != nil {
			return err
		}
		a, err := prepareAsync(uint64(h), uint64(cancel), cbytes(chain), cbytes(callback), dlTensors(inputs), uintptr(nIn), dlTensors(outputs), uintptr(nOut))
		if err != nil {
			return err
		}
		*call = C.uintptr_t(cgo.NewHandle(a))
		return nil
	})
}

// cbxgo_async_run runs a prepared call, on a worker thread, and returns
// its error (the done function's to free).
//
//export cbxgo_async_run
func cbxgo_async_run(call C.uintptr_t) *C.callbox_error {
	return entry("callbox_call_async", func() error {
		hd := cgo.Handle(call)
		a := hd.Value().(*asyncCall)
		hd.Delete()
		return a.call()
	})
}

// cbxgo_async_drop forgets a prepared call that will not run (no worker
// could start): the host is left.
//
//export cbxgo_async_drop
func cbxgo_async_drop(call C.uintptr_t) {
	defer func() { _ = recover() }()
	hd := cgo.Handle(call)
	a := hd.Value().(*asyncCall)
	hd.Delete()
	a.bh.leave()
}

// prepareAsync does the synchronous half of callbox_call_async: the host
// (entered: callbox_close waits for the call), the callback (an unknown
// one is refused now), the names and the cancel context (copied or taken
// now, so the caller may free its strings and fire its token at once),
// and the tensors checked, their shapes copied.
func prepareAsync(h, cancel uint64, chain, callback *byte, inputs *dlpack.Tensor, nIn uintptr, outputs *dlpack.Tensor, nOut uintptr) (a *asyncCall, err error) {
	bh, name, chainName, err := callSetup(h, chain, callback)
	if err != nil {
		return nil, err
	}
	ci, err := bh.resolve(name)
	if err != nil {
		return nil, err
	}
	tok, err := lookupCancel(cancel)
	if err != nil {
		return nil, err
	}
	a = &asyncCall{ctx: tok.context(), bh: bh, chain: strings.Clone(chainName), callback: strings.Clone(name)}
	if a.in, err = fromDLs("input", inputs, nIn, nil); err != nil {
		return nil, ci.refused(err)
	}
	if a.out, err = fromDLs("output", outputs, nOut, nil); err != nil {
		return nil, ci.refused(err)
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

// call is the call itself; it leaves the host before the done function
// runs, so that done may close it.
func (a *asyncCall) call() error {
	defer a.bh.leave()
	return a.bh.do(a.ctx, a.chain, a.callback, a.in, a.out, a.batch, a.budget)
}

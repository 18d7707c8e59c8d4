//go:build cgo

package main

import (
	"errors"
	"fmt"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/cuda"
	"github.com/seed4b3e0ccb/callbox/host"
)

// This file is the library's one error mapper: every failure any entry
// reports (a callbox_error of the C API, an XLA FFI error of either
// handler, the status code of callbox_cuda_call_dlpack) is described by
// describe, and its code is its kind's (abi.Kind.Code). Nothing else
// decides a code. The codes, for every entry:
//
//	failure                                      kind                code
//	bad argument, tensor, frame or attribute     InvalidArgument     INVALID_ARGUMENT
//	no loaded callback has the name or id        UnknownCallback     NOT_FOUND
//	closed host; no default host; a GPU handler  FailedPrecondition  FAILED_PRECONDITION
//	  without a stream
//	timeout                                      Timeout             DEADLINE_EXCEEDED
//	fuel or memory limit                         FuelExhausted, ...  RESOURCE_EXHAUSTED
//	canceled                                     Canceled            CANCELLED
//	guest returned an error status               GuestError          the guest's status
//	traps, ABI violations, GPU device failures,  (their kinds)       INTERNAL
//	  a contained panic

// errInfo is everything a callbox_error carries, in Go.
type errInfo struct {
	kind     abi.Kind
	code     abi.Code
	status   abi.Status
	seq      uint64
	callback string
	chain    string
	message  string
	guest    string
	text     string
	// A chain step refused after an earlier one failed: that step.
	failedCallback string
	failedSeq      uint64
	failedMessage  string
	failedText     string // the failed step's whole error, as text is this one's
	// A batched call that failed in one element: the batch's size and
	// that element.
	batchSize, batchElement uint64
	// A failure inside the guest: its frames, innermost first.
	frames []host.Frame
}

// bridgeError is a failure the bridge itself reports about a callback
// (unknown name, stale content id, closed or missing host, a refused XLA
// frame).
type bridgeError struct {
	kind     abi.Kind
	callback string
	msg      string
}

func (e *bridgeError) Error() string {
	if e.callback == "" {
		return e.msg
	}
	return fmt.Sprintf("callback %q: %s", e.callback, e.msg)
}

// Kind is the failure's kind (abi.Kinder).
func (e *bridgeError) Kind() abi.Kind { return e.kind }

// Is matches the error's kind.
func (e *bridgeError) Is(target error) bool { return abi.IsKind(e.kind, target) }

// keyedError is a host error about the callback a call named (an unknown
// name or id, an ambiguous id), in the host's words, with the name or id
// as the error's callback field.
type keyedError struct {
	callback string
	err      error
}

func (e *keyedError) Error() string { return e.err.Error() }
func (e *keyedError) Unwrap() error { return e.err }

// describe flattens any error of the call path into an errInfo. The kind
// comes from the error (abi.KindOf); errors that carry none (configuration
// problems, a closed host) are InvalidArgument. The code is the kind's,
// from the one table in abi (Kind.Code).
func describe(err error) errInfo {
	var in errInfo
	in.kind = abi.KindOf(err)
	in.message = err.Error()
	var (
		ce *host.CallbackError
		ch *host.ChainError
		le *host.LoadError
		be *bridgeError
		cf *config.Error
		ge *cuda.Error
		ae *argError
	)
	switch {
	case errors.As(err, &ch):
		in.callback, in.chain, in.seq = ch.Callback, ch.Chain, ch.Seq
		in.kind = ch.First.Kind()
		in.status = ch.First.Status
		in.guest = ch.First.GuestMessage
		in.failedCallback, in.failedSeq, in.failedMessage = ch.First.Callback, ch.First.Seq, ch.First.Message
		in.failedText = ch.First.Kind().Ident() + ": " + ch.First.Error()
		in.frames = ch.First.Frames
	case errors.As(err, &ce):
		in.callback, in.chain, in.seq = ce.Callback, ce.Chain, ce.Seq
		in.message, in.guest, in.status = ce.Message, ce.GuestMessage, ce.Status
		in.frames = ce.Frames
		if ce.BatchSize > 0 {
			in.batchSize, in.batchElement = uint64(ce.BatchSize), uint64(ce.Element)
		}
	case errors.As(err, &le):
		in.callback = le.Callback
	case errors.As(err, &be):
		in.callback, in.message = be.callback, be.msg
	case errors.As(err, new(*keyedError)):
		var ke *keyedError
		errors.As(err, &ke)
		in.callback = ke.callback
	case errors.As(err, &ae):
		in.callback = ae.callback
	case errors.As(err, &ge):
		in.callback, in.chain, in.seq = ge.Callback, ge.Chain, ge.Seq
	case errors.As(err, &cf):
		in.kind = abi.InvalidArgument
	}
	if in.kind == abi.KindNone {
		in.kind = abi.InvalidArgument
	}
	if in.kind != abi.GuestError {
		in.status = abi.StatusOK
	}
	in.code = in.kind.Code(in.status)
	in.text = in.kind.Ident() + ": " + err.Error()
	return in
}

// panicError turns a recovered panic into a HostPanic error: no Go panic
// crosses the C boundary.
func panicError(where string, p any) error {
	return &bridgeError{kind: abi.HostPanic, msg: fmt.Sprintf("%s: host panic (contained): %v", where, p)}
}

// xlaMessage is the code and message of a failed XLA call, either
// handler (and of callbox_cuda_call_dlpack): the message names the kind
// and the callback, and ends with the token under which the library keeps
// the whole failure for callbox_xla_failure (xlafailure.go), e.g.
//
//	callbox Timeout: callback "spin" failed: timeout after 250ms [callbox error 5f2c9a1e-17]
func xlaMessage(err error) (abi.Code, string) {
	in := describe(err)
	id := recordXLAFailure(in)
	return in.code, "callbox " + in.kind.Ident() + ": " + err.Error() + " " + xlaToken(id)
}

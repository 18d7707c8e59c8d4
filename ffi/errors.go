//go:build cgo

package main

import (
	"errors"
	"fmt"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
)

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
}

// bridgeError is a failure the bridge itself reports about a callback
// (unknown name, stale content id, closed host).
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
	)
	switch {
	case errors.As(err, &ch):
		in.callback, in.chain, in.seq = ch.Callback, ch.Chain, ch.Seq
		in.kind = ch.First.Kind()
		in.status = ch.First.Status
	case errors.As(err, &ce):
		in.callback, in.chain, in.seq = ce.Callback, ce.Chain, ce.Seq
		in.message, in.guest, in.status = ce.Message, ce.GuestMessage, ce.Status
	case errors.As(err, &le):
		in.callback = le.Callback
	case errors.As(err, &be):
		in.callback, in.message = be.callback, be.msg
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

//go:build cgo

package main

/*
#define CALLBOX_BUILDING_LIBRARY 1
#include <stdlib.h>
#include <string.h>
#include "include/callbox.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// An XLA error carries a code and a message, nothing else: a binding that
// catches one (Python's callbox.jax.typed_errors) could only guess the
// failure from the text. So the library keeps every failure its XLA
// handlers (and callbox_cuda_call_dlpack) report, whole, under an id, and
// ends the message with a token naming it,
//
//	callbox Timeout: callback "spin" failed: timeout after 250ms [callbox error 5f2c9a1e-17]
//
// which callbox_xla_failure finds in the text and turns back into the
// callbox_error the same failure gives through the C API. The token's
// form is this file's alone (xlaToken, xlaFailureID): no binding parses
// it. 5f2c9a1e is the library's tag, drawn at random when it loads, so a
// message from another process (or an earlier load of the library) never
// names a failure of this one; 17 numbers the failures from 1.
//
// The table is bounded: it keeps the last xlaFailuresMax failures, and
// evicts the oldest first while their text is over xlaFailuresBytes (the
// newest is always kept). A failure is looked up, not taken: the same
// message may be read again (JAX raises a failed execution's error again
// from later executions that depend on it).

const (
	xlaFailuresMax   = 1024    // failures kept
	xlaFailuresBytes = 4 << 20 // bytes of their text kept (beyond the newest)
)

// xlaTag is this load of the library's tag: in the tokens of its failures
// and in the host attribute values it hands out (xlaHostAttr).
var xlaTag = fmt.Sprintf("%08x", rand.Uint32())

// xlaFailure is one kept failure: its id, its description and the bytes
// of text it holds.
type xlaFailure struct {
	id   uint64
	info errInfo
	size int
}

// xlaFailures is the table: slot id%xlaFailuresMax holds failure id while
// it is kept; failures below oldest are gone.
var xlaFailures struct {
	mu     sync.Mutex
	last   uint64 // the last id given
	oldest uint64 // the oldest id that may still be kept
	bytes  int
	slots  [xlaFailuresMax]xlaFailure
}

// textSize is the bytes of text an errInfo holds.
func (in *errInfo) textSize() int {
	return len(in.callback) + len(in.chain) + len(in.message) + len(in.guest) + len(in.text) +
		len(in.failedCallback) + len(in.failedMessage) + len(in.failedText)
}

// recordXLAFailure keeps in and returns its id.
func recordXLAFailure(in errInfo) uint64 {
	t := &xlaFailures
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last++
	id := t.last
	if t.oldest == 0 {
		t.oldest = 1
	}
	s := &t.slots[id%xlaFailuresMax]
	t.bytes -= s.size // the failure xlaFailuresMax before it, or an empty slot
	*s = xlaFailure{id: id, info: in, size: in.textSize()}
	t.bytes += s.size
	if id-t.oldest >= xlaFailuresMax {
		t.oldest = id - xlaFailuresMax + 1
	}
	for t.bytes > xlaFailuresBytes && t.oldest < id {
		if old := &t.slots[t.oldest%xlaFailuresMax]; old.id == t.oldest {
			t.bytes -= old.size
			*old = xlaFailure{}
		}
		t.oldest++
	}
	return id
}

// lookupXLAFailure is the failure kept under id, if it still is.
func lookupXLAFailure(id uint64) (errInfo, bool) {
	t := &xlaFailures
	t.mu.Lock()
	defer t.mu.Unlock()
	if id == 0 || id < t.oldest {
		return errInfo{}, false
	}
	s := &t.slots[id%xlaFailuresMax]
	if s.id != id {
		return errInfo{}, false
	}
	return s.info, true
}

// xlaTokenPrefix starts every token of this load of the library.
var xlaTokenPrefix = "[callbox error " + xlaTag + "-"

// xlaToken is the token of failure id, which ends its XLA message.
func xlaToken(id uint64) string {
	return xlaTokenPrefix + strconv.FormatUint(id, 10) + "]"
}

// xlaFailureID finds the first token of this load of the library in msg
// (an XLA message, or a framework's text around one) and returns its id.
func xlaFailureID(msg string) (uint64, bool) {
	for {
		i := strings.Index(msg, xlaTokenPrefix)
		if i < 0 {
			return 0, false
		}
		msg = msg[i+len(xlaTokenPrefix):]
		n := 0
		for n < len(msg) && n < 20 && msg[n] >= '0' && msg[n] <= '9' {
			n++
		}
		if n > 0 && n < len(msg) && msg[n] == ']' {
			if id, err := strconv.ParseUint(msg[:n], 10, 64); err == nil {
				return id, true
			}
		}
	}
}

// xlaFailureOf is the failure an XLA message reports, if this library
// still keeps it.
func xlaFailureOf(msg string) (errInfo, bool) {
	id, ok := xlaFailureID(msg)
	if !ok {
		return errInfo{}, false
	}
	return lookupXLAFailure(id)
}

//export cbxgo_xla_failure
func cbxgo_xla_failure(message *C.char, out **C.callbox_error) *C.callbox_error {
	return entry("callbox_xla_failure", func() error {
		if err := outArg(out, "failure"); err != nil {
			return err
		}
		*out = nil
		if message == nil {
			return badArg(arg("xla_message"), "NULL")
		}
		// Viewed, not copied, and not bounded as names are: a framework's
		// error text may be long.
		msg := unsafe.String((*byte)(unsafe.Pointer(message)), int(C.strlen(message)))
		if in, ok := xlaFailureOf(msg); ok {
			*out = cErrorInfo(in)
		}
		return nil
	})
}

// xlaHostAttrSize is CALLBOX_XLA_HOST_ATTR_SIZE: the longest attribute
// value (a uint64 handle, '@', the tag) and its NUL fit.
const xlaHostAttrSize = 64

// xlaHostAttr is the value of the XLA handlers' attribute host that names
// the host with this handle in this load of the library.
func xlaHostAttr(handle uint64) string {
	return strconv.FormatUint(handle, 10) + "@" + xlaTag
}

// xlaHost resolves attribute host (ref) of a call of callback: the open
// host it names, or an error naming the attribute and the callback.
func xlaHost(ref, callback string) (*bridgeHost, error) {
	num, tag, found := strings.Cut(ref, "@")
	handle, err := strconv.ParseUint(num, 10, 64)
	if !found || err != nil || handle == 0 || tag == "" {
		return nil, &argError{arg: arg("attribute host"), callback: callback,
			reason: fmt.Sprintf("%q is not a host (want HANDLE@TAG, the value callbox_xla_host_attr gives)", clip(ref))}
	}
	if tag != xlaTag {
		return nil, &bridgeError{kind: abi.FailedPrecondition, callback: callback, msg: fmt.Sprintf(
			"attribute host %q names a host of another process (or of an earlier load of the library; "+
				"this one's hosts are HANDLE@%s): a program that names its host runs only in the process "+
				"that made it; run a program made elsewhere on the default host (callbox_set_default_host; "+
				"in Python, callbox.jax.register(host))", clip(ref), xlaTag)}
	}
	bh, err := lookupHost(handle)
	if err != nil {
		var ae *argError
		if errors.As(err, &ae) {
			return nil, &argError{arg: arg("attribute host"), callback: callback, reason: ae.reason}
		}
		return nil, err
	}
	if bh.open() != nil {
		return nil, &bridgeError{kind: abi.FailedPrecondition, callback: callback,
			msg: fmt.Sprintf("the host that attribute host names (handle %d) is closed", handle)}
	}
	return bh, nil
}

// clip shortens an attribute value for a message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

//export cbxgo_xla_host_attr
func cbxgo_xla_host_attr(h C.callbox_host, buf *C.char, capacity C.size_t) *C.callbox_error {
	return entry("callbox_xla_host_attr", func() error {
		if buf == nil {
			return badArg(arg("buf"), "NULL")
		}
		bh, err := lookupHost(uint64(h))
		if err != nil {
			return err
		}
		if err := bh.open(); err != nil {
			return err
		}
		v := xlaHostAttr(bh.handle)
		if uintptr(capacity) <= uintptr(len(v)) {
			return badArg(arg("cap"), "%d bytes, the value needs %d with its NUL (CALLBOX_XLA_HOST_ATTR_SIZE is %d)",
				uint64(capacity), len(v)+1, xlaHostAttrSize)
		}
		writeMsg(buf, capacity, v)
		return nil
	})
}

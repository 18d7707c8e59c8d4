//go:build wasip1

package callbox

import (
	"errors"
	"runtime"
	"strconv"
	"strings"
)

// Status is what a callback returns to the host (ABI.md §4): the absl /
// XLA FFI error codes.
type Status int32

// The statuses of ABI v1.
const (
	OK                 Status = 0
	Unknown            Status = 2
	InvalidArgument    Status = 3
	ResourceExhausted  Status = 8
	FailedPrecondition Status = 9
	Unimplemented      Status = 12
	Internal           Status = 13
)

func (s Status) valid() bool {
	switch s {
	case OK, Unknown, InvalidArgument, ResourceExhausted, FailedPrecondition, Unimplemented, Internal:
		return true
	}
	return false
}

// Error is a callback failure with the status to report. Run finds it with
// errors.As, so it may be wrapped.
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string { return e.Message }

// Fail returns an error that makes the call fail with status and message:
//
//	return callbox.Fail(callbox.InvalidArgument, "x["+strconv.Itoa(i)+"] is NaN")
func Fail(status Status, message string) error { return &Error{Status: status, Message: message} }

// Run is the body of a callback export: it validates the frame the host
// passed, runs body on it, and turns the outcome into the status the export
// returns. A nil error is OK; an error carrying an *Error reports its status
// (a non-ABI status or OK becomes UNKNOWN) with err.Error() as the message;
// any other error is UNKNOWN. A panic is recovered and reported as INTERNAL
// with the panic's message and the line of the callback that caused it.
//
// A frame this SDK cannot read (a host bug, or a host speaking another ABI
// version) is INTERNAL, and body does not run.
func Run(frame uint32, body func(f *Frame) error) (status int32) {
	defer func() {
		if p := recover(); p != nil {
			status = report(Fail(Internal, "panic: "+panicText(p)+panicSite()))
		}
	}()
	f, err := openFrame(frame)
	if err == nil {
		err = body(&f)
	}
	return report(err)
}

// report passes err's message to the host and returns its status.
func report(err error) int32 {
	if err == nil {
		return int32(OK)
	}
	status := Unknown
	var e *Error
	if errors.As(err, &e) && e.Status != OK && e.Status.valid() {
		status = e.Status
	}
	setError(err.Error())
	return int32(status)
}

// panicText formats a recovered value without fmt (which would pull os and
// its WASI imports into every callback).
func panicText(p any) string {
	switch v := p.(type) {
	case error:
		return v.Error()
	case string:
		return v
	case interface{ String() string }:
		return v.String()
	case int:
		return strconv.Itoa(v)
	}
	return "(a value of a type without a message)"
}

// panicSite is " (at fn file:line <- ...)": the innermost frames of the
// panicking stack outside the Go runtime and this package, the
// callback's own functions and lines.
func panicSite() string {
	var pcs [64]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs[:])])
	var b strings.Builder
	n := 0
	for {
		fr, more := frames.Next()
		if fr.Function != "" && !strings.HasPrefix(fr.Function, "runtime.") && !strings.HasPrefix(fr.Function, sdkPackage+".") {
			if n == panicFrames {
				b.WriteString(" <- ...")
				break
			}
			if n > 0 {
				b.WriteString(" <- ")
			}
			b.WriteString(fr.Function + " " + fr.File + ":" + strconv.Itoa(fr.Line))
			n++
		}
		if !more {
			break
		}
	}
	if n == 0 {
		return ""
	}
	return " (at " + b.String() + ")"
}

// panicFrames is how many of the callback's own frames a recovered panic's
// message names, innermost first. The guest recovers it, so the engine
// sees no trap and has no frames of its own to give.
const panicFrames = 4

// sdkPackage is this package's path, as runtime frames name it.
const sdkPackage = "github.com/seed4b3e0ccb/callbox/guests/go/callbox"

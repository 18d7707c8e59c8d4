//go:build cgo

package main

import (
	"fmt"
	"unsafe"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/ffi/internal/dlpack"
)

// argName names an argument of a C API call or an XLA buffer: a role
// ("input", "outputs", "callback") and, for one of several, its index.
// It is formatted only when there is an error to report.
type argName struct {
	role  string
	index int // -1: not one of several
}

func (a argName) String() string {
	if a.index < 0 {
		return a.role
	}
	return fmt.Sprintf("%s %d", a.role, a.index)
}

func arg(role string) argName { return argName{role: role, index: -1} }

// argError is a bad argument, named; callback is the callback the call
// named, when the argument is one of its tensors.
type argError struct {
	arg      argName
	reason   string
	callback string
}

func (e *argError) Error() string { return e.arg.String() + ": " + e.reason }

// Kind is InvalidArgument (abi.Kinder).
func (e *argError) Kind() abi.Kind { return abi.InvalidArgument }

// Is matches InvalidArgument.
func (e *argError) Is(target error) bool { return abi.IsKind(abi.InvalidArgument, target) }

//go:noinline
func badArg(a argName, format string, args ...any) error {
	return &argError{arg: a, reason: fmt.Sprintf(format, args...)}
}

// dlError names the argument of a tensor dlpack.Check refused.
//
//go:noinline
func dlError(role string, index int, err error) error {
	return &argError{arg: argName{role, index}, reason: err.Error()}
}

// fromDLs converts n C tensors at p into into[:n] (a new slice when into
// is too short); role is "input" or "output".
func fromDLs(role string, p *dlpack.Tensor, n uintptr, into []abi.Tensor) ([]abi.Tensor, error) {
	if n == 0 {
		return into[:0], nil
	}
	if p == nil {
		return nil, badArg(arg(role+"s"), "NULL with a count of %d", n)
	}
	if n > maxTensors {
		return nil, badArg(arg(role+"s"), "count %d exceeds the maximum %d", n, maxTensors)
	}
	if n > uintptr(len(into)) {
		into = make([]abi.Tensor, n)
	}
	out := into[:n]
	ts := unsafe.Slice(p, n)
	var v dlpack.View
	for i := range out {
		if err := dlpack.CheckInto(&v, &ts[i], dlpack.OnHost); err != nil {
			return nil, dlError(role, i, err)
		}
		v.HostTensor(&out[i])
	}
	return out, nil
}

// maxTensors bounds the inputs or outputs of one call.
const maxTensors = 1024

// cloneTensor copies a tensor into Go memory, for calls that run after the
// C call returns (taps).
func cloneTensor(t abi.Tensor) abi.Tensor {
	return abi.Tensor{DType: t.DType, Shape: append(abi.Shape(nil), t.Shape...), Data: append([]byte(nil), t.Data...)}
}

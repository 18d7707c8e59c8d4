package abi

// Kind classifies why a call failed. Both engines map every failure onto
// these kinds, so a caller can handle a timeout the same way whichever engine
// ran the guest. A Kind is itself an error, usable as an errors.Is target.
//
// Kind lives in abi because it is part of every contract callbox has with
// the outside: the Go API's typed errors, the C API's error objects (by
// number) and the XLA FFI error codes (Code). The numbers are stable.
type Kind uint8

// The failure taxonomy. Values are stable; new kinds are appended.
const (
	KindNone Kind = iota
	// Timeout: the call ran past its deadline: its callback's timeout,
	// which bounds the whole host call (instantiation, _initialize, the
	// guest allocator and the callback share one deadline), or the
	// caller's context deadline (the error then wraps
	// context.DeadlineExceeded).
	Timeout
	// FuelExhausted: the call used up its instruction budget.
	FuelExhausted
	// MemoryLimit: the guest failed after a memory.grow was refused by the
	// callback's max_memory.
	MemoryLimit
	// StackOverflow: the guest exhausted its call stack.
	StackOverflow
	// Unreachable: the guest executed an unreachable instruction (Rust
	// panics and aborts end here).
	Unreachable
	// MemoryOutOfBounds: a load or store outside linear memory.
	MemoryOutOfBounds
	// DivideByZero: integer division or remainder by zero.
	DivideByZero
	// IntegerOverflow: signed division overflow (INT_MIN / -1), or a
	// float-to-int truncation out of the integer's range (the spec's
	// "integer overflow" trap; both engines report it so).
	IntegerOverflow
	// InvalidConversion: a float-to-int truncation of NaN.
	InvalidConversion
	// TableOutOfBounds: an indirect call or table access past the table,
	// or a call_indirect through a null entry (both engines report that
	// so; wazero cannot tell the two apart).
	TableOutOfBounds
	// IndirectCallMismatch: call_indirect to a function of the wrong type.
	IndirectCallMismatch
	// GuestError: the callback returned a non-zero ABI status.
	GuestError
	// ABIViolation: the guest broke the ABI: bad pointer, bad status,
	// rewritten frame, write past an output, missing export.
	ABIViolation
	// HostPanic: a bug in the host's own code, caught and contained.
	HostPanic
	// Canceled: the caller's context was canceled during the call (the
	// error wraps context.Canceled). A context that ended because its
	// deadline passed is a Timeout, not Canceled.
	Canceled
	// OtherTrap: any other engine trap (for example a misaligned atomic).
	OtherTrap
	// InvalidArgument: the host refused the call before the guest ran
	// (inputs not matching the signature, outputs above max_output).
	InvalidArgument
	// UnknownCallback: no loaded callback has the name or content id the
	// call named (a typo, or a module that changed since the id was taken).
	UnknownCallback
	// FailedPrecondition: nothing can serve the call in the state things
	// are in: the host is closed, no default host is set for a foreign
	// entry (XLA's handlers), or a GPU entry was registered where XLA
	// gives it no stream.
	FailedPrecondition
	// Overloaded: every instance of the callback stayed busy for the
	// callback's max_wait, so the call gave up waiting for one; the guest
	// never ran. It says the host is short of instances (raise
	// max_instances, or shed load), not that a guest ran away, which is a
	// Timeout.
	Overloaded
	// WorkerDied: the callback runs under isolation: process and its
	// worker process died during the call (a crash, a seccomp kill, the
	// kernel's OOM killer, kill -9); the message names the signal. No
	// output was written; the next call starts a new worker.
	WorkerDied
	numKinds
)

var kindNames = [numKinds]string{
	KindNone:             "none",
	Timeout:              "timeout",
	FuelExhausted:        "fuel exhausted",
	MemoryLimit:          "memory limit",
	StackOverflow:        "stack overflow",
	Unreachable:          "unreachable",
	MemoryOutOfBounds:    "memory out of bounds",
	DivideByZero:         "divide by zero",
	IntegerOverflow:      "integer overflow",
	InvalidConversion:    "invalid conversion",
	TableOutOfBounds:     "table out of bounds",
	IndirectCallMismatch: "indirect call mismatch",
	GuestError:           "guest error",
	ABIViolation:         "ABI violation",
	HostPanic:            "host panic",
	Canceled:             "canceled",
	OtherTrap:            "trap",
	InvalidArgument:      "invalid argument",
	UnknownCallback:      "unknown callback",
	FailedPrecondition:   "failed precondition",
	Overloaded:           "overloaded",
	WorkerDied:           "worker died",
}

var kindIdents = [numKinds]string{
	"None", "Timeout", "FuelExhausted", "MemoryLimit", "StackOverflow", "Unreachable",
	"MemoryOutOfBounds", "DivideByZero", "IntegerOverflow", "InvalidConversion",
	"TableOutOfBounds", "IndirectCallMismatch", "GuestError", "ABIViolation",
	"HostPanic", "Canceled", "OtherTrap", "InvalidArgument", "UnknownCallback",
	"FailedPrecondition", "Overloaded", "WorkerDied",
}

// String is the human-readable name ("timeout", "ABI violation").
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "unknown"
}

// Ident is the Go-style identifier ("Timeout", "ABIViolation"), used in
// reports and tables.
func (k Kind) Ident() string {
	if k < numKinds {
		return kindIdents[k]
	}
	return "Unknown"
}

// Error makes a Kind usable as a sentinel: errors.Is(err, abi.Timeout).
func (k Kind) Error() string { return k.String() }

// Kinds lists every failure kind, in declaration order.
func Kinds() []Kind {
	out := make([]Kind, 0, numKinds-1)
	for k := Timeout; k < numKinds; k++ {
		out = append(out, k)
	}
	return out
}

// Kinder is implemented by every error that carries a Kind: the host's
// CallbackError and LoadError, and the engine layer's traps. Read a kind
// the same way everywhere with KindOf. Every Kinder also answers
// errors.Is for its kind, through IsKind.
type Kinder interface {
	error
	Kind() Kind
}

// IsKind is the Is method of every error with a kind: target is that kind
// (errors.Is(err, abi.Timeout)). KindNone matches nothing.
func IsKind(k Kind, target error) bool {
	t, ok := target.(Kind)
	return ok && t == k && k != KindNone
}

// KindOf returns the Kind of the first error in err's chain that has one,
// or KindNone.
func KindOf(err error) Kind {
	for err != nil {
		if k, ok := err.(Kinder); ok {
			return k.Kind()
		}
		if k, ok := err.(Kind); ok {
			return k
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return KindNone
		}
		err = u.Unwrap()
	}
	return KindNone
}

// ParseKind is the inverse of Ident ("Timeout" -> Timeout).
func ParseKind(ident string) (Kind, bool) {
	for k := KindNone; k < numKinds; k++ {
		if kindIdents[k] == ident {
			return k, true
		}
	}
	return KindNone, false
}

// Code maps a failure kind to the absl / XLA FFI error code a runtime
// reports for it. This table is the one place the mapping lives:
//
//	Timeout                      DEADLINE_EXCEEDED
//	FuelExhausted, MemoryLimit   RESOURCE_EXHAUSTED
//	InvalidArgument              INVALID_ARGUMENT
//	UnknownCallback              NOT_FOUND
//	FailedPrecondition           FAILED_PRECONDITION
//	Canceled                     CANCELLED
//	GuestError                   the guest's own status (guest), INTERNAL if it is not an error status
//	KindNone                     OK
//	every other kind             INTERNAL
func (k Kind) Code(guest Status) Code {
	switch k {
	case KindNone:
		return CodeOK
	case Timeout:
		return CodeDeadlineExceeded
	case FuelExhausted, MemoryLimit, Overloaded:
		return CodeResourceExhausted
	case InvalidArgument:
		return CodeInvalidArgument
	case UnknownCallback:
		return CodeNotFound
	case FailedPrecondition:
		return CodeFailedPrecondition
	case Canceled:
		return CodeCancelled
	case GuestError:
		if guest != StatusOK && guest.Valid() {
			return Code(guest)
		}
	}
	return CodeInternal
}

// Valid reports whether k is a kind this version of the ABI defines.
func (k Kind) Valid() bool { return k < numKinds }

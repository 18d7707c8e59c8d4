package sandbox

import "github.com/seed4b3e0ccb/callbox/abi"

// Kind is the failure taxonomy, defined once in abi (abi/kind.go); the
// engine layer uses it under these short names.
type Kind = abi.Kind

// The failure kinds, as abi defines them.
const (
	KindNone             = abi.KindNone
	Timeout              = abi.Timeout
	FuelExhausted        = abi.FuelExhausted
	MemoryLimit          = abi.MemoryLimit
	StackOverflow        = abi.StackOverflow
	Unreachable          = abi.Unreachable
	MemoryOutOfBounds    = abi.MemoryOutOfBounds
	DivideByZero         = abi.DivideByZero
	IntegerOverflow      = abi.IntegerOverflow
	InvalidConversion    = abi.InvalidConversion
	TableOutOfBounds     = abi.TableOutOfBounds
	IndirectCallMismatch = abi.IndirectCallMismatch
	GuestError           = abi.GuestError
	ABIViolation         = abi.ABIViolation
	HostPanic            = abi.HostPanic
	Canceled             = abi.Canceled
	OtherTrap            = abi.OtherTrap
	InvalidArgument      = abi.InvalidArgument
)

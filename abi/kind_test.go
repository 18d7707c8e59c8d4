package abi_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// TestKindCodes pins the Kind -> absl/XLA FFI code table, every kind.
func TestKindCodes(t *testing.T) {
	want := map[abi.Kind]abi.Code{
		abi.Timeout:              abi.CodeDeadlineExceeded,
		abi.FuelExhausted:        abi.CodeResourceExhausted,
		abi.MemoryLimit:          abi.CodeResourceExhausted,
		abi.InvalidArgument:      abi.CodeInvalidArgument,
		abi.UnknownCallback:      abi.CodeNotFound,
		abi.FailedPrecondition:   abi.CodeFailedPrecondition,
		abi.Overloaded:           abi.CodeResourceExhausted,
		abi.Canceled:             abi.CodeCancelled,
		abi.StackOverflow:        abi.CodeInternal,
		abi.Unreachable:          abi.CodeInternal,
		abi.MemoryOutOfBounds:    abi.CodeInternal,
		abi.DivideByZero:         abi.CodeInternal,
		abi.IntegerOverflow:      abi.CodeInternal,
		abi.InvalidConversion:    abi.CodeInternal,
		abi.TableOutOfBounds:     abi.CodeInternal,
		abi.IndirectCallMismatch: abi.CodeInternal,
		abi.ABIViolation:         abi.CodeInternal,
		abi.HostPanic:            abi.CodeInternal,
		abi.OtherTrap:            abi.CodeInternal,
		abi.WorkerDied:           abi.CodeInternal,
		abi.GuestError:           abi.CodeInternal, // with no valid error status
	}
	assert.Len(t, want, len(abi.Kinds()), "every kind is in the table")
	for _, k := range abi.Kinds() {
		assert.Equal(t, want[k], k.Code(abi.StatusOK), k.Ident())
	}
	assert.Equal(t, abi.CodeOK, abi.KindNone.Code(abi.StatusOK))
	// A guest error carries the guest's own status.
	for _, s := range []abi.Status{abi.StatusUnknown, abi.StatusInvalidArgument, abi.StatusResourceExhausted, abi.StatusFailedPrecondition, abi.StatusUnimplemented, abi.StatusInternal} {
		assert.Equal(t, abi.Code(s), abi.GuestError.Code(s), s.String())
		assert.Equal(t, s.String(), abi.Code(s).String(), "guest statuses are absl codes with the same names")
	}
	assert.Equal(t, abi.CodeInternal, abi.GuestError.Code(abi.Status(77)), "an invalid status is no code")
	assert.Equal(t, "DEADLINE_EXCEEDED", abi.CodeDeadlineExceeded.String())
	assert.Equal(t, "code(99)", abi.Code(99).String())
}

type kinded struct{ k abi.Kind }

func (e kinded) Error() string  { return e.k.String() }
func (e kinded) Kind() abi.Kind { return e.k }

func TestKindOf(t *testing.T) {
	assert.Equal(t, abi.Timeout, abi.KindOf(fmt.Errorf("wrapped: %w", kinded{abi.Timeout})))
	assert.Equal(t, abi.MemoryLimit, abi.KindOf(fmt.Errorf("x: %w", abi.MemoryLimit)))
	assert.Equal(t, abi.KindNone, abi.KindOf(fmt.Errorf("plain")))
	assert.Equal(t, abi.KindNone, abi.KindOf(nil))
	for _, k := range abi.Kinds() {
		got, ok := abi.ParseKind(k.Ident())
		assert.True(t, ok)
		assert.Equal(t, k, got)
	}
	_, ok := abi.ParseKind("Nope")
	assert.False(t, ok)
}

func TestCallbackIDForm(t *testing.T) {
	sig, err := abi.ParseSignature("(x: f32[n]) -> f32[n]")
	assert.NoError(t, err)
	id := abi.CallbackID([32]byte{1}, "scale", sig)
	assert.True(t, abi.IsCallbackID(id), id)
	assert.NotEqual(t, id, abi.CallbackID([32]byte{2}, "scale", sig), "another module, another id")
	assert.NotEqual(t, id, abi.CallbackID([32]byte{1}, "scal", sig), "another export, another id")
	assert.False(t, abi.IsCallbackID("scale"))
	assert.False(t, abi.IsCallbackID(id[:len(id)-1]))
}

// TestIsKind: IsKind, the Is method of every error with a kind, matches
// exactly its kind and nothing else; KindNone matches nothing.
func TestIsKind(t *testing.T) {
	for _, k := range abi.Kinds() {
		for _, other := range abi.Kinds() {
			assert.Equal(t, k == other, abi.IsKind(k, other), "%v against %v", k, other)
		}
		assert.False(t, abi.IsKind(k, errors.New(k.String())), "only a Kind matches, not its text")
		assert.False(t, abi.IsKind(abi.KindNone, k))
	}
	assert.False(t, abi.IsKind(abi.KindNone, abi.KindNone))
}

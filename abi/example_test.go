package abi_test

import (
	"fmt"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// A signature binds to input types: symbolic dims are solved, results
// derived, and pass-through results ($x) point at their input.
func ExampleSignature_Bind() {
	sig, err := abi.ParseSignature("(x: f32[n, 3], w: f32[3, m]) -> (f32[n, m], $x)")
	if err != nil {
		panic(err)
	}
	outs, err := sig.Bind([]abi.TensorMeta{
		{DType: abi.F32, Shape: abi.Shape{5, 3}},
		{DType: abi.F32, Shape: abi.Shape{3, 2}},
	})
	if err != nil {
		panic(err)
	}
	for _, o := range outs {
		fmt.Println(o.DType, o.Shape, "alias", o.Alias)
	}

	_, err = sig.Bind([]abi.TensorMeta{
		{DType: abi.F32, Shape: abi.Shape{5, 4}},
		{DType: abi.F32, Shape: abi.Shape{3, 2}},
	})
	fmt.Println(err)
	// Output:
	// f32 [5,2] alias -1
	// f32 [5,3] alias 0
	// argument 0 (x): expected f32[n=5,3], got f32[5,4] (dimension 1 is 4, want 3)
}

// Host tensors are dense row-major bytes with a dtype; From and View move
// between them and Go slices without copying.
func ExampleFrom() {
	t := abi.From([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	fmt.Println(t.Type(), len(t.Data), "bytes")
	v := abi.MustView[float32](t)
	v[0] = 10
	fmt.Println(abi.MustView[float32](t)[0])
	_, err := abi.View[int32](t)
	fmt.Println(err)
	// Output:
	// f32[2,3] 24 bytes
	// 10
	// cannot view f32 data as s32
}

// Every failure kind maps to one absl / XLA FFI error code; a guest error
// keeps the guest's own status.
func ExampleKind_Code() {
	fmt.Println(abi.Timeout.Code(abi.StatusOK))
	fmt.Println(abi.MemoryLimit.Code(abi.StatusOK))
	fmt.Println(abi.GuestError.Code(abi.StatusFailedPrecondition))
	fmt.Println(abi.Unreachable.Code(abi.StatusOK))
	// Output:
	// DEADLINE_EXCEEDED
	// RESOURCE_EXHAUSTED
	// FAILED_PRECONDITION
	// INTERNAL
}

package host_test

import (
	"context"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/internal/testknob"
)

// The SDK conformance suite's knob (internal/testknob, on host.New's
// context) moves every data buffer to 16 bytes past a 64-byte boundary,
// the least alignment ABI v1 promises; without it buffers are 64-byte
// aligned.
func TestSkewedBuffersKnob(t *testing.T) {
	for _, skewed := range []bool{false, true} {
		ctx := context.Background()
		if skewed {
			ctx = testknob.WithSkewedBuffers(ctx)
		}
		h := newHostCtx(t, ctx, config.EngineWazero, nil)
		cb, err := h.Lookup("scale")
		require.NoError(t, err)
		p, err := cb.Plan([]abi.TensorMeta{{DType: abi.F32, Shape: abi.Shape{8}}, {DType: abi.F32}})
		require.NoError(t, err)
		call, err := cb.Start(ctx, p)
		require.NoError(t, err)
		mem := call.Memory()
		for i := range 2 {
			off := uintptr(unsafe.Pointer(unsafe.SliceData(call.Input(i)))) - uintptr(mem.Base)
			want := uintptr(0)
			if skewed {
				want = 16
			}
			assert.Equal(t, want, off%64, "skewed %v: input %d at guest offset %d", skewed, i, off)
		}
		call.Close(ctx)
	}
}

//go:build cgo

package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/ffi/internal/xlaharness"
	"github.com/seed4b3e0ccb/callbox/internal/dlpack"
)

// TestDLPackEntry: CUDA DLPack tensors through the C entry (as PyTorch or
// CuPy pass them) take the GPU path.
func TestDLPackEntry(t *testing.T) {
	r := newRig(t)
	in, f := r.dev32(t, r.s, 1, 2, 3), r.dev32(t, r.s, 10)
	out := r.out32(3, 0)
	tensor := func(p uintptr, shape ...int64) xlaharness.Tensor {
		return xlaharness.Tensor{Data: p, DeviceType: int32(dlpack.CUDA), Shape: shape, Code: 2, Bits: 32}
	}
	code, msg := xlaharness.CallDLPack(dlpackEntryAddr(), "scale", uintptr(r.s), []xlaharness.Tensor{tensor(in, 3), tensor(f)}, []xlaharness.Tensor{tensor(out, 3)})
	require.Zero(t, code, msg)
	assert.Equal(t, []float32{10, 20, 30}, r.read(out, 3))

	cpu := tensor(in, 3)
	cpu.DeviceType = int32(dlpack.CPU)
	code, msg = xlaharness.CallDLPack(dlpackEntryAddr(), "scale", uintptr(r.s), []xlaharness.Tensor{cpu, tensor(f)}, []xlaharness.Tensor{tensor(out, 3)})
	assert.Equal(t, int(abi.CodeInvalidArgument), code)
	assert.Contains(t, msg, "input 0: device type 1 is host memory")

	trapOut := r.out32(3, 4)
	code, msg = xlaharness.CallDLPack(dlpackEntryAddr(), "half_then_trap", uintptr(r.s), []xlaharness.Tensor{tensor(in, 3)}, []xlaharness.Tensor{tensor(trapOut, 3)})
	assert.Equal(t, int(abi.CodeInternal), code)
	assert.Contains(t, msg, "unreachable")
	assert.Equal(t, []float32{4, 4, 4}, r.read(trapOut, 3))

	code, msg = xlaharness.CallDLPack(dlpackEntryAddr(), "nope", uintptr(r.s), nil, nil)
	assert.Equal(t, int(abi.CodeNotFound), code)
	assert.Contains(t, msg, `callback "nope"`)

	var st map[string]any
	require.NoError(t, json.Unmarshal([]byte(statsJSON()), &st))
	assert.Equal(t, "auto", st["mode"])
	assert.EqualValues(t, 2, st["calls"], "the scale call and the trapping one ran their copies")
	assert.EqualValues(t, 2, st["pins"], "two instances, each pinned once")
	assert.EqualValues(t, 1, st["unpins"], "the trapping instance was discarded and unpinned")

	require.NoError(t, setDefault(0))
	t.Setenv("CALLBOX_CONFIG", "")
	assert.Empty(t, statsJSON())
	code, msg = xlaharness.CallDLPack(dlpackEntryAddr(), "scale", uintptr(r.s), nil, nil)
	assert.Equal(t, int(abi.CodeFailedPrecondition), code)
	assert.Contains(t, msg, "no callbox host")
}

//go:build cgo

// The C harness through the GPU entries and the CUDA XLA handler, on any
// machine: GPU calls failing cleanly, and both handlers answering alike.

package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/cuda"
)

// TestHarnessCUDA drives the GPU entries the library exports (serving the
// default host through package cuda) from C on this machine, whatever its
// GPU: host pointers pose as device memory, so every GPU call must fail
// with a clear error (no CUDA runtime here, or memory that is not the
// device's where there is one), write no output, and leave the process
// working. The GPU path itself runs on the fake device in cuda/ and
// in gpu_test.go, and on a real GPU in scripts/device-check-cuda.sh.
func TestHarnessCUDA(t *testing.T) {
	r := harnessGroups(t, false, nil, "cuda")

	// Installed with the default host: the stats answer, and the handler
	// answers XLA's handshake.
	assert.Regexp(t, `^\d+ \{"mode":"auto","calls":0,`, r.vals["cuda_stats"])
	r.xok(t, "cuda_metadata")
	assert.Equal(t, xlaAPIVersion+" traits=0", r.vals["cuda_metadata"])
	r.xfails(t, "cuda_on_cpu_api", abi.CodeFailedPrecondition, "has no Stream_Get", "use callbox_xla_ffi on CPU")

	// GPU calls on host memory fail cleanly: without a CUDA runtime with
	// the one load error, else because the memory is not the device's.
	_, rtErr := cuda.OpenRuntime()
	noCUDA := errors.Is(rtErr, cuda.ErrNoRuntime)
	call := r.xla["cuda_call"]
	assert.NotZero(t, call.code, call.text)
	assert.Contains(t, call.text, `callback "copy_f32" failed on the GPU path: argument 0`)
	dl := r.vals["cuda_dlpack"]
	assert.NotRegexp(t, `^0 `, dl)
	assert.Contains(t, dl, `callback "copy_f32" failed on the GPU path`)
	if noCUDA {
		assert.Contains(t, call.text, "CUDA runtime not available")
		assert.Contains(t, dl, "CUDA runtime not available")
	}
	r.xfails(t, "cuda_unknown", abi.CodeNotFound, `callback "nope"`, "unknown callback")
	assert.Regexp(t, `^3 callbox InvalidArgument: callback: NULL \[callbox error [0-9a-f]{8}-\d+\]$`, r.vals["cuda_dlpack_null"])
	// Its message's token gives the whole failure back, as the XLA
	// handlers' do.
	dlFailure, found := r.errs["cuda_dlpack_failure"]
	if assert.True(t, found, "callbox_xla_failure gave no failure for %q", dl) {
		assert.Equal(t, "copy_f32", dlFailure.callback)
		assert.Contains(t, dl, "callbox "+dlFailure.text, "the failure's text is the message's")
	}
	assert.Equal(t, "3", r.vals["cuda_dlpack_no_msg"], "a NULL input list with no message buffer")

	// The plain C API refuses CUDA tensors and names the GPU entry.
	r.fails(t, "cuda_plain_call", abi.InvalidArgument, "argument 0: device type 2 is CUDA memory", "callbox_cuda_call_dlpack")

	// Clearing the default host uninstalls the GPU path; setting it again
	// reinstalls it.
	r.ok(t, "cuda_clear_default", "cuda_set_default", "cuda_cpu_after")
	r.xfails(t, "cuda_no_host", abi.CodeFailedPrecondition, "callbox FailedPrecondition", "no callbox host")
	assert.Equal(t, "-1", r.vals["cuda_stats_no_host"])
	assert.Equal(t, "1", r.vals["cuda_stats_again"])
}

// TestHarnessBothHandlers sends the same failing frames to the CPU and
// the CUDA XLA handler from C: one decoder and one error mapper, so every
// failure before bytes move gets the same code and message from both.
func TestHarnessBothHandlers(t *testing.T) {
	r := harnessGroups(t, false, []string{"CALLBOX_CONFIG="}, "both")
	r.ok(t, "both_clear_default", "both_open_other", "both_set_other", "both_close_other", "both_restore")
	for _, c := range []struct {
		label string
		code  abi.Code
		part  string
	}{
		{"unknown", abi.CodeNotFound, `callbox UnknownCallback: callback "nope" (loaded: bump`},
		{"stale_id", abi.CodeNotFound, "its module, export or signature changed since the id was taken, or it is not loaded"},
		{"empty_name", abi.CodeInvalidArgument, "attribute callback: empty"},
		{"no_attrs", abi.CodeInvalidArgument, "missing attribute callback"},
		{"attr_scalar", abi.CodeInvalidArgument, "attribute callback has type 3, want a string"},
		{"attr_unknown", abi.CodeInvalidArgument, "unknown attribute colour"},
		{"empty_chain", abi.CodeInvalidArgument, "attribute chain: empty name"},
		{"dtype_f8", abi.CodeInvalidArgument, "argument 0: XLA dtype 19 is not one callbox supports"},
		{"rank_40", abi.CodeInvalidArgument, "argument 0: rank 40 exceeds the ABI maximum 32"},
		{"dim_negative", abi.CodeInvalidArgument, "argument 0: dimension 0 is negative (-2)"},
		{"arg_not_buffer", abi.CodeInvalidArgument, "argument 0: type 2 is not a buffer"},
		{"data_null", abi.CodeInvalidArgument, "argument 0: data is NULL"},
		{"small_frame", abi.CodeInvalidArgument, "call frame of 100 bytes, want at least 168"},
		{"no_host", abi.CodeFailedPrecondition, "callbox FailedPrecondition: callback \"copy_f32\": no callbox host"},
		{"closed_host", abi.CodeFailedPrecondition, "is closed"},
	} {
		cpu, gpu := r.xla["both_"+c.label+"_cpu"], r.xla["both_"+c.label+"_cuda"]
		r.xfails(t, "both_"+c.label+"_cpu", c.code, c.part)
		r.xfails(t, "both_"+c.label+"_cuda", c.code, c.part)
		// Alike but for the failure's token: each failure has its own.
		cpu.text = strings.TrimSuffix(cpu.text, tokenOf(t, cpu.text))
		gpu.text = strings.TrimSuffix(gpu.text, tokenOf(t, gpu.text))
		assert.Equal(t, cpu, gpu, "%s: the two handlers answer alike", c.label)
	}
}

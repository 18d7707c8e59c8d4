//go:build cgo

// The C harness through the C API: a host and its callbacks (the
// version, kinds, parameters, limits, opening, reloading, listing, logs,
// closing) and calls (every dtype and shape, refused arguments, chains,
// batches).

package main

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
)

func TestHarnessCAPI(t *testing.T) {
	r := harnessGroups(t, false, nil, "version", "open", "list", "dtypes", "shapes", "bad", "chains", "batch", "close")

	assert.Equal(t, "1.13.0 11300", r.vals["version"])

	// Opening.
	r.fails(t, "open_null_path", abi.InvalidArgument, "config_path: NULL")
	r.fails(t, "open_null_out", abi.InvalidArgument, "out: NULL")
	r.fails(t, "open_missing", abi.InvalidArgument, "/nonexistent/callbox.yaml: cannot open")
	r.fails(t, "open_bad_format", abi.InvalidArgument, `unsupported config format "ini"`)
	r.fails(t, "open_bad_yaml", abi.InvalidArgument, "bad YAML")
	r.fails(t, "open_bad_key", abi.InvalidArgument, "callbacks.s.colour: unknown key")
	r.fails(t, "open_bad_module", abi.InvalidArgument, `callback "s"`, "missing.wasm")
	r.ok(t, "open_json", "json_count", "json_close", "json_close_again")
	r.fails(t, "json_after_close", abi.FailedPrecondition, "is closed")
	r.fails(t, "unknown_handle", abi.InvalidArgument, "unknown host handle 987654")
	r.fails(t, "handle_zero", abi.InvalidArgument, "handle 0 is not a host")

	// Listing and types.
	assert.Equal(t, "27", r.vals["count"])
	r.fails(t, "count_null", abi.InvalidArgument, "out: NULL")
	info := strings.Split(r.vals["info_copy_f32"], "|")
	require.Len(t, info, 6)
	assert.True(t, abi.IsCallbackID(info[0]), info[0])
	assert.Equal(t, []string{"(x: f32[n]) -> f32[n]", "wazero", "sequential", "1", "1"}, info[1:])
	r.fails(t, "at_out_of_range", abi.InvalidArgument, "index: 27 is out of range")
	r.ok(t, "find_name", "find_id")
	stale := r.fails(t, "find_stale_id", abi.UnknownCallback, "its module, export or signature changed since the id was taken, or it is not loaded")
	assert.Equal(t, "cb1-"+strings.Repeat("0", 64), stale.callback)
	r.fails(t, "find_unknown", abi.UnknownCallback, `callback "nope" (loaded: bump, copy2,`)
	r.fails(t, "find_null", abi.InvalidArgument, "name_or_id: NULL")
	r.ok(t, "types_mat")
	assert.Equal(t, "2/32/1 2 [3,5]", r.vals["types_mat"])
	r.fails(t, "types_wrong_rank", abi.InvalidArgument, "argument 0 (x): expected f32[n], got f32[3,5]")
	r.fails(t, "types_wrong_count", abi.InvalidArgument, `num_outputs: 2, but callback "copy_mat" has 1 results`)
	r.fails(t, "types_unknown_dtype", abi.InvalidArgument, "input 0: unknown dtype {code 2, bits 8, lanes 1}")

	// Every dtype, rank 0, empty tensors, strides.
	for _, d := range kitDTypes {
		r.ok(t, "dtype_"+d)
		r.xok(t, "xla_dtype_"+d)
	}
	r.ok(t, "rank0", "empty", "empty_2d", "strides_rowmajor", "strides_unit_dim", "two_outputs")
	r.xok(t, "xla_rank0", "xla_empty")
	r.fails(t, "strides_transposed", abi.InvalidArgument, "argument 0: strides [1 2] are not row-major for shape [2 3]")

	// Bad arguments, each named.
	r.fails(t, "null_callback", abi.InvalidArgument, "callback: NULL")
	r.fails(t, "unknown_callback", abi.UnknownCallback, `callback "nope" (loaded: bump`)
	r.fails(t, "stale_id", abi.UnknownCallback, "its module, export or signature changed since the id was taken, or it is not loaded")
	r.fails(t, "null_inputs", abi.InvalidArgument, "inputs: NULL with a count of 1")
	r.fails(t, "null_outputs", abi.InvalidArgument, "outputs: NULL with a count of 1")
	r.fails(t, "too_many_inputs", abi.InvalidArgument, "got 2 inputs, signature (x: f32[n]) -> f32[n] takes 1")
	r.fails(t, "too_few_outputs", abi.InvalidArgument, "got 0 output buffers")
	bad := r.fails(t, "unknown_dtype", abi.InvalidArgument, "argument 0: unknown dtype {code 2, bits 8, lanes 1}")
	assert.Equal(t, "copy_f32", bad.callback, "a refused tensor's error names the callback the call named")
	r.fails(t, "lanes", abi.InvalidArgument, "argument 0: unknown dtype {code 2, bits 32, lanes 4}")
	r.fails(t, "rank_33", abi.InvalidArgument, "argument 0: rank 33 exceeds the ABI maximum 32")
	r.fails(t, "rank_negative", abi.InvalidArgument, "argument 0: rank -1 is negative")
	r.fails(t, "dim_negative", abi.InvalidArgument, "argument 0: dimension 0 is negative (-1)")
	r.fails(t, "shape_null", abi.InvalidArgument, "argument 0: shape is NULL with rank 1")
	r.fails(t, "data_null", abi.InvalidArgument, "argument 0: data is NULL for f32[4]")
	r.fails(t, "data_null_page", abi.InvalidArgument, "argument 0: data 0x10 (+ byte_offset 0) is in the lowest 64 KiB")
	r.fails(t, "out_null_page", abi.InvalidArgument, "output 0: data 0xff00 (+ byte_offset 0) is in the lowest 64 KiB")
	r.fails(t, "device_gpu", abi.InvalidArgument, "argument 0: device type 2 is CUDA memory: call GPU tensors with callbox_cuda_call_dlpack")
	r.fails(t, "device_managed_out", abi.InvalidArgument, "output 0: device type 13 is CUDA memory", "callbox_cuda_call_dlpack")
	r.fails(t, "device_opencl", abi.InvalidArgument, "argument 0: device type 4 is not host memory")
	r.fails(t, "output_shape", abi.InvalidArgument, "output 0: buffer is f32[5], result is f32[4]")
	r.fails(t, "output_dtype", abi.InvalidArgument, "output 0: buffer is f64[4], result is f32[4]")
	r.fails(t, "input_dtype", abi.InvalidArgument, "argument 0 (x): expected f32[n], got s32[4]")
	g := r.fails(t, "guest_error", abi.GuestError, `callback "fail" failed`)
	assert.Equal(t, "bad input", g.guest)
	assert.Equal(t, "fail", g.callback)
	for _, label := range []string{"count_max_call", "count_max_batch", "count_max_within", "count_max_tap",
		"count_max_chain_call", "count_max_chain_tap", "count_max_output_types"} {
		r.fails(t, label, abi.InvalidArgument, "inputs: count 18446744073709551615 exceeds the maximum 1024")
	}
	for _, label := range []string{"count_max_call_out", "count_max_cancelable"} {
		r.fails(t, label, abi.InvalidArgument, "outputs: count 18446744073709551615 exceeds the maximum 1024")
	}
	for _, label := range []string{"pointer_kernel", "pointer_noncanonical", "pointer_kernel_out"} {
		r.fails(t, label, abi.InvalidArgument, "where user space ends: a kernel, non-canonical or wild pointer")
	}
	to := r.fails(t, "timeout", abi.Timeout, `callback "spin" failed: timeout after 250ms`)
	assert.Equal(t, int(abi.CodeDeadlineExceeded), to.code)
	r.ok(t, "ok_after")

	// Chains: order, the first failure, reset; taps and the barrier.
	r.ok(t, "chain_call", "chain_tap_1", "chain_tap_fail", "chain_tap_3", "chain_reset", "chain_call_after_reset", "chain_barrier_ok")
	assert.Equal(t, "1", r.vals["chain_count_1"])
	first := r.fails(t, "chain_barrier", abi.GuestError, `callback "fail" (chain "c1" #3) failed`)
	assert.Equal(t, "c1", first.chain)
	assert.EqualValues(t, 3, first.seq)
	skipped := r.fails(t, "chain_after_failure", abi.GuestError, `call #5 (bump) not run: chain failed at #3`)
	assert.Equal(t, "bump", skipped.callback)
	assert.EqualValues(t, 5, skipped.seq)
	assert.Equal(t, "fail#3 guest returned INVALID_ARGUMENT", skipped.failed, "the refused step names the step that failed")
	assert.Equal(t, "bad input", skipped.guest, "with the failed step's guest message")
	assert.Equal(t, "3", r.vals["chain_count_2"], "the tap after the failure must not have run")

	// Batched calls (callbox_call_batch, since 1.3).
	r.ok(t, "batch_ok", "batch_seq_ok", "batch_empty")
	assert.Equal(t, "1 1", r.vals["batch_results"], "every element's result in its slice, parallel and sequential")
	for _, label := range []string{"batch_fail", "batch_seq_fail", "batch_chain_fail"} {
		r.fails(t, label, abi.GuestError, "(batch element 5 of 8)", "bad input")
		assert.Equal(t, "5 of 8 untouched 1", r.vals[label], label)
	}
	assert.Equal(t, "bc", r.errs["batch_chain_fail"].chain)
	r.fails(t, "batch_refused", abi.InvalidArgument, "output 0: buffer is f32[7,4], result is f32[8,4]")
	assert.Equal(t, "0", r.vals["batch_refused"], "a refused batch names no element")
	assert.Equal(t, "0", r.vals["plain_batch_size"], "a call that is no batch has batch_size 0")
	r.fails(t, "batch_bad_cancel", abi.InvalidArgument, "unknown cancel token")
	r.fails(t, "chain_null", abi.InvalidArgument, "chain: NULL")
	r.fails(t, "chain_empty", abi.InvalidArgument, "chain: empty name")
	r.fails(t, "chain_output_shape", abi.InvalidArgument, "output 0: buffer is s32[3], result is s32[]")
	r.ok(t, "tap_copies_input", "tap_copies_input_barrier") // the tap read its own copy of the freed buffer
	r.ok(t, "tap_ok", "tap_fail", "barrier_again")
	r.fails(t, "barrier", abi.GuestError, `callback "fail" failed`)
	r.fails(t, "tap_unknown", abi.UnknownCallback, "unknown callback")
	r.xok(t, "xla_chain_token")
	r.xfails(t, "xla_chain_fail", abi.CodeInvalidArgument, `callbox GuestError: callback "fail" (chain "xc" #2)`)
	r.xfails(t, "xla_chain_after_failure", abi.CodeInvalidArgument, `chain "xc": call #3 (bump) not run`)

	// Closing.
	r.ok(t, "close", "close_again")
	assert.Equal(t, "1", r.vals["cuda_stats_before_close"])
	assert.Equal(t, "-1", r.vals["cuda_stats_after_close"], "closing the default host uninstalls the GPU path")
	r.fails(t, "call_after_close", abi.FailedPrecondition, "is closed")
	r.xfails(t, "xla_after_close", abi.CodeFailedPrecondition, "is closed")
}

// TestHarnessParams: callbox_callback_params gives a callback's parameters
// as its signature declares them (names, dtypes as XLA numbers them,
// ranks), counted when out is NULL, the count whole when capacity is
// short; refusals name their argument.
func TestHarnessParams(t *testing.T) {
	r := harnessGroups(t, false, nil, "params")
	r.ok(t, "params_count", "params_copy2", "params_short", "params_mat")
	assert.Equal(t, "2", r.vals["params_count"])
	assert.Equal(t, fmt.Sprintf("2 x %d 1 y %d 1", int(abi.S16), int(abi.F32)), r.vals["params_copy2"])
	assert.Equal(t, "2 x", r.vals["params_short"])
	assert.Equal(t, fmt.Sprintf("1 x %d 2", int(abi.F32)), r.vals["params_mat"])
	r.fails(t, "params_unknown", abi.UnknownCallback, "no_such")
	r.fails(t, "params_null_count", abi.InvalidArgument, "count: NULL")
	r.fails(t, "params_null_out", abi.InvalidArgument, "out: NULL with a capacity of 4")
	// callbox_callback_refusal: a binding's refusal in the host's words
	// (Callback.Refuse), the callback named.
	r.fails(t, "refusal", abi.InvalidArgument, `callback "copy2" refused the call before running it: argument 1 (y): a cast this binding will not make`)
	assert.Equal(t, "copy2", r.errs["refusal"].callback)
	r.fails(t, "refusal_unknown", abi.UnknownCallback, "no_such")
	r.fails(t, "refusal_null", abi.InvalidArgument, "reason: NULL")
}

// TestHarnessKinds: callbox_kinds is abi's kind table, every kind with
// its code and name, for binding layers to read instead of keeping one.
func TestHarnessKinds(t *testing.T) {
	r := harnessGroups(t, false, nil, "kinds")
	assert.Equal(t, fmt.Sprint(len(abi.Kinds())), r.vals["kinds"])
	for _, k := range abi.Kinds() {
		assert.Equal(t, fmt.Sprintf("%d %s", k.Code(abi.StatusOK), k.Ident()), r.vals[fmt.Sprintf("kind_%d", int(k))], k.Ident())
	}
	assert.Empty(t, r.failed)
}

// TestHarnessLimits reads callbacks' limits through
// callbox_callback_limits: as configured (timeouts) or defaulted, the
// caller's stack 0 on wazero and, for wasmtime, 0 where the library
// switches stacks and max_stack plus 1 MiB elsewhere; a later version's
// bigger struct filled only as far as 1.7's, a 1.5 or 1.6 caller's as far
// as its own; refusals.
func TestHarnessLimits(t *testing.T) {
	r := harnessGroups(t, false, nil, "limits")
	r.ok(t, "limits_copy_f32", "limits_spin_long", "limits_spin_wasmtime", "limits_bigger", "limits_15", "limits_16")
	d := config.DefaultCallback().Limits
	row := func(timeout time.Duration, callerStack uint64, maxCPU time.Duration) string {
		return fmt.Sprintf("72 %d %d %d %d %d %d %d %d", timeout.Nanoseconds(), d.MaxMemory, d.Fuel, d.MaxStack, d.MaxOutput, callerStack, d.MaxWait.Nanoseconds(), maxCPU.Nanoseconds())
	}
	assert.Equal(t, row(250*time.Millisecond, 0, 0), r.vals["limits_copy_f32"])
	assert.Equal(t, row(5*time.Second, 0, 4*time.Second), r.vals["limits_spin_long"])
	if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" {
		assert.Equal(t, row(5*time.Second, 0, 0), r.vals["limits_spin_wasmtime"])
	} else {
		// The engine's own figure (max_stack plus wasmtime's margin), not
		// restated here: more than the margin alone.
		var callerStack uint64
		_, err := fmt.Sscanf(r.vals["limits_spin_wasmtime"], "72 %d %d %d %d %d %d", new(uint64), new(uint64), new(uint64), new(uint64), new(uint64), &callerStack)
		require.NoError(t, err)
		assert.Greater(t, callerStack, uint64(1<<20))
	}
	assert.Equal(t, "72 1", r.vals["limits_bigger"], "1.7's size reported, the later field untouched")
	assert.Equal(t, "64 10000000000 1", r.vals["limits_16"], "a 1.6 struct: filled to its end (max_wait_ns written), max_cpu_ns past it untouched")
	assert.Equal(t, "56 1 1", r.vals["limits_15"], "a 1.5 struct: filled to its end (max_output written), max_wait_ns past it untouched")
	r.fails(t, "limits_small", abi.InvalidArgument, "struct_size is 8")
	r.fails(t, "limits_null", abi.InvalidArgument, "out")
	r.fails(t, "limits_unknown", abi.UnknownCallback, "no_such")
}

// TestHarnessReload drives callbox_reload_config from C on a host of its
// own: after a reload the changed callback has its new timeout, the added
// one runs, the removed one is unknown, the unchanged one ran before and
// after, and an info read before the reload is still readable; a
// configuration that fails to load (a missing module, a bad format, a
// missing file) is refused naming what failed, and the old one keeps
// serving with its limits; a closed or unknown host refuses.
func TestHarnessReload(t *testing.T) {
	r := harnessGroups(t, false, nil, "reload")
	r.ok(t, "reload_open", "reload_info_before", "reload_call_before", "reload", "reload_count", "reload_limits",
		"reload_call_keep", "reload_call_added", "reload_limits_kept", "reload_call_after_bad", "reload_close")
	assert.Equal(t, "3 300000000 gone", r.vals["reload_after"], "3 callbacks, change's new timeout, the old info readable")
	assert.Equal(t, "4", r.vals["reload_call_added"])
	r.fails(t, "reload_call_gone", abi.UnknownCallback, "gone")
	r.fails(t, "reload_bad", abi.InvalidArgument, "missing.wasm")
	r.fails(t, "reload_bad_format", abi.InvalidArgument, "ini")
	r.fails(t, "reload_null_text", abi.InvalidArgument, "text: NULL")
	r.fails(t, "reload_missing_file", abi.InvalidArgument, "/nonexistent/callbox.yaml")
	assert.Equal(t, "300000000", r.vals["reload_limits_kept"], "a refused reload changed nothing")
	r.fails(t, "reload_closed", abi.FailedPrecondition, "closed")
	r.fails(t, "reload_bad_host", abi.InvalidArgument, "987654")
}

// TestHarnessLogCallback routes guest log lines to a C callback at the
// level it asks for, and back to stderr when it is cleared.
func TestHarnessLogCallback(t *testing.T) {
	r := harnessGroups(t, false, nil, "log")
	r.ok(t, "log_set", "log_call", "log_debug_only", "log_call_2", "log_clear", "log_call_3")
	assert.Equal(t, "1 user|0|say|hello from kit", r.vals["log_seen"])
	assert.Equal(t, "1", r.vals["log_lines_after_error_level"], "an info line is below the callback's error level")
	assert.Equal(t, "1", r.vals["log_lines_after_clear"])
}

//go:build cgo

// The C harness through the XLA FFI handler on CPU: frames built byte by
// byte, the default host opened lazily, the host attribute, and failures
// found again by their tokens.

package main

import (
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/seed4b3e0ccb/callbox/abi"
)

func TestHarnessXLA(t *testing.T) {
	r := harnessGroups(t, false, nil, "xla")

	r.xok(t, "metadata", "stage_0", "stage_1", "stage_2", "by_name", "by_id")
	// Malformed frames and bad buffers: TestHarnessBothHandlers, through
	// both handlers.
	assert.Equal(t, xlaAPIVersion+" traits=0", r.vals["metadata"])
	r.xfails(t, "too_many_args", abi.CodeInvalidArgument, `callback "copy_f32" refused the call before running it: got 2 inputs`)
	r.xfails(t, "no_rets", abi.CodeInvalidArgument, "got 0 output buffers")
	r.xfails(t, "ret_shape", abi.CodeInvalidArgument, "output 0: buffer is f32[5], result is f32[4]")
	r.xfails(t, "guest_error", abi.CodeInvalidArgument, `callbox GuestError: callback "fail" failed: guest returned INVALID_ARGUMENT: bad input`)
	r.xfails(t, "timeout", abi.CodeDeadlineExceeded, `callbox Timeout: callback "spin" failed: timeout after 250ms`)
	r.xok(t, "batched")
	r.xfails(t, "batched_fail", abi.CodeInvalidArgument, `callbox GuestError: callback "nonneg_par" (batch element 1 of 2) failed: guest returned INVALID_ARGUMENT: bad input`)
	r.xfails(t, "batched_bad", abi.CodeInvalidArgument, `attribute batched is "yes", want "true" or "false"`)
	r.xfails(t, "batched_false", abi.CodeInvalidArgument, "argument 0 (x): expected f32[n], got f32[2,2]")
}

// TestHarnessDefaultHost opens the XLA handler's default host lazily from
// CALLBOX_CONFIG, and reports a clear error without it.
func TestHarnessDefaultHost(t *testing.T) {
	bin := buildHarness(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, false)
	r := runHarness(t, bin, "-", dir, []string{"CALLBOX_CONFIG=" + cfg}, "lazy")
	r.xok(t, "lazy")
	assert.Equal(t, "3", r.vals["lazy"])
	r.ok(t, "default_host", "default_host_info")
	assert.Equal(t, "bump", r.vals["default_host_info"], "the first callback by name (it used to be a nil dereference)")
	assert.Equal(t, "-1", r.vals["lazy_cuda_before"], "no GPU path before the default host opens")
	assert.Equal(t, "1", r.vals["lazy_cuda_after"], "the lazily opened default host serves the GPU entries")

	// A bad copy mode fails the open, naming the variable.
	r = runHarness(t, bin, "-", dir, []string{"CALLBOX_CONFIG=" + cfg, "CALLBOX_CUDA_COPY=bogus"}, "lazy")
	r.xfails(t, "lazy", abi.CodeInvalidArgument, `CALLBOX_CUDA_COPY="bogus": want auto, staged or pageable`)

	r = runHarness(t, bin, "-", dir, []string{"CALLBOX_CONFIG="}, "lazy")
	r.xfails(t, "lazy", abi.CodeFailedPrecondition, "callbox FailedPrecondition", "no callbox host: set CALLBOX_CONFIG")
	r.fails(t, "default_host", abi.FailedPrecondition, "no callbox host")

	r = runHarness(t, bin, "-", dir, []string{"CALLBOX_CONFIG=" + filepath.Join(dir, "missing.yaml")}, "lazy")
	r.xfails(t, "lazy", abi.CodeInvalidArgument, "CALLBOX_CONFIG: ", "missing.yaml")
}

// TestHarnessXLAHost: the XLA handler's attribute host runs a call on the
// host it names (callbox_xla_host_attr) instead of the default host, and
// refuses, naming the attribute and the callback, a malformed value, an
// unknown handle, another load's tag and a closed host; callbox_xla_failure
// finds a failure by its token in any surrounding text, as often as asked,
// and no failure for text without one of this library's tokens.
func TestHarnessXLAHost(t *testing.T) {
	r := harnessGroups(t, false, nil, "xlahost")
	r.ok(t, "xh_open", "xh_attr", "xh_attr_self", "xh_close", "xh_bump_capi")
	assert.Regexp(t, `^\d+@[0-9a-f]{8}$`, r.vals["xh_attr"])
	assert.Regexp(t, `^\d+@[0-9a-f]{8}$`, r.vals["xh_attr_self"])
	assert.NotEqual(t, r.vals["xh_attr"], r.vals["xh_attr_self"])
	r.fails(t, "xh_attr_small", abi.InvalidArgument, "cap: 4 bytes, the value needs", "CALLBOX_XLA_HOST_ATTR_SIZE is 64")
	r.fails(t, "xh_attr_null", abi.InvalidArgument, "buf: NULL")
	r.fails(t, "xh_attr_unknown", abi.InvalidArgument, "unknown host handle 987654")
	r.fails(t, "xh_attr_closed", abi.FailedPrecondition, "host is closed")

	// Three calls on the other host, one on the default host named, one
	// on the default host, then the C API on the other host: each host
	// counts its own.
	r.xok(t, "xh_bump_0", "xh_bump_1", "xh_bump_2", "xh_bump_3", "xh_bump_4")
	assert.Equal(t, "1 2 3 1 2 4", r.vals["xh_counts"])

	for _, c := range []struct {
		label string
		kind  abi.Kind
		part  string
	}{
		{"xh_garbage", abi.InvalidArgument, `attribute host: "garbage" is not a host (want HANDLE@TAG`},
		{"xh_zero", abi.InvalidArgument, `attribute host: "0@abc" is not a host`},
		{"xh_unknown", abi.InvalidArgument, "attribute host: unknown host handle 987654"},
		{"xh_other_tag", abi.FailedPrecondition, "names a host of another process"},
		{"xh_closed", abi.FailedPrecondition, `callback "bump": the host that attribute host names (handle `},
	} {
		r.xfails(t, c.label, c.kind.Code(abi.StatusOK), "callbox "+c.kind.Ident()+": ", c.part)
		failure := r.fails(t, c.label+"_failure", c.kind, c.part)
		assert.Equal(t, "bump", failure.callback, c.label)
		assert.Equal(t, r.xla[c.label].text, "callbox "+failure.text+" "+tokenOf(t, r.xla[c.label].text), c.label)
	}
	assert.Equal(t, "-1", r.vals["xh_closed_count"], "a refused call writes nothing")

	closed := r.errs["xh_closed_failure"]
	for _, label := range []string{"xh_failure_around", "xh_failure_again"} {
		assert.Equal(t, closed, r.errs[label], label)
	}
	for _, label := range []string{"xh_failure_plain", "xh_failure_foreign", "xh_failure_unterminated"} {
		assert.Equal(t, "none", r.vals[label], label)
	}
	r.fails(t, "xh_failure_null_message", abi.InvalidArgument, "xla_message: NULL")
	r.fails(t, "xh_failure_null_out", abi.InvalidArgument, "failure: NULL")
}

// tokenOf is the failure token that ends an XLA message.
func tokenOf(t *testing.T, msg string) string {
	t.Helper()
	m := regexp.MustCompile(`\[callbox error [0-9a-f]{8}-\d+\]$`).FindString(msg)
	assert.NotEmpty(t, m, "no token at the end of %q", msg)
	return m
}

//go:build cgo

// The C harness and calls that return before they are over:
// callbox_call_async and the request entries.

package main

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// TestHarnessAsync drives callbox_call_async from C threads: 400 calls on
// both engines, each reported once with its own right output although the
// caller freed its tensor structs and shapes when the call returned;
// refusals that never call done; a guest error and a cancel through done,
// with no output byte written; a host closed while a call is in flight
// (close waits for it); a done function that closes its own host.
func TestHarnessAsync(t *testing.T) {
	r := harnessGroups(t, false, nil, "async")
	r.ok(t, "async_many_err", "async_wrong_count_start", "async_fail_start", "async_cancel_new", "async_cancel_start",
		"async_cancel_fire", "async_cancel_free", "async_open_2", "async_close_start", "async_close", "async_open_3",
		"async_done_close_start", "async_close_in_done")
	assert.Equal(t, "400 calls 0 wrong", r.vals["async_many"])
	assert.NotContains(t, r.errs, "async_many_start")
	r.fails(t, "async_unknown_callback", abi.UnknownCallback, "no_such")
	r.fails(t, "async_bad_host", abi.InvalidArgument, "987654")
	r.fails(t, "async_bad_token", abi.InvalidArgument, "unknown cancel token")
	r.fails(t, "async_null_done", abi.InvalidArgument, "done")
	r.fails(t, "async_bad_tensor", abi.InvalidArgument, "argument 0: rank -1 is negative")
	r.fails(t, "async_wrong_count", abi.InvalidArgument, "")
	assert.Equal(t, "1", r.vals["async_refused_done_calls"], "done was called only for the call that started")
	r.fails(t, "async_fail", abi.GuestError, `callback "fail"`)
	r.fails(t, "async_cancel", abi.Canceled, `callback "spin_long"`)
	ms, err := strconv.Atoi(r.vals["async_cancel_ms"])
	require.NoError(t, err)
	assert.Less(t, ms, 4000, "canceled 100 ms in, not at its 5 s timeout")
	r.fails(t, "async_in_flight_at_close", abi.Timeout, `callback "spin"`)
	ms, err = strconv.Atoi(r.vals["async_close_ms"])
	require.NoError(t, err)
	assert.GreaterOrEqual(t, ms, 200, "close waited for the call in flight (spin's 250 ms timeout)")
	r.fails(t, "async_after_close", abi.FailedPrecondition, "closed")
	assert.Equal(t, "1 0", r.vals["async_done_close_calls"])
	r.fails(t, "async_after_done_close", abi.FailedPrecondition, "closed")
}

// TestHarnessRequest drives the 1.7 request entries from C: plain,
// chained, batched and asynchronous requests run; a budget that runs out
// fails as TIMEOUT with no output written; the host's own bounds refuse a
// budget past an hour (both as given and at UINT64_MAX) and a budget on a
// batch, with the Go API's messages; the sized struct refuses a short
// size, a non-zero field past what this library knows, the reserved field
// and unknown flags, and accepts a bigger caller's zero tail.
func TestHarnessRequest(t *testing.T) {
	r := harnessGroups(t, false, nil, "request")
	r.ok(t, "request_ok", "request_chain", "request_batch", "request_bigger_zero", "request_async_start", "request_async")
	assert.Equal(t, "1 4", r.vals["request_ok"])
	assert.Equal(t, "1 4", r.vals["request_chain"])
	assert.Equal(t, "1", r.vals["request_batch"])
	assert.Equal(t, "1 calls 0 wrong", r.vals["request_async"])
	r.fails(t, "request_budget", abi.Timeout, "the caller's deadline passed")
	var ms int
	var y0, y3 float64
	_, err := fmt.Sscanf(r.vals["request_budget"], "%d %g %g", &ms, &y0, &y3)
	require.NoError(t, err)
	assert.Less(t, ms, 4000, "stopped 20 ms in, not at its 5 s timeout")
	assert.Equal(t, []float64{9, 9}, []float64{y0, y3}, "no output byte written")
	r.fails(t, "request_budget_huge", abi.InvalidArgument, "budget 2h0m0s: give a budget from 1ns to 1h0m0s, or none")
	r.fails(t, "request_budget_max", abi.InvalidArgument, "give a budget from 1ns to 1h0m0s, or none")
	r.fails(t, "request_batch_budget", abi.InvalidArgument, "a batched call takes no budget")
	r.fails(t, "request_small", abi.InvalidArgument, "size is 8: set it to sizeof(callbox_request)")
	r.fails(t, "request_bigger_set", abi.InvalidArgument, "does not know; upgrade libcallbox")
	r.fails(t, "request_reserved", abi.InvalidArgument, "req.reserved")
	r.fails(t, "request_flags", abi.InvalidArgument, "unknown flags")
	r.fails(t, "request_null", abi.InvalidArgument, "req: NULL")
	r.fails(t, "request_async_null_done", abi.InvalidArgument, "done: NULL")
}

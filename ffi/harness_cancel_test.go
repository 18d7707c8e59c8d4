//go:build cgo

// The C harness stopping calls: callbox_call_within's budget and cancel
// tokens.

package main

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// TestHarnessWithin drives callbox_call_within: a call within its budget
// runs; a 5 s spinner on either engine is given up 20 ms in, with no
// error, no output byte written, and the host serving the next call; the
// callback's own shorter timeout and a fired cancel token are errors as
// for callbox_call_cancelable, not budgets given up; bad arguments are
// refused naming them.
func TestHarnessWithin(t *testing.T) {
	r := harnessGroups(t, false, nil, "within")
	r.ok(t, "within_quick", "within_gave_up_spin_long", "within_gave_up_spin_wasmtime", "within_after",
		"within_cancel_new", "within_cancel_fire", "within_cancel_free")
	assert.Equal(t, "0 1 4", r.vals["within_quick"])
	for _, label := range []string{"within_gave_up_spin_long", "within_gave_up_spin_wasmtime"} {
		var expired, ms int
		_, err := fmt.Sscanf(r.vals[label], "%d %d", &expired, &ms)
		require.NoError(t, err, label)
		assert.Equal(t, 1, expired, label)
		assert.Less(t, ms, 4000, "%s: given up 20 ms in, not at its 5 s timeout", label)
	}
	assert.Equal(t, "0 4", r.vals["within_after"])
	r.fails(t, "within_timeout", abi.Timeout, "timeout after 250ms")
	assert.Equal(t, "0", r.vals["within_timeout"])
	r.fails(t, "within_cancel", abi.Canceled, `callback "spin_long"`)
	var expired, ms int
	_, err := fmt.Sscanf(r.vals["within_cancel"], "%d %d", &expired, &ms)
	require.NoError(t, err)
	assert.Equal(t, 0, expired, "a fired token is not a budget given up")
	assert.Less(t, ms, 2000, "canceled 100 ms in, not at its 3 s budget")
	r.fails(t, "within_zero_budget", abi.InvalidArgument, "budget_ns: 0")
	r.fails(t, "within_null_expired", abi.InvalidArgument, "expired: NULL")
	r.fails(t, "within_bad_token", abi.InvalidArgument, "unknown cancel token")
	r.fails(t, "within_unknown", abi.UnknownCallback, "no_such")
}

// TestHarnessCancel cancels a 5 s spinning call 100 ms in, three ways: a
// token fired from another thread, a signal bound to the token (the
// program's own handler still runs), and on a chain. Each call fails with
// Canceled long before its timeout and writes no output.
func TestHarnessCancel(t *testing.T) {
	r := harnessGroups(t, false, nil, "cancel")
	r.ok(t, "cancel_new", "cancel_fire", "cancel_on_signal", "cancel_later_call", "cancel_free")
	for round := 0; round < 3; round++ {
		label := fmt.Sprintf("cancel_call_%d", round)
		e := r.fails(t, label, abi.Canceled, `callback "spin_long"`)
		ms, err := strconv.Atoi(r.vals[fmt.Sprintf("cancel_ms_%d", round)])
		require.NoError(t, err)
		assert.Less(t, ms, 4000, "%s: canceled 100 ms in, not at its 5 s timeout", label)
		if round == 2 {
			assert.Equal(t, "canceled_chain", e.chain)
		}
	}
	assert.Equal(t, "1", r.vals["cancel_usr2_seen"], "the program's own handler ran")
	r.fails(t, "cancel_freed", abi.InvalidArgument, "unknown cancel token")
	r.fails(t, "cancel_bad_signal", abi.InvalidArgument, "signum: 11")
}

package host_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
)

// TestWaitForAnInstanceIsBounded: a callback with a 20 ms timeout and one
// instance, held by a Session. A call with no deadline of its own waits
// max_wait for the instance and fails as Overloaded (its own kind, not a
// Timeout: no guest ran away), its Stats saying how long it waited; a
// caller's deadline shorter than max_wait is still a Timeout; a session
// asked for meanwhile is Overloaded too; once the session is released the
// callback serves again.
func TestWaitForAnInstanceIsBounded(t *testing.T) {
	const maxWait = 150 * time.Millisecond
	ctx := context.Background()
	h := newHost(t, "wazero", func(cb *config.Callback) {
		cb.MaxInstances = 1
		cb.Limits.Timeout = 20 * time.Millisecond
		cb.Limits.MaxWait = maxWait
	})
	sess, err := h.NewSession(ctx, "scale")
	require.NoError(t, err)

	x, two := abi.From([]float32{1, 2}), abi.Scalar[float32](2)
	_, st, err := invokeStats(ctx, h, "scale", x, two)
	require.ErrorIs(t, err, host.Overloaded)
	assert.False(t, errors.Is(err, host.Timeout), "an overloaded host is not a runaway guest")
	assert.Equal(t, abi.CodeResourceExhausted, abi.KindOf(err).Code(0))
	assert.Contains(t, err.Error(), "max_wait 150ms")
	assert.GreaterOrEqual(t, st.Wait, maxWait, "the wait is reported")

	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	_, err = h.Invoke(short, "scale", x, two)
	cancel()
	require.ErrorIs(t, err, host.Timeout, "the caller's own deadline, earlier than max_wait, stays a Timeout")
	require.ErrorIs(t, err, context.DeadlineExceeded)

	_, err = h.NewSession(ctx, "scale")
	require.ErrorIs(t, err, host.Overloaded)

	sess.Release(ctx)
	out, err := h.Invoke(ctx, "scale", x, two)
	require.NoError(t, err)
	assert.Equal(t, []float32{2, 4}, abi.MustView[float32](out[0]))
}

// TestMaxWaitZeroWaitsForTheCaller: max_wait 0 (a config built in code)
// bounds nothing: the call waits until its context ends.
func TestMaxWaitZeroWaitsForTheCaller(t *testing.T) {
	ctx := context.Background()
	h := newHost(t, "wazero", func(cb *config.Callback) {
		cb.MaxInstances = 1
		cb.Limits.MaxWait = 0
	})
	sess, err := h.NewSession(ctx, "scale")
	require.NoError(t, err)
	defer sess.Release(ctx)
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = h.Invoke(short, "scale", abi.From([]float32{1}), abi.Scalar[float32](2))
	require.ErrorIs(t, err, host.Timeout)
}

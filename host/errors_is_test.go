package host_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
)

// assertIsItsKind: err's kind (abi.KindOf) answers errors.Is, wrapped or
// not, and no other kind does.
func assertIsItsKind(t *testing.T, err error, want abi.Kind) {
	t.Helper()
	require.Equal(t, want, abi.KindOf(err), "%v", err)
	for _, e := range []error{err, fmt.Errorf("wrapped: %w", err)} {
		for _, k := range abi.Kinds() {
			assert.Equal(t, k == want, errors.Is(e, k), "errors.Is(%q, %v)", e, k)
		}
	}
}

// TestEveryErrorWithAKindAnswersErrorsIs: the host's sentinels, a real
// unknown name, a closed host, and call and load failures of every kind.
func TestEveryErrorWithAKindAnswersErrorsIs(t *testing.T) {
	assertIsItsKind(t, host.ErrUnknownCallback, host.UnknownCallback)
	assertIsItsKind(t, host.ErrClosed, host.FailedPrecondition)

	ctx := context.Background()
	h := newHost(t, "wazero", nil)
	_, err := h.Invoke(ctx, "no_such_callback")
	assertIsItsKind(t, err, host.UnknownCallback)
	assert.ErrorIs(t, err, host.ErrUnknownCallback)
	_, err = h.Lookup("cb1-0000")
	assertIsItsKind(t, err, host.UnknownCallback)
	require.NoError(t, h.Close(ctx))
	_, err = h.Invoke(ctx, "scale")
	assertIsItsKind(t, err, host.FailedPrecondition)
	assert.ErrorIs(t, err, host.ErrClosed)

	for _, k := range abi.Kinds() {
		assertIsItsKind(t, host.NewCallbackErrorForTest(k), k)
		assertIsItsKind(t, host.NewLoadErrorForTest(k), k)
	}
}

// TestBarrierEndedByItsContextHasAKind: a barrier whose context ends while
// a tap or a chain step still runs returns Canceled (Timeout for a
// deadline), wrapping the context's error, the same through every door;
// the next barrier reports what it waited for.
func TestBarrierEndedByItsContextHasAKind(t *testing.T) {
	ctx := context.Background()
	h := newHost(t, "wazero", func(cb *config.Callback) { cb.Limits.Timeout = 500 * time.Millisecond })
	x := abi.From([]float32{1})
	h.Tap(ctx, "spin", x)
	ch := h.NewChain("c")
	ch.Tap(ctx, "spin", x)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	for _, err := range []error{h.Barrier(cctx), ch.Barrier(cctx)} {
		assertIsItsKind(t, err, host.Canceled)
		assert.ErrorIs(t, err, context.Canceled)
	}
	dctx, stop := context.WithDeadline(ctx, time.Now())
	defer stop()
	err := h.Barrier(dctx)
	assertIsItsKind(t, err, host.Timeout)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, h.Barrier(ctx), host.Timeout, "the tap's own timeout, at the next barrier")
	require.ErrorIs(t, ch.Barrier(ctx), host.Timeout)
}

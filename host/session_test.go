package host_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
)

func TestSessionZeroCopy(t *testing.T) {
	forEnginesAndProcess(t, func(t *testing.T, engine string) {
		h := newHost(t, engine, func(cb *config.Callback) { cb.MaxInstances = 1 })
		ctx := context.Background()
		s, err := h.NewSession(ctx, "scale")
		require.NoError(t, err)
		defer s.Release(ctx) // before the host's Close (t.Cleanup), which waits for it
		x, err := s.Alloc(ctx, abi.F32, 4)
		require.NoError(t, err)
		copy(abi.MustView[float32](x), []float32{1, 2, 3, 4})

		outs, st, err := s.Invoke(ctx, x, abi.Scalar[float32](3))
		require.NoError(t, err)
		assert.Equal(t, []float32{3, 6, 9, 12}, abi.MustView[float32](outs[0]))
		assert.Equal(t, uint64(4), st.BytesIn, "only the host-side factor is copied")
		assert.Equal(t, uint64(0), st.BytesOut, "outputs are views")

		// A previous output as the next input: correct, at the cost of a copy.
		outs, _, err = s.Invoke(ctx, outs[0], abi.Scalar[float32](0.5))
		require.NoError(t, err)
		assert.Equal(t, []float32{1.5, 3, 4.5, 6}, abi.MustView[float32](outs[0]))

		// The session holds the only instance; Release returns it.
		s.Release(ctx)
		_, _, err = s.Invoke(ctx, x, abi.Scalar[float32](1))
		assert.ErrorIs(t, err, host.ErrSessionClosed)
		_, err = h.Invoke(ctx, "scale", abi.From([]float32{1}), abi.Scalar[float32](1))
		require.NoError(t, err)
	})
}

func TestSessionBrokenByTrap(t *testing.T) {
	forEnginesAndProcess(t, func(t *testing.T, engine string) {
		h := newHost(t, engine, nil)
		ctx := context.Background()
		s, err := h.NewSession(ctx, "half_then_trap")
		require.NoError(t, err)
		defer s.Release(ctx) // before the host's Close (t.Cleanup), which waits for it
		x, err := s.Alloc(ctx, abi.F32, 2)
		require.NoError(t, err)
		_, _, err = s.Invoke(ctx, x)
		require.ErrorIs(t, err, host.Unreachable)
		_, _, err = s.Invoke(ctx, x)
		require.ErrorIs(t, err, host.ErrSessionClosed)
		s.Release(ctx)
	})
}

// Blocks the guest's allocator returns back to back (a bump allocator's
// 64-byte blocks) touch without overlapping: the host takes both, and each
// keeps its own values through a call.
func TestSessionAdjacentBlocks(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		h := newHost(t, engine, func(cb *config.Callback) { cb.MaxInstances = 1 })
		ctx := context.Background()
		s, err := h.NewSession(ctx, "scale")
		require.NoError(t, err)
		defer s.Release(ctx)
		a, err := s.Alloc(ctx, abi.F32, 16) // 64 bytes: the allocator's alignment
		require.NoError(t, err)
		b, err := s.Alloc(ctx, abi.F32, 16)
		require.NoError(t, err, "a block that starts where the last one ends does not overlap it")
		for i := range 16 {
			abi.MustView[float32](a)[i], abi.MustView[float32](b)[i] = float32(i), float32(100+i)
		}
		outs, _, err := s.Invoke(ctx, a, abi.Scalar[float32](2))
		require.NoError(t, err)
		assert.Equal(t, float32(30), abi.MustView[float32](outs[0])[15])
		outs, _, err = s.Invoke(ctx, b, abi.Scalar[float32](2))
		require.NoError(t, err)
		assert.Equal(t, float32(200), abi.MustView[float32](outs[0])[0])
		// Released whole, the instance goes back to the pool, not away.
		before, _ := h.PoolStats("scale")
		s.Release(ctx)
		after, _ := h.PoolStats("scale")
		assert.Equal(t, before.Discarded, after.Discarded, "a released session's instance is kept")
		assert.Equal(t, 1, after.Idle)
	})
}

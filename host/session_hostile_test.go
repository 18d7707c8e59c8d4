package host_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/host"
)

// TestSessionHostile runs hostile cases through the zero-copy Session API,
// whose inputs live in guest memory and whose outputs are views of it: the
// failure has the case's kind, the session is broken, Release discards the
// instance, and nothing outlives the host.
func TestSessionHostile(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		for _, name := range []string{"spin", "overrun_1", "redirect", "error_ptr_oob", "unreachable", "grow_pages", "alloc_oob", "alloc_spin"} {
			t.Run(name, func(t *testing.T) {
				defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
				hc := caseNamed(t, name)
				ctx := context.Background()
				h, err := host.New(ctx, nil, host.WithLogger(slog.New(slog.DiscardHandler)))
				require.NoError(t, err)
				defer h.Close(ctx)
				cb := hostileCallback(hc, engine)
				require.NoError(t, h.LoadModule(ctx, cb, hostileWasm(t, hc)))

				start := time.Now()
				s, err := h.NewSession(ctx, name)
				require.NoError(t, err)
				// Released before the deferred Close, which waits for every
				// session: a failed assertion below must end the test, not
				// leave Close waiting on a held instance (Release is idempotent).
				defer s.Release(ctx)
				x, err := s.Alloc(ctx, abi.F32, 4)
				if err == nil {
					copy(abi.MustView[float32](x), []float32{0, 1, 2, 3})
					_, _, err = s.Invoke(ctx, x)
				}
				assert.Less(t, time.Since(start), cb.Limits.Timeout+hostileSlack)
				var ce *host.CallbackError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, hc.Kind.Ident(), ce.Kind().Ident(), "%v", err)
				assert.Equal(t, name, ce.Callback)
				_, _, err = s.Invoke(ctx, abi.From([]float32{0}))
				require.ErrorIs(t, err, host.ErrSessionClosed, "a failed call breaks the session")
				s.Release(ctx)
				st, _ := h.PoolStats(name)
				assert.Equal(t, 0, st.Live, "Release discards the broken instance")
				assert.Equal(t, uint64(1), st.Discarded)
				require.NoError(t, h.Close(ctx))
			})
		}
	})
}

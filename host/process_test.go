package host_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/workerbin"
)

func workerPath(t testing.TB, probe bool) string {
	t.Helper()
	p, err := workerbin.Path(probe)
	require.NoError(t, err)
	return p
}

func TestProcessSmoke(t *testing.T) {
	ctx := context.Background()
	for _, engine := range engineNames() {
		t.Run(engine, func(t *testing.T) {
			h, err := host.New(ctx, nil, host.WithWorker(workerPath(t, false)))
			require.NoError(t, err)
			defer h.Close(ctx)
			cb := config.DefaultCallback()
			cb.Name, cb.Export, cb.Signature, cb.Engine, cb.Isolation = "scale", "scale", testkitSigs["scale"], engine, config.IsolationProcess
			require.NoError(t, h.LoadModule(ctx, cb, testkitWasm(t)))
			for i := 0; i < 3; i++ {
				outs, err := h.Invoke(ctx, "scale", abi.From([]float32{1, 2, 3}), abi.Scalar[float32](2))
				require.NoError(t, err)
				require.Equal(t, []float32{2, 4, 6}, abi.MustView[float32](outs[0]))
			}
		})
	}
}

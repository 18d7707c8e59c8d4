package guests_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/guests/reference"
	"github.com/seed4b3e0ccb/callbox/host"
)

// BenchmarkMatmul256 times matmul f32[256,256]·f32[256,256] in every guest
// language on every engine, next to the native Go loop (guests/reference)
// in the same run. The callback has a timeout, as in production.
func BenchmarkMatmul256(b *testing.B) {
	const n = 256
	rng := rand.New(rand.NewPCG(3, 4))
	a, bm := make([]float32, n*n), make([]float32, n*n)
	for i := range a {
		a[i], bm[i] = rng.Float32(), rng.Float32()
	}
	ins := []abi.Tensor{abi.From(a, n, n), abi.From(bm, n, n)}
	b.Run("native-go", func(b *testing.B) {
		c := make([]float32, n*n)
		for i := 0; i < b.N; i++ {
			reference.MatmulInto(c, a, bm, n, n, n)
		}
	})
	for _, l := range langs {
		for _, engine := range engineNames() {
			b.Run(fmt.Sprintf("%s/%s", l.name, engine), func(b *testing.B) {
				h, err := host.New(context.Background(), nil, host.WithLogger(slog.New(slog.DiscardHandler)))
				if err != nil {
					b.Fatal(err)
				}
				defer h.Close(context.Background())
				cb := config.DefaultCallback()
				cb.Name, cb.Module, cb.Engine = "matmul", filepath.Join("build", l.name, "matmul.wasm"), engine
				cb.Limits.Timeout, cb.Limits.MaxMemory = 10*time.Second, 256<<20
				if l.wasi {
					cb.WASI = config.WASIMinimal
				}
				if err := h.Load(context.Background(), cb); err != nil {
					b.Fatal(err)
				}
				outs := []abi.Tensor{abi.From(make([]float32, n*n), n, n)}
				ctx := context.Background()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := h.Do(ctx, &host.Request{Callback: "matmul", Inputs: ins, Outputs: outs}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

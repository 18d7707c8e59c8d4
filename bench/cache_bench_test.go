package bench

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/sandbox"
)

// BenchmarkCacheHit is the module-cache target's warm hit as a Go
// benchmark (for profiles): a fresh engine per op compiles the cache
// module from a warm directory. The engine's creation is outside the
// timer, as it is in MeasureCache.
func BenchmarkCacheHit(b *testing.B) {
	ctx := context.Background()
	wasm := CacheModule()
	cfg := sandbox.ModuleConfig{Name: "big", Limits: config.Limits{Timeout: time.Second, MaxMemory: 64 << 20}, SHA256: sha256.Sum256(wasm)}
	for _, e := range []string{config.EngineWasmtime} {
		b.Run(e, func(b *testing.B) {
			dir := b.TempDir()
			eng, err := newEngine(ctx, e, dir)
			require.NoError(b, err)
			mod, err := eng.Compile(ctx, wasm, cfg)
			require.NoError(b, err)
			require.NoError(b, mod.Close(ctx))
			require.NoError(b, eng.Close(ctx))
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				eng, err := newEngine(ctx, e, dir)
				require.NoError(b, err)
				b.StartTimer()
				mod, err := eng.Compile(ctx, wasm, cfg)
				require.NoError(b, err)
				b.StopTimer()
				require.NoError(b, mod.Close(ctx))
				require.NoError(b, eng.Close(ctx))
				b.StartTimer()
			}
		})
	}
}

// BenchmarkCacheHitLoad is the target's host LoadModule on a warm cache
// (a fresh host per op, made outside the timer as far as hostLoad allows:
// host.New and Close are timed here, LoadModule alone by hostLoad).
func BenchmarkCacheHitLoad(b *testing.B) {
	ctx := context.Background()
	wasm := CacheModule()
	for _, e := range []string{config.EngineWasmtime} {
		b.Run(e, func(b *testing.B) {
			dir := b.TempDir()
			_, _, err := hostLoad(ctx, e, dir, wasm)
			require.NoError(b, err)
			var total time.Duration
			for range b.N {
				wall, _, err := hostLoad(ctx, e, dir, wasm)
				require.NoError(b, err)
				total += wall
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "load-ns/op")
		})
	}
}

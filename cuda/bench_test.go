package cuda_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/cuda"
)

// BenchmarkGPUCallFake is the GPU path's host-side cost on the fake device
// (a 1 KiB and a 4 MiB scale call, each path). The fake's copies are host
// memcpys (plus poisoning), so this measures the path's own overhead and
// the staged path's extra host copies, not a GPU's transfer speed:
// scripts/device-check-cuda.sh times the real thing.
func BenchmarkGPUCallFake(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{256, 1 << 20} {
		for _, mode := range []cuda.Mode{cuda.Auto, cuda.Staged, cuda.Pageable} {
			b.Run(fmt.Sprintf("%s/%dKiB", mode, 4*n>>10), func(b *testing.B) {
				r := newRig(b, "wazero", cuda.Options{Mode: mode})
				cb := r.cb(b, "scale")
				in := r.upload(b, r.s, ramp(n, 1))
				f := r.upload(b, r.s, []float32{2})
				f.Shape = abi.Shape{}
				out := r.output(n, 0)
				ins, outs := []cuda.Buffer{in, f}, []cuda.Buffer{out}
				_, err := r.gpu.Call(ctx, cb, r.s, ins, outs)
				require.NoError(b, err)
				b.SetBytes(int64(8 * n))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := r.gpu.Call(ctx, cb, r.s, ins, outs); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

package cuda_test

import (
	"context"
	"fmt"
	"testing"
	"unsafe"

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

// nullDevice completes every operation at once and copies nothing: what
// remains is the GPU path's own host-side work (plan, pointer checks,
// acquire, guest, release) and, on the staged path, its host memcpys.
type nullDevice struct{}

func (nullDevice) CopyD2H(unsafe.Pointer, cuda.DevicePtr, uint64, cuda.Stream) error { return nil }
func (nullDevice) CopyH2D(cuda.DevicePtr, unsafe.Pointer, uint64, cuda.Stream) error { return nil }
func (nullDevice) CopyD2D(cuda.DevicePtr, cuda.DevicePtr, uint64, cuda.Stream) error { return nil }
func (nullDevice) SyncStream(cuda.Stream) error                                      { return nil }
func (nullDevice) NewEvent() (cuda.Event, error)                                     { return 1, nil }
func (nullDevice) RecordEvent(cuda.Event, cuda.Stream) error                         { return nil }
func (nullDevice) SyncEvent(cuda.Event) error                                        { return nil }
func (nullDevice) DestroyEvent(cuda.Event) error                                     { return nil }
func (nullDevice) Register(unsafe.Pointer, uint64) error                             { return nil }
func (nullDevice) Unregister(unsafe.Pointer) error                                   { return nil }
func (nullDevice) PointerType(uintptr) (cuda.MemoryType, error)                      { return cuda.MemoryDevice, nil }

// BenchmarkGPUPathOverhead is the path's host-side cost per call with a
// device that costs nothing, for a pass-through callback (the guest reads
// its input, nothing is written back) at 1 KiB and 32 MiB: the pinned and
// pageable paths add nothing to the guest's own time; the staged path adds
// one host copy of the input.
func BenchmarkGPUPathOverhead(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{256, 8 << 20} {
		for _, mode := range []cuda.Mode{cuda.Auto, cuda.Staged, cuda.Pageable} {
			b.Run(fmt.Sprintf("%s/%dKiB", mode, 4*n>>10), func(b *testing.B) {
				r := newRigWith(b, "wazero", nullDevice{}, cuda.Options{Mode: mode})
				cb := r.cb(b, "tap")
				in := []cuda.Buffer{{Ptr: 0x1000, DType: abi.F32, Shape: abi.Shape{int64(n)}}}
				_, err := r.gpu.Call(ctx, cb, 1, in, in)
				require.NoError(b, err)
				b.SetBytes(int64(4 * n))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := r.gpu.Call(ctx, cb, 1, in, in); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

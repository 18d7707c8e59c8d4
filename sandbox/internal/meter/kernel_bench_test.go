//go:build unix

package meter

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"golang.org/x/sys/unix"
)

// The kernel benchmarks run raw entry points built by make guests — the
// benchmark suite's (guests/bench/kernels.c) and the users' kernels' loops
// (guests/bench/loops.c) — on a plain wazero runtime, on the module as
// compiled and as rewritten, side by side: each of b.N rounds calls every
// variant once, in turn, and the benchmark reports each variant's median
// thread CPU time per call (ns-cpu/<variant>) and its ratio to the plain
// module (x-<variant>), so a busy machine's noise affects them alike:
// "metered" is the rewrite, "per-iteration" the rewrite with every loop
// checked on each iteration (no chunk shape, chunk.go).
// METER_BENCH_OTHER adds more rewrites of the same module
// (comma-separated files, e.g. an earlier version's output) as other0,
// other1, ...

// BenchmarkKernelMatmul runs matmul_raw on 256x256 matrices.
func BenchmarkKernelMatmul(b *testing.B) {
	const n = 256
	benchKernel(b, "kernels.wasm", "matmul_raw", func(place placer) []uint64 {
		return []uint64{place(n*n, nil), place(n*n, nil), place(n*n, nil), n, n, n}
	})
}

// BenchmarkKernelScale runs scale_raw over 4 MiB.
func BenchmarkKernelScale(b *testing.B) {
	const n = 1 << 20
	benchKernel(b, "kernels.wasm", "scale_raw", func(place placer) []uint64 {
		return []uint64{place(n, nil), place(n, nil), n, uint64(math.Float32bits(2))}
	})
}

// The users' kernels' loops over 2^18 f32 (bench/userkernels.go's sizes):
// a loop a few instructions long is where a per-iteration check costs most.
const loopElems = 1 << 18

// BenchmarkKernelClip runs clip_raw: one loop, a load, two float ops, a
// store.
func BenchmarkKernelClip(b *testing.B) {
	benchKernel(b, "loops.wasm", "clip_raw", func(place placer) []uint64 {
		return []uint64{place(loopElems, nil), place(loopElems, nil), loopElems, uint64(math.Float32bits(3))}
	})
}

// BenchmarkKernelDigitize runs digitize_raw with 16 ascending edges: an
// inner scan of a few iterations with a data-dependent exit, per element.
func BenchmarkKernelDigitize(b *testing.B) {
	benchKernel(b, "loops.wasm", "digitize_raw", func(place placer) []uint64 {
		edges := place(16, func(i int) float32 { return float32(i-8) * 1.25 })
		return []uint64{place(loopElems, nil), loopElems, edges, 16, place(loopElems, nil)}
	})
}

// BenchmarkKernelNormalize runs normalize_raw on 256 rows of 1024: three
// inner loops per row.
func BenchmarkKernelNormalize(b *testing.B) {
	benchKernel(b, "loops.wasm", "normalize_raw", func(place placer) []uint64 {
		return []uint64{place(loopElems, nil), place(loopElems, nil), 256, loopElems / 256}
	})
}

// placer reserves n floats of guest memory, the i-th f(i) (with f nil,
// values in [-10, 10) in a fixed, non-monotonic order), and returns their
// offset.
type placer func(n int, f func(i int) float32) uint64

type kernelVariant struct {
	name  string
	mod   api.Module
	fn    api.Function
	stack []uint64
	cpu   []int64
}

func benchKernel(b *testing.B, file, name string, args func(placer) []uint64) {
	plain, err := os.ReadFile("../../../guests/build/bench/" + file)
	if err != nil {
		b.Skip("run make guests first:", err)
	}
	metered, err := Instrument(plain, Options{Meter: true, StackLimit: 1 << 20, GrowHook: true})
	if err != nil {
		b.Fatal(err)
	}
	// The shape before counted loops were charged by the chunk.
	perIteration, err := Instrument(plain, Options{Meter: true, StackLimit: 1 << 20, GrowHook: true, noChunks: true})
	if err != nil {
		b.Fatal(err)
	}
	wasms := map[string][]byte{"plain": plain, "metered": metered, "per-iteration": perIteration}
	names := []string{"plain", "metered", "per-iteration"}
	for k, f := range strings.Split(os.Getenv("METER_BENCH_OTHER"), ",") {
		if f == "" {
			continue
		}
		other, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		names = append(names, fmt.Sprintf("other%d", k))
		wasms[names[len(names)-1]] = other
	}
	ctx := context.Background()
	rt := kernelRuntime(b)
	defer rt.Close(ctx)
	var vs []*kernelVariant
	for _, vn := range names {
		vs = append(vs, newKernelVariant(b, rt, vn, wasms[vn], name, args))
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s := make([]uint64, 8)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, v := range vs {
			copy(s, v.stack)
			t0 := threadCPU(b)
			if err := v.fn.CallWithStack(ctx, s); err != nil {
				b.Fatal(err)
			}
			v.cpu = append(v.cpu, threadCPU(b)-t0)
		}
	}
	b.StopTimer()
	base := median(vs[0].cpu)
	for _, v := range vs {
		m := median(v.cpu)
		b.ReportMetric(float64(m), "ns-cpu/"+v.name)
		if v != vs[0] {
			b.ReportMetric(float64(m)/float64(base), "x-"+v.name)
		}
	}
}

func median(x []int64) int64 {
	x = slices.Clone(x)
	slices.Sort(x)
	return x[len(x)/2]
}

func threadCPU(b *testing.B) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return ts.Nano()
}

// kernelRuntime is a plain wazero runtime with the kernels' import and
// meter imports that grant 20,000 units on every refill, as the host's
// slice does.
func kernelRuntime(b *testing.B) wazero.Runtime {
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	noop := api.GoModuleFunc(func(context.Context, api.Module, []uint64) {})
	i32 := api.ValueTypeI32
	_, err := rt.NewHostModuleBuilder("callbox").
		NewFunctionBuilder().WithGoModuleFunction(noop, []api.ValueType{i32, i32}, nil).Export("error").
		NewFunctionBuilder().WithGoModuleFunction(noop, []api.ValueType{i32, i32, i32}, nil).Export("log").
		Instantiate(ctx)
	if err != nil {
		b.Fatal(err)
	}
	refill := api.GoModuleFunc(func(_ context.Context, _ api.Module, s []uint64) { s[0] = 20000 })
	i64 := []api.ValueType{api.ValueTypeI64}
	_, err = rt.NewHostModuleBuilder(RefillModule).
		NewFunctionBuilder().WithGoModuleFunction(refill, i64, i64).Export(RefillName).
		NewFunctionBuilder().WithGoModuleFunction(noop, nil, nil).Export(OverflowName).
		NewFunctionBuilder().WithGoModuleFunction(noop, []api.ValueType{i32}, nil).Export(GrowDeniedName).
		Instantiate(ctx)
	if err != nil {
		b.Fatal(err)
	}
	return rt
}

// newKernelVariant instantiates wasm and places the kernel's inputs, by
// callbox_alloc (kernels.wasm) or reserve (loops.wasm).
func newKernelVariant(b *testing.B, rt wazero.Runtime, vn string, wasm []byte, name string, args func(placer) []uint64) *kernelVariant {
	ctx := context.Background()
	mod, err := rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName(vn))
	if err != nil {
		b.Fatal(err)
	}
	fn := mod.ExportedFunction(name)
	if fn == nil {
		b.Fatal("the module lacks ", name)
	}
	place := func(n int, f func(i int) float32) uint64 {
		var res []uint64
		var err error
		if alloc := mod.ExportedFunction("callbox_alloc"); alloc != nil {
			res, err = alloc.Call(ctx, uint64(n*4), 64)
		} else if reserve := mod.ExportedFunction("reserve"); reserve != nil {
			res, err = reserve.Call(ctx, uint64(n*4))
		} else {
			b.Fatal("the module exports neither callbox_alloc nor reserve")
		}
		if err != nil || res[0] == 0 {
			b.Fatal("placing the inputs failed: ", err)
		}
		if f == nil {
			f = func(i int) float32 { return float32((i*7919)%2000-1000) / 100 }
		}
		buf := make([]byte, n*4)
		for i := range n {
			binary.LittleEndian.PutUint32(buf[i*4:], math.Float32bits(f(i)))
		}
		mod.Memory().Write(uint32(res[0]), buf)
		return res[0]
	}
	return &kernelVariant{name: vn, mod: mod, fn: fn, stack: args(place)}
}

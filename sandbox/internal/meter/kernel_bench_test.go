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

// The kernel benchmarks run the benchmark suite's raw entry points
// (guests/bench/kernels.c, built by make guests) on a plain wazero runtime,
// on the module as compiled and as rewritten, side by side: each of b.N
// rounds calls every variant once, in turn, and the benchmark reports each
// variant's median thread CPU time per call (ns-cpu/<variant>) and its
// ratio to the plain module (x-<variant>), so a busy machine's noise
// affects them alike. METER_BENCH_OTHER adds more rewrites of the same
// module (comma-separated files, e.g. an earlier version's output) as
// other0, other1, ...

// BenchmarkKernelMatmul runs matmul_raw on 256x256 matrices.
func BenchmarkKernelMatmul(b *testing.B) { benchKernel(b, "matmul_raw", 256) }

// BenchmarkKernelScale runs scale_raw over 4 MiB.
func BenchmarkKernelScale(b *testing.B) { benchKernel(b, "scale_raw", 1<<20) }

type kernelVariant struct {
	name  string
	mod   api.Module
	fn    api.Function
	stack []uint64
	cpu   []int64
}

func benchKernel(b *testing.B, name string, n int) {
	plain, err := os.ReadFile("../../../../guests/build/bench/kernels.wasm")
	if err != nil {
		b.Skip("run make guests first:", err)
	}
	metered, err := Instrument(plain, Options{Meter: true, StackLimit: 1 << 20, GrowHook: true})
	if err != nil {
		b.Fatal(err)
	}
	wasms := map[string][]byte{"plain": plain, "metered": metered}
	names := []string{"plain", "metered"}
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
		vs = append(vs, newKernelVariant(b, rt, vn, wasms[vn], name, n))
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s := make([]uint64, 6)
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

// newKernelVariant instantiates wasm and prepares the kernel's inputs: for
// matmul_raw two n x n matrices and the output, for scale_raw n floats.
func newKernelVariant(b *testing.B, rt wazero.Runtime, vn string, wasm []byte, name string, n int) *kernelVariant {
	ctx := context.Background()
	mod, err := rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName(vn))
	if err != nil {
		b.Fatal(err)
	}
	alloc := mod.ExportedFunction("callbox_alloc")
	fn := mod.ExportedFunction(name)
	if alloc == nil || fn == nil {
		b.Fatal("kernels.wasm lacks callbox_alloc or ", name)
	}
	sizes := []int{n * n * 4, n * n * 4, n * n * 4}
	if name == "scale_raw" {
		sizes = []int{n * 4, n * 4}
	}
	var bufs []uint64
	for _, sz := range sizes {
		res, err := alloc.Call(ctx, uint64(sz), 64)
		if err != nil || res[0] == 0 {
			b.Fatal("callbox_alloc failed: ", err)
		}
		buf := make([]byte, sz)
		for i := 0; i < sz; i += 4 {
			binary.LittleEndian.PutUint32(buf[i:], math.Float32bits(float32(i%7)))
		}
		mod.Memory().Write(uint32(res[0]), buf)
		bufs = append(bufs, res[0])
	}
	stack := []uint64{bufs[0], bufs[1], uint64(n), uint64(math.Float32bits(2))}
	if name == "matmul_raw" {
		stack = []uint64{bufs[0], bufs[1], bufs[2], uint64(n), uint64(n), uint64(n)}
	}
	return &kernelVariant{name: vn, mod: mod, fn: fn, stack: stack}
}

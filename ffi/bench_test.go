//go:build cgo

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config/configfile"
	"github.com/seed4b3e0ccb/callbox/ffi/internal/dlpack"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
)

// The FFI bridge's cost on a tiny call (1 KiB: f32[256] copied by the kit
// guest): the Go API (Host.InvokeInto), the C API from C (callbox_call),
// the XLA FFI handler from C (callbox_xla_ffi with a call frame as XLA
// builds it), and the C API's Go half alone (callDL, no C-to-Go
// crossing), which splits the C API's overhead into the bridge's and the
// crossing's. Targets: the C API within 1.3x InvokeInto, the handler
// within the C API + 0.5 µs. Each reports the fastest of five rounds as
// ns/op and cpu-ns/op.

const tinyElements = 256

// benchConfig writes the kit guest and a config with copy_f32.
func benchConfig(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	src, err := os.ReadFile("testdata/kit.wat")
	require.NoError(b, err)
	bin, err := wat.Compile(string(src))
	require.NoError(b, err)
	require.NoError(b, os.WriteFile(filepath.Join(dir, "kit.wasm"), bin, 0o644))
	cfg := "callbacks:\n  copy_f32:\n    module: kit.wasm\n    export: copy\n    signature: \"(x: f32[n]) -> f32[n]\"\n    timeout: 1s\n"
	path := filepath.Join(dir, "callbox.yaml")
	require.NoError(b, os.WriteFile(path, []byte(cfg), 0o644))
	return path
}

func BenchmarkTinyInvokeInto(b *testing.B) {
	cfg, err := configfile.Load(benchConfig(b))
	require.NoError(b, err)
	ctx := context.Background()
	h, err := host.New(ctx, cfg)
	require.NoError(b, err)
	defer h.Close(ctx)
	x, y := make([]float32, tinyElements), make([]float32, tinyElements)
	in, out := []abi.Tensor{abi.From(x)}, []abi.Tensor{abi.From(y)}
	b.SetBytes(4 * tinyElements)
	b.ResetTimer()
	bestOfRounds(b, func() {
		if _, err := h.Do(ctx, &host.Request{Callback: "copy_f32", Inputs: in, Outputs: out}); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkTinyBridge is the Go half of the C API call (callDL: handle,
// name, DLPack tensors), without the C-to-Go crossing, to tell the
// bridge's cost from the crossing's.
func BenchmarkTinyBridge(b *testing.B) {
	cfg, err := configfile.Load(benchConfig(b))
	require.NoError(b, err)
	bh, err := openHost(context.Background(), cfg)
	require.NoError(b, err)
	h := register(bh)
	defer func() { _, _ = bh.close(context.Background()) }()
	x, y := make([]float32, tinyElements), make([]float32, tinyElements)
	shape := []int64{tinyElements}
	in := dlpack.Tensor{Data: unsafe.Pointer(&x[0]), Device: dlpack.Device{Type: dlpack.CPU}, NDim: 1, DType: dlpack.FromABI(abi.F32), Shape: &shape[0]}
	out := in
	out.Data = unsafe.Pointer(&y[0])
	name := []byte("copy_f32\x00")
	b.SetBytes(4 * tinyElements)
	b.ResetTimer()
	bestOfRounds(b, func() {
		if err := callDL(context.Background(), h, nil, &name[0], &in, 1, &out, 1); err != nil {
			b.Fatal(err)
		}
	})
}

// bestOfRounds runs call b.N times in five rounds and reports the fastest
// round's wall time (ns/op) and process CPU time (cpu-ns/op), as the C
// bench program does: the development machine is shared, and slower
// rounds measure the neighbours.
func bestOfRounds(b *testing.B, call func()) {
	per := max(b.N/5, 1)
	var wall, cpu float64
	for r := 0; r < 5; r++ {
		start, cpuStart := time.Now(), processCPU()
		for i := 0; i < per; i++ {
			call()
		}
		w := float64(time.Since(start).Nanoseconds()) / float64(per)
		c := float64(processCPU()-cpuStart) / float64(per)
		if wall == 0 || w < wall {
			wall = w
		}
		if cpu == 0 || c < cpu {
			cpu = c
		}
	}
	b.ReportMetric(wall, "ns/op")
	b.ReportMetric(cpu, "cpu-ns/op")
}

// processCPU is the process's user and system CPU time in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// runCBench runs testdata/bench.c for b.N calls and reports its own
// per-call time as ns/op (the process start is not part of it).
func runCBench(b *testing.B, mode string) {
	dir := buildHarness(b)
	cfg := benchConfig(b)
	b.ResetTimer()
	wall, cpu := cBench(b, dir, cfg, mode, max(b.N, 1000))
	b.SetBytes(4 * tinyElements)
	b.ReportMetric(wall, "ns/op")
	b.ReportMetric(cpu, "cpu-ns/op")
}

// cBench runs the C bench program for n calls in mode and returns its
// per-call wall and CPU times (each the fastest of its five rounds).
func cBench(b *testing.B, dir, cfg, mode string, n int) (wall, cpu float64) {
	out, err := exec.Command(filepath.Join(dir, "bench"), cfg, mode, "copy_f32", strconv.Itoa(tinyElements), strconv.Itoa(n)).CombinedOutput()
	require.NoError(b, err, string(out))
	f := strings.Fields(string(out))
	require.Len(b, f, 4, string(out))
	wall, err = strconv.ParseFloat(f[1], 64)
	require.NoError(b, err)
	cpu, err = strconv.ParseFloat(f[3], 64)
	require.NoError(b, err)
	return wall, cpu
}

func BenchmarkTinyCAPI(b *testing.B) { runCBench(b, "capi") }

// BenchmarkTinyRequest is BenchmarkTinyCAPI's call made through
// callbox_request_run (1.7): the sized request read and checked.
func BenchmarkTinyRequest(b *testing.B) { runCBench(b, "request") }

func BenchmarkTinyXLAHandler(b *testing.B) { runCBench(b, "xla") }

// BenchmarkTinyCrossing is the floor of any C API entry: a C caller's
// callbox_callback_count, one C-to-Go crossing (Go's cgocallback) and a
// handle lookup.
func BenchmarkTinyCrossing(b *testing.B) { runCBench(b, "crossing") }

// doorRounds is how many interleaved rounds BenchmarkTinyDoorRatios runs.
const doorRounds = 7

// BenchmarkTinyDoorRatios is performance target 2 of issue 21 (the C API
// call and the XLA handler within 1.15x of InvokeInto), measured as the
// bench suite measures its targets: in doorRounds interleaved rounds, each
// measuring InvokeInto in this process and the C API call, the XLA handler
// and the bare crossing from the C program (CPU time per call, the fastest
// of five sub-rounds, in both), with the ratio taken within each round.
// It reports the median ratio and its spread (the highest round's ratio
// over the lowest), the same against InvokeInto on a host opened
// WithoutCallTiming as the C door's are, and the median costs; the suite's report reads
// them from this output. One iteration is the whole measurement.
func BenchmarkTinyDoorRatios(b *testing.B) {
	dir := buildHarness(b)
	cfgPath := benchConfig(b)
	cfg, err := configfile.Load(cfgPath)
	require.NoError(b, err)
	ctx := context.Background()
	h, err := host.New(ctx, cfg)
	require.NoError(b, err)
	defer h.Close(ctx)
	// The C door's hosts leave Stats' timings unmeasured (the C API returns
	// no Stats): InvokeInto on a host opened the same way is the like-for-
	// like baseline, reported beside the target's.
	hu, err := host.New(ctx, cfg, host.WithoutCallTiming())
	require.NoError(b, err)
	defer hu.Close(ctx)
	// The C API's Go half alone (callDL on a bridge host, in this
	// process): splits the door's cost into the bridge's Go code and what
	// the C caller adds (the crossing, and running in the c-shared build).
	bh, err := openHost(ctx, cfg)
	require.NoError(b, err)
	bhandle := register(bh)
	defer func() { _, _ = bh.close(ctx) }()
	x, y := make([]float32, tinyElements), make([]float32, tinyElements)
	in, out := []abi.Tensor{abi.From(x)}, []abi.Tensor{abi.From(y)}
	shape := []int64{tinyElements}
	dlIn := dlpack.Tensor{Data: unsafe.Pointer(&x[0]), Device: dlpack.Device{Type: dlpack.CPU}, NDim: 1, DType: dlpack.FromABI(abi.F32), Shape: &shape[0]}
	dlOut := dlIn
	dlOut.Data = unsafe.Pointer(&y[0])
	name := []byte("copy_f32\x00")
	const calls = 50000
	var capi, xla, crossing, into, untimed, bridge []float64
	for i := 0; i < b.N; i++ {
		for r := 0; r < doorRounds; r++ {
			into = append(into, fastestCPU(calls, func() {
				if _, err := h.Do(ctx, &host.Request{Callback: "copy_f32", Inputs: in, Outputs: out}); err != nil {
					b.Fatal(err)
				}
			}))
			untimed = append(untimed, fastestCPU(calls, func() {
				if _, err := hu.Do(ctx, &host.Request{Callback: "copy_f32", Inputs: in, Outputs: out}); err != nil {
					b.Fatal(err)
				}
			}))
			bridge = append(bridge, fastestCPU(calls, func() {
				if err := callDL(ctx, bhandle, nil, &name[0], &dlIn, 1, &dlOut, 1); err != nil {
					b.Fatal(err)
				}
			}))
			_, c := cBench(b, dir, cfgPath, "capi", calls)
			capi = append(capi, c)
			_, c = cBench(b, dir, cfgPath, "xla", calls)
			xla = append(xla, c)
			_, c = cBench(b, dir, cfgPath, "crossing", calls)
			crossing = append(crossing, c)
		}
	}
	report := func(unit string, num, den []float64) {
		rs := make([]float64, len(num))
		for i := range num {
			rs[i] = num[i] / den[i]
		}
		slices.Sort(rs)
		b.ReportMetric(rs[len(rs)/2], unit)
		b.ReportMetric(rs[len(rs)-1]/rs[0], unit+"-spread")
	}
	report("capi/into", capi, into)
	report("xla/into", xla, into)
	report("capi/into-untimed", capi, untimed)
	report("xla/into-untimed", xla, untimed)
	median := func(v []float64) float64 {
		v = slices.Clone(v)
		slices.Sort(v)
		return v[len(v)/2]
	}
	b.ReportMetric(median(into), "into-cpu-ns")
	b.ReportMetric(median(untimed), "into-untimed-cpu-ns")
	b.ReportMetric(median(bridge), "bridge-cpu-ns")
	b.ReportMetric(median(capi), "capi-cpu-ns")
	b.ReportMetric(median(xla), "xla-cpu-ns")
	b.ReportMetric(median(crossing), "crossing-cpu-ns")
	b.ReportMetric(0, "ns/op") // one iteration is the whole run: no per-op time
}

// fastestCPU runs call n times in five rounds and returns the fastest
// round's process CPU time per call.
func fastestCPU(n int, call func()) float64 {
	per := max(n/5, 1)
	best := 0.0
	for r := 0; r < 5; r++ {
		start := processCPU()
		for i := 0; i < per; i++ {
			call()
		}
		if c := float64(processCPU()-start) / float64(per); best == 0 || c < best {
			best = c
		}
	}
	return best
}

// BenchmarkTinyCAPIAsync is BenchmarkTinyCAPI through callbox_call_async,
// the caller spinning until each call's done function has run: what the
// hand-off to a worker thread and back costs (elixir/README.md).
func BenchmarkTinyCAPIAsync(b *testing.B) { runCBench(b, "async") }

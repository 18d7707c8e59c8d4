package host_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
)

// Benchmarks of the core call path, side by side per engine. Compare
// ratios within one run (`make bench`), not absolute numbers across
// machines.

func benchHost(b *testing.B, engine string, timeout time.Duration) *host.Host {
	return newHost(b, engine, func(cb *config.Callback) {
		cb.Limits.Timeout = timeout
		cb.Limits.MaxMemory = 64 << 20
		cb.MaxInstances = 1
	})
}

func timeoutName(t time.Duration) string {
	if t == 0 {
		return "no-timeout"
	}
	return "timeout"
}

// benchTinyScale times InvokeInto of scale on a 1 KiB f32 tensor.
func benchTinyScale(b *testing.B, h *host.Host) {
	ins := []host.Tensor{abi.From(make([]float32, 256)), abi.Scalar[float32](2)}
	outs := []host.Tensor{abi.From(make([]float32, 256))}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := h.Do(ctx, &host.Request{Callback: "scale", Inputs: ins, Outputs: outs}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTinyCall is the per-call overhead: scale on a 1 KiB f32 tensor.
func BenchmarkTinyCall(b *testing.B) {
	for _, engine := range engineNames() {
		for _, timeout := range []time.Duration{0, time.Second} {
			b.Run(engine+"/"+timeoutName(timeout), func(b *testing.B) {
				h := benchHost(b, engine, timeout)
				benchTinyScale(b, h)
			})
		}
	}
}

// BenchmarkTinyCallBounded is the tiny call held to 100 µs three ways:
// none (the callback's 1 s timeout only), a context.WithTimeout per call,
// and InvokeIntoWithin's budget (no context, timer or clock read of its
// own). Compare the three within one run.
func BenchmarkTinyCallBounded(b *testing.B) {
	for _, engine := range engineNames() {
		h := benchHost(b, engine, time.Second)
		scale, err := h.Lookup("scale")
		if err != nil {
			b.Fatal(err)
		}
		ins := []host.Tensor{abi.From(make([]float32, 256)), abi.Scalar[float32](2)}
		outs := []host.Tensor{abi.From(make([]float32, 256))}
		ctx := context.Background()
		calls := map[string]func() error{
			"unbounded": func() error {
				_, err := scale.Do(ctx, &host.Request{Inputs: ins, Outputs: outs})
				return err
			},
			"context": func() error {
				c, cancel := context.WithTimeout(ctx, 100*time.Microsecond)
				defer cancel()
				_, err := scale.Do(c, &host.Request{Inputs: ins, Outputs: outs})
				return err
			},
			"budget": func() error {
				_, err := invokeIntoWithin(ctx, scale, 100*time.Microsecond, ins, outs)
				return err
			},
		}
		for _, name := range []string{"unbounded", "context", "budget"} {
			call := calls[name]
			b.Run(engine+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					if err := call(); err != nil && !errors.Is(err, host.Timeout) {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkRoundTrip4MiB copies a 4 MiB f32 tensor in, scales it, and copies
// it out. BenchmarkGoCopy4MiB is the floor: the same two copies in Go.
func BenchmarkRoundTrip4MiB(b *testing.B) {
	const n = 1 << 20
	for _, engine := range engineNames() {
		b.Run(engine, func(b *testing.B) {
			h := benchHost(b, engine, time.Second)
			x, f := abi.From(make([]float32, n)), abi.Scalar[float32](2)
			out := abi.From(make([]float32, n))
			ctx := context.Background()
			b.SetBytes(4 * n)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := h.Do(ctx, &host.Request{Callback: "scale", Inputs: []host.Tensor{x, f}, Outputs: []host.Tensor{out}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkGoCopy4MiB(b *testing.B) {
	const n = 4 << 20
	src, mid, dst := make([]byte, n), make([]byte, n), make([]byte, n)
	b.SetBytes(n)
	for i := 0; i < b.N; i++ {
		copy(mid, src)
		copy(dst, mid)
	}
}

// BenchmarkLoopKernel runs 10^6 iterations of a tight guest loop with and
// without a timeout: the cost of each engine's interruption mechanism
// (wazero: WithCloseOnContextDone checks at every loop header; wasmtime:
// epoch checks).
func BenchmarkLoopKernel(b *testing.B) {
	const iters = 1_000_000
	for _, engine := range engineNames() {
		for _, timeout := range []time.Duration{0, 10 * time.Second} {
			b.Run(fmt.Sprintf("%s/%s", engine, timeoutName(timeout)), func(b *testing.B) {
				h := benchHost(b, engine, timeout)
				n := abi.Scalar[int32](iters)
				out := abi.Scalar[int32](0)
				ctx := context.Background()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := h.Do(ctx, &host.Request{Callback: "busy", Inputs: []host.Tensor{n}, Outputs: []host.Tensor{out}}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkFreshCall is a tiny call with isolation fresh: a new instance
// per call (the module has a 128 KiB memory).
func BenchmarkFreshCall(b *testing.B) {
	for _, engine := range engineNames() {
		b.Run(engine, func(b *testing.B) {
			h := newHost(b, engine, func(cb *config.Callback) {
				cb.Isolation = config.IsolationFresh
				cb.Limits.Timeout = time.Second
			})
			benchTinyScale(b, h)
		})
	}
}

// BenchmarkChain100 submits 100 tiny calls to a chain and waits at a
// barrier; BenchmarkInvoke100 makes the same 100 calls directly.
func BenchmarkChain100(b *testing.B) {
	for _, engine := range engineNames() {
		b.Run(engine, func(b *testing.B) {
			h := benchHost(b, engine, time.Second)
			x, f := abi.From(make([]float32, 256)), abi.Scalar[float32](2)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ch := h.NewChain("bench")
				for j := 0; j < 100; j++ {
					ch.Submit(ctx, "scale", x, f)
				}
				if err := ch.Barrier(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkInvoke100(b *testing.B) {
	for _, engine := range engineNames() {
		b.Run(engine, func(b *testing.B) {
			h := benchHost(b, engine, time.Second)
			x, f := abi.From(make([]float32, 256)), abi.Scalar[float32](2)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for j := 0; j < 100; j++ {
					if _, err := h.Invoke(ctx, "scale", x, f); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkTinyChainInvokeInto is BenchmarkTinyCall's call as the next step
// of an ordered chain (the path every ordered XLA call takes), beside the
// same call made directly, in one run: read the ratio.
func BenchmarkTinyChainInvokeInto(b *testing.B) {
	for _, engine := range engineNames() {
		h := benchHost(b, engine, time.Second)
		ins := []host.Tensor{abi.From(make([]float32, 256)), abi.Scalar[float32](2)}
		outs := []host.Tensor{abi.From(make([]float32, 256))}
		ctx := context.Background()
		b.Run(engine+"/direct", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := h.Do(ctx, &host.Request{Callback: "scale", Inputs: ins, Outputs: outs}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(engine+"/chain", func(b *testing.B) {
			ch := h.Chain("bench")
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ch.InvokeInto(ctx, "scale", ins, outs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package lowering

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
)

// genText writes a program of about n ops: a mix of elementwise ops, pure
// calls (some repeated, some dead), ordered io_calls on two chains, taps,
// and every 50 ops a cond with an ordered effect in one branch.
func genText(n int) string {
	var b strings.Builder
	b.WriteString("func @big(%x: f32[8], %g: f32[]) -> f32[8] {\n")
	prev := "x"
	ops := 0
	for i := 0; ops < n; i++ {
		v := fmt.Sprintf("v%d", i)
		switch i % 10 {
		case 0, 1, 2:
			fmt.Fprintf(&b, "  %%%s = add %%%s, %%x : f32[8]\n", v, prev)
		case 3:
			fmt.Fprintf(&b, "  %%%s = call @scale(%%%s, %%g) : f32[8]\n", v, prev)
		case 4:
			fmt.Fprintf(&b, "  %%%s = call @scale(%%%s, %%g) : f32[8]\n", v, prev) // same as the previous call: CSE
		case 5:
			fmt.Fprintf(&b, "  %%%s = exp %%%s : f32[8]\n", v, prev) // dead
			ops++
			continue
		case 6:
			fmt.Fprintf(&b, "  %%%s = io_call @scale(%%%s, %%g) ordered : f32[8]\n", v, prev)
		case 7:
			fmt.Fprintf(&b, "  tap @tap_print(%%%s) ordered chain \"log\"\n", prev)
			ops++
			continue
		case 8:
			fmt.Fprintf(&b, "  %%%s = mul %%%s, %%%s : f32[8]\n", v, prev, prev)
		case 9:
			if i%50 == 49 {
				fmt.Fprintf(&b, "  %%s%d = reduce_sum %%%s axes [0] : f32[]\n", i, prev)
				fmt.Fprintf(&b, "  %%p%d = compare gt %%s%d, %%g : pred[]\n", i, i)
				fmt.Fprintf(&b, "  %%%s = cond %%p%d {\n    %%t%d = io_call @scale(%%%s, %%g) ordered : f32[8]\n    yield %%t%d\n  } else {\n    yield %%%s\n  } : f32[8]\n", v, i, i, prev, i, prev)
				ops += 3
			} else {
				fmt.Fprintf(&b, "  %%%s = sub %%%s, %%x : f32[8]\n", v, prev)
			}
		}
		ops++
		prev = v
	}
	fmt.Fprintf(&b, "  return %%%s\n}\n", prev)
	return b.String()
}

// BenchmarkLower measures the whole compile of generated programs: parse,
// check against signatures, CSE, DCE, token threading, StableHLO emission.
// Time per op should stay flat from 1k to 100k ops (linear growth).
func BenchmarkLower(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		src := []byte(genText(n))
		b.Run(fmt.Sprintf("ops=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				p, err := Compile("big.cbir", src, testCat, Options{})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Emit(p, testCat); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/op-in-program")
			// CPU time (user+system, GC included) is steadier than wall
			// time on a shared machine.
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

func TestGenTextCompiles(t *testing.T) {
	for _, n := range []int{100, 1000} {
		src := genText(n)
		p, err := Parse("big", []byte(src))
		require.NoError(t, err)
		require.InEpsilon(t, n, p.NumOps(), 0.01)
		require.NoError(t, Check(p, testCat))
		require.NoError(t, Lower(p, Options{}))
		_, err = Emit(p, testCat)
		require.NoError(t, err)
	}
}

// BenchmarkCallbackOp compares the evaluator's cost per callback op with
// a direct Host.Invoke (and Chain.Invoke) of the same calls: 64 dependent
// calls of scale on f32[256] per iteration. The target: eval ≤ 1.2x direct.
func BenchmarkCallbackOp(b *testing.B) {
	const calls = 64
	ctx := context.Background()
	h := newHost(b, config.EngineWazero)
	x := abi.From(make([]float32, 256))
	g := abi.Scalar[float32](1.0001)
	build := func(kind string) *Evaluator {
		var sb strings.Builder
		sb.WriteString("func @calls(%x: f32[256], %g: f32[]) -> f32[256] {\n")
		prev := "x"
		for i := 0; i < calls; i++ {
			fmt.Fprintf(&sb, "  %%v%d = %s(%%%s, %%g)%s : f32[256]\n", i, strings.Split(kind, " ")[0]+" @scale", prev, map[bool]string{true: " ordered", false: ""}[strings.HasSuffix(kind, "ordered")])
			prev = fmt.Sprintf("v%d", i)
		}
		fmt.Fprintf(&sb, "  return %%%s\n}\n", prev)
		p, err := Compile("calls.cbir", []byte(sb.String()), HostCatalog(h), Options{})
		require.NoError(b, err)
		ev, err := NewEvaluator(h, p, EvalOptions{})
		require.NoError(b, err)
		return ev
	}
	perCall := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/calls, "ns/callback")
	}
	b.Run("eval-call", func(b *testing.B) {
		ev := build("call")
		for i := 0; i < b.N; i++ {
			if _, err := ev.Run(ctx, x, g); err != nil {
				b.Fatal(err)
			}
		}
		perCall(b)
	})
	b.Run("direct-invoke", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			y := x
			for j := 0; j < calls; j++ {
				out, err := h.Invoke(ctx, "scale", y, g)
				if err != nil {
					b.Fatal(err)
				}
				y = out[0]
			}
		}
		perCall(b)
	})
	b.Run("eval-io_call-ordered", func(b *testing.B) {
		ev := build("io_call ordered")
		for i := 0; i < b.N; i++ {
			if _, err := ev.Run(ctx, x, g); err != nil {
				b.Fatal(err)
			}
		}
		perCall(b)
	})
	b.Run("direct-chain-invoke", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			ch := h.NewChain("main")
			y := x
			for j := 0; j < calls; j++ {
				out, err := ch.Invoke(ctx, "scale", y, g)
				if err != nil {
					b.Fatal(err)
				}
				y = out[0]
			}
			if err := ch.Barrier(ctx); err != nil {
				b.Fatal(err)
			}
		}
		perCall(b)
	})
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

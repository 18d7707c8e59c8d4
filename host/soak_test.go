//go:build soak

package host_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/host"
)

// The soak: 100,000 mixed calls (SOAK_CALLS overrides) from 8 goroutines on
// one host, healthy and hostile, both engines, with ordered chains and
// taps mixed in. Every 10,000 calls it prints the process's resident set
// (VmRSS), the Go heap, the goroutine count and the live instances; at the
// end it asserts they stayed flat after warm-up. Run with `make soak`; with
// -security-doc (make soak SOAK_DOC=1) it rewrites the soak section of
// docs/SECURITY.md from the run.
//
// Bounds: the run takes under 10 minutes; RSS at the end is within 25% (or
// 64 MiB, whichever is more) of RSS after the first checkpoint; goroutines
// at the end are within 10 of the start; live instances never exceed the
// pools' bounds; after Close no goroutine is left.

func vmRSS() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

type soakSample struct {
	calls, failures int64
	rss, heap       uint64
	goroutines      int
	live            int
	elapsed         time.Duration
}

func TestSoak(t *testing.T) {
	total := int64(100_000)
	if s := os.Getenv("SOAK_CALLS"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		require.NoError(t, err)
		total = n
	}
	const workers, every = 8, 10_000
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	startGoroutines := runtime.NumGoroutine()
	const maxInstances = 4
	m := newMixedHost(t, 100*time.Millisecond, maxInstances)
	defer m.Close(context.Background())
	ctx := context.Background()
	names := m.names()
	var hostileNames, slowNames []string
	for _, n := range names {
		if _, bad := m.hostile[n]; bad {
			if strings.HasPrefix(n, "spin_") || strings.HasPrefix(n, "sleep_forever_") {
				slowNames = append(slowNames, n)
			} else {
				hostileNames = append(hostileNames, n)
			}
		}
	}
	maxLive := len(names) * maxInstances

	live := func() int {
		n := 0
		for _, name := range names {
			st, _ := m.PoolStats(name)
			n += st.Live
		}
		return n
	}
	var (
		next, failures atomic.Int64
		mu             sync.Mutex
		samples        []soakSample
		errs           []error
	)
	begin := time.Now()
	sample := func(calls int64) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		s := soakSample{calls: calls, failures: failures.Load(), rss: vmRSS(), heap: ms.HeapInuse,
			goroutines: runtime.NumGoroutine(), live: live(), elapsed: time.Since(begin)}
		mu.Lock()
		samples = append(samples, s)
		mu.Unlock()
		t.Logf("calls %6d  failures %6d  rss %6.1f MiB  heap %6.1f MiB  goroutines %4d  live instances %3d  (%v)",
			s.calls, s.failures, float64(s.rss)/(1<<20), float64(s.heap)/(1<<20), s.goroutines, s.live, s.elapsed.Round(time.Second))
	}
	sample(0)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			for {
				i := next.Add(1)
				if i > total {
					return
				}
				var err error
				switch r := rng.IntN(1000); {
				case r < 2: // a timeout (100 ms)
					failures.Add(1)
					err = m.call(ctx, slowNames[rng.IntN(len(slowNames))], int(i))
				case r < 150: // another hostile call
					failures.Add(1)
					err = m.call(ctx, hostileNames[rng.IntN(len(hostileNames))], int(i))
				case r < 160: // a chain of five whose third call is hostile
					failures.Add(1)
					ch := m.NewChain(fmt.Sprintf("soak-%d", i))
					x := abi.From([]float32{0, 1})
					for k := 1; k <= 5; k++ {
						if k == 3 {
							ch.Tap(ctx, hostileNames[rng.IntN(len(hostileNames))], x)
						} else {
							ch.Tap(ctx, m.healthy[1], x) // tap_<engine>
						}
					}
					var ce *host.CallbackError
					if e := ch.Barrier(ctx); !errors.As(e, &ce) || ce.Seq != 3 {
						err = fmt.Errorf("chain %d: barrier returned %v", i, e)
					}
				case r < 170: // a fire-and-forget tap
					m.Tap(ctx, m.healthy[1], abi.From([]float32{1, 2}))
				default:
					err = m.call(ctx, m.healthy[rng.IntN(len(m.healthy))], int(i))
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
				if i%every == 0 {
					sample(i)
					if l := live(); l > maxLive {
						mu.Lock()
						errs = append(errs, fmt.Errorf("%d live instances, bound %d", l, maxLive))
						mu.Unlock()
					}
				}
			}
		}(w)
	}
	wg.Wait()
	_ = m.Barrier(ctx)
	elapsed := time.Since(begin)
	runtime.GC()
	sample(total)
	for _, err := range errs[:min(len(errs), 20)] {
		t.Error(err)
	}
	require.Empty(t, errs, "%d calls went wrong", len(errs))

	first, warm, last := samples[0], samples[min(1, len(samples)-1)], samples[len(samples)-1]
	assert.Less(t, elapsed, 10*time.Minute)
	if warm.rss > 0 {
		bound := max(warm.rss+warm.rss/4, warm.rss+64<<20)
		assert.LessOrEqual(t, last.rss, bound, "RSS grew from %d to %d bytes", warm.rss, last.rss)
	}
	assert.LessOrEqual(t, last.goroutines, startGoroutines+10, "goroutines grew from %d to %d", startGoroutines, last.goroutines)
	assert.LessOrEqual(t, last.live, maxLive)
	require.NoError(t, m.Close(ctx))
	afterClose := runtime.NumGoroutine()
	t.Logf("after Close: %d goroutines (%d before the host)", afterClose, startGoroutines)

	if *securityDoc && !t.Failed() {
		var b strings.Builder
		fmt.Fprintf(&b, "Generated by `make soak SOAK_DOC=1` (%s): %d calls from %d goroutines on one host, %d callbacks (%d hostile) across both engines, %d calls failing by design (%.1f%%), in %v. Pasted from that run's output; nothing here is typed by hand.\n\n",
			machine(), last.calls, workers, len(names), len(m.hostile), last.failures, 100*float64(last.failures)/float64(last.calls), elapsed.Round(time.Second))
		b.WriteString("| Calls | Failed (hostile) | RSS | Go heap in use | Goroutines | Live instances | Elapsed |\n")
		b.WriteString("|---|---|---|---|---|---|---|\n")
		for i, s := range samples {
			calls := strconv.FormatInt(s.calls, 10)
			if i == len(samples)-1 {
				calls += " (end: workers done, after GC)"
			}
			fmt.Fprintf(&b, "| %s | %d | %.1f MiB | %.1f MiB | %d | %d | %v |\n", calls, s.failures,
				float64(s.rss)/(1<<20), float64(s.heap)/(1<<20), s.goroutines, s.live, s.elapsed.Round(100*time.Millisecond))
		}
		fmt.Fprintf(&b, "\nStart → end: RSS %.1f → %.1f MiB (%.1f MiB after the first checkpoint), goroutines %d → %d (%d after Close), live instances %d → %d (bound %d).\n",
			float64(first.rss)/(1<<20), float64(last.rss)/(1<<20), float64(warm.rss)/(1<<20), first.goroutines, last.goroutines, afterClose, first.live, last.live, maxLive)
		require.NoError(t, writeDocRegion("soak", b.String()))
	}
}

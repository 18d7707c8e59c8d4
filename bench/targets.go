package bench

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

// The targets that need measurements of their own: timeout accuracy under
// load, the fresh-instance floor, and the module cache.

// AccuracyResult is how late a runaway guest is stopped after its
// deadline, over Runs calls, while Burners other guests spin.
type AccuracyResult struct {
	Engine   string
	Timeout  time.Duration
	Runs     int
	Burners  int
	P50, P99 time.Duration
	Max      time.Duration
	Err      error
}

// accuracyBlock is how many runaway calls are timed in a row before the
// measurement switches between baseline and busy.
const accuracyBlock = 25

// MeasureTimeoutAccuracy calls the kernels' runaway "spin" callback with
// the given timeout, runs times with no other guest (the baseline) and
// runs times while burners other goroutines keep calling spin on another
// callback (100ms timeout), and reports how long after the timeout each
// call returned (from the start of Invoke, so the call's own set-up counts
// against it). With GOMAXPROCS burners every Go thread is busy running a
// guest. Baseline and busy calls alternate in blocks, so both see the same
// load from the rest of the machine. It returns the baseline, then the
// busy result.
func MeasureTimeoutAccuracy(ctx context.Context, engine string, runs int, timeout time.Duration, burners int) []AccuracyResult {
	base := AccuracyResult{Engine: engine, Timeout: timeout, Runs: runs}
	busy := AccuracyResult{Engine: engine, Timeout: timeout, Runs: runs, Burners: burners}
	fail := func(err error) []AccuracyResult {
		base.Err, busy.Err = err, err
		return []AccuracyResult{base, busy}
	}
	wasm, err := KernelsModule()
	if err != nil {
		return fail(err)
	}
	dir, err := os.MkdirTemp("", "callbox-bench-acc-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	h, err := newHost(ctx, dir, wasm, func(name string) config.Callback {
		cb := config.DefaultCallback()
		cb.Name, cb.Export, cb.Engine = name, "spin", engine
		cb.Limits.Timeout = timeout
		cb.MaxInstances = 1
		if name == "burn" {
			cb.Limits.Timeout = 100 * time.Millisecond
			cb.MaxInstances = max(burners, 1)
		}
		return cb
	}, "spin", "burn")
	if err != nil {
		return fail(err)
	}
	defer h.Close(ctx)

	x := abi.From(make([]float32, 16))
	// block times n runaway calls with k burners running.
	block := func(n, k int) ([]time.Duration, error) {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for i := 0; i < k; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					_, _ = h.Invoke(ctx, "burn", x)
				}
			}()
		}
		defer wg.Wait()
		defer close(stop)
		if k > 0 {
			time.Sleep(20 * time.Millisecond) // let the burners start
		}
		var lates []time.Duration
		for i := 0; i < n && ctx.Err() == nil; i++ {
			start := time.Now()
			_, err := h.Invoke(ctx, "spin", x)
			late := time.Since(start) - timeout
			if !errors.Is(err, host.Timeout) {
				return lates, fmt.Errorf("spin returned %v, want a timeout", err)
			}
			lates = append(lates, late)
		}
		return lates, ctx.Err()
	}
	var baseLates, busyLates []time.Duration
	for done := 0; done < runs; done += accuracyBlock {
		n := min(accuracyBlock, runs-done)
		l, err := block(n, 0)
		baseLates = append(baseLates, l...)
		if err != nil {
			base.Err = err
			break
		}
		l, err = block(n, burners)
		busyLates = append(busyLates, l...)
		if err != nil {
			busy.Err = err
			break
		}
	}
	base.summarize(baseLates)
	busy.summarize(busyLates)
	return []AccuracyResult{base, busy}
}

// summarize sets the percentiles from the measured lateness.
func (a *AccuracyResult) summarize(lates []time.Duration) {
	a.Runs = len(lates)
	if len(lates) == 0 {
		return
	}
	slices.Sort(lates)
	a.P50 = lates[len(lates)/2]
	a.P99 = lates[(len(lates)*99+99)/100-1]
	a.Max = lates[len(lates)-1]
}

// InstantiateResult is the cost of one fresh instance of a module with a
// given initial memory, on an engine: Instantiate and Close, nothing else.
type InstantiateResult struct {
	Engine      string
	MemoryBytes uint64
	NsPerOp     float64 // wall
	CPUPerOp    float64 // process CPU time; NaN when unknown
	Err         error
}

// Cost is the CPU time per instantiation where known (see Result.Cost),
// else the wall time.
func (r InstantiateResult) Cost() float64 {
	if math.IsNaN(r.CPUPerOp) || r.CPUPerOp <= 0 {
		return r.NsPerOp
	}
	return r.CPUPerOp
}

// InstantiateMemories are the initial memories the fresh-instance floor is
// measured at (the kernels module itself has 128 KiB).
var InstantiateMemories = []uint64{128 << 10, 1 << 20, 16 << 20, 64 << 20}

// MeasureInstantiate measures sandbox-level instantiation of a generated
// ABI module whose memory starts at memBytes, with a 1 KiB data segment.
func MeasureInstantiate(ctx context.Context, engine string, memBytes uint64) InstantiateResult {
	res := InstantiateResult{Engine: engine, MemoryBytes: memBytes}
	eng, err := newEngine(ctx, engine, "")
	if err != nil {
		res.Err = err
		return res
	}
	defer eng.Close(ctx)
	wasm := genModule(uint32(memBytes/abi.PageSize), 0, 0)
	mod, err := sandbox.Compile(ctx, eng, wasm, sandbox.ModuleConfig{Name: "inst", Limits: config.Limits{Timeout: BenchTimeout, MaxMemory: 256 << 20}})
	if err != nil {
		res.Err = err
		return res
	}
	defer mod.Close(ctx)
	// The fastest of three measurements, as for the table.
	res.NsPerOp, res.CPUPerOp = math.Inf(1), math.NaN()
	for range 3 {
		s, err := measure(&runner{op: func() error {
			inst, err := mod.Instantiate(ctx, sandbox.Deadline(time.Now(), BenchTimeout))
			if err != nil {
				return err
			}
			return inst.Close(ctx)
		}})
		if err != nil {
			res.Err = err
			return res
		}
		res.NsPerOp = math.Min(res.NsPerOp, s.ns)
		if !math.IsNaN(s.cpu) {
			res.CPUPerOp = math.Min(s.cpu, nanToInf(res.CPUPerOp))
		}
	}
	return res
}

func newEngine(ctx context.Context, engine, cacheDir string) (sandbox.Engine, error) {
	return engines.New(ctx, engine, engines.Options{CacheDir: cacheDir})
}

// CacheResult is the module cache on one engine for a generated module of
// ModuleBytes: a cold compile into an empty cache directory, then compiles
// by fresh engines (as in a new process) pointing at the warm directory.
type CacheResult struct {
	Engine      string
	ModuleBytes int
	Cold        time.Duration // compile with an empty cache (wall)
	Hit         time.Duration // median engine Compile on a warm cache, CPU time where known
	HitWall     time.Duration // the same, wall time
	HitLoad     time.Duration // median host LoadModule on a warm cache (parse, checks, compile, probe instance), CPU time where known
	Err         error
}

// CacheModuleSize is the size of the module the cache target uses.
const CacheModuleSize = 5 << 20

// CacheModule generates the ~5 MB module of the cache target: ABI exports
// and 1000 functions of straight-line code.
func CacheModule() []byte { return genModule(1, 1000, CacheModuleSize/1000) }

// MeasureCache measures the module cache on an engine: hits are the median
// of reps fresh engines.
func MeasureCache(ctx context.Context, engine string, wasm []byte, reps int) CacheResult {
	res := CacheResult{Engine: engine, ModuleBytes: len(wasm)}
	dir, err := os.MkdirTemp("", "callbox-bench-cache-")
	if err != nil {
		res.Err = err
		return res
	}
	defer os.RemoveAll(dir)
	// The host hashes a module once per load for the callback's content
	// address and hands the sum to the engine, which keys its caches on
	// it; the engine-level hit is timed given that sum (HitLoad includes
	// it).
	cfg := sandbox.ModuleConfig{Name: "big", Limits: config.Limits{Timeout: time.Second, MaxMemory: 64 << 20}, SHA256: sha256.Sum256(wasm)}
	compile := func() (wall, cpu time.Duration, err error) {
		eng, err := newEngine(ctx, engine, dir)
		if err != nil {
			return 0, 0, err
		}
		defer eng.Close(ctx)
		var mod sandbox.Module
		wall, cpu, err = timed(func() error {
			var err error
			mod, err = eng.Compile(ctx, wasm, cfg)
			return err
		})
		if err != nil {
			return 0, 0, err
		}
		_ = mod.Close(ctx)
		return wall, cpu, nil
	}
	if res.Cold, _, err = compile(); err != nil {
		res.Err = err
		return res
	}
	var hits, walls, loads []time.Duration
	for i := 0; i < reps; i++ {
		wall, cpu, err := compile()
		if err != nil {
			res.Err = err
			return res
		}
		hits, walls = append(hits, cpu), append(walls, wall)
		_, cpu, err = hostLoad(ctx, engine, dir, wasm)
		if err != nil {
			res.Err = err
			return res
		}
		loads = append(loads, cpu)
	}
	res.Hit, res.HitWall, res.HitLoad = medianDuration(hits), medianDuration(walls), medianDuration(loads)
	return res
}

// hostLoad times host.LoadModule of the cache module in a fresh host.
func hostLoad(ctx context.Context, engine, dir string, wasm []byte) (wall, cpu time.Duration, err error) {
	h, err := host.New(ctx, nil, host.WithLogger(slog.New(slog.DiscardHandler)), host.WithCacheDir(dir))
	if err != nil {
		return 0, 0, err
	}
	defer h.Close(ctx)
	cb := config.DefaultCallback()
	cb.Name, cb.Export, cb.Signature, cb.Engine = "noop", "noop", "(x: f32[n]) -> f32[n]", engine
	return timed(func() error { return h.LoadModule(ctx, cb, wasm) })
}

// timed runs fn and returns its wall time and the process CPU time it took
// (the wall time where CPU time cannot be read).
func timed(fn func() error) (wall, cpu time.Duration, err error) {
	c0, ok0 := processCPU()
	start := time.Now()
	err = fn()
	wall = time.Since(start)
	c1, ok1 := processCPU()
	cpu = wall
	if ok0 && ok1 {
		cpu = time.Duration(c1 - c0)
	}
	return wall, cpu, err
}

func nanToInf(x float64) float64 {
	if math.IsNaN(x) {
		return math.Inf(1)
	}
	return x
}

func medianDuration(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

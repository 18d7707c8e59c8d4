package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"regexp"
	"runtime/debug"
	"slices"
	"testing"
	"time"
)

// Options configure Run.
type Options struct {
	// BenchTime is testing's -benchtime of one measurement (default 50ms).
	BenchTime time.Duration
	// Reps is how many times each case is measured (default 7).
	// Repetitions are interleaved across a workload's variants, so slow
	// drift in machine load hits every variant alike. The table shows the
	// fastest repetition, the one least disturbed by other work on the
	// machine, with the median and the spread beside it; ratios are the
	// median of the per-round ratios, and targets are judged on medians.
	Reps int
	// Filter, when set, keeps the cases whose "workload/variant" id it
	// matches.
	Filter *regexp.Regexp
	// Progress receives one line per measurement; nil for none.
	Progress io.Writer
}

// Defaults of Options.
const (
	DefaultBenchTime = 50 * time.Millisecond
	DefaultReps      = 7
)

// Result is one case's measurement.
type Result struct {
	Workload Workload
	Variant  Variant
	// NsPerOp is the time of one operation (one call, or a whole chain) in
	// the fastest repetition; Median is the median repetition's.
	NsPerOp float64
	Median  float64
	Samples []float64 // ns/op of each repetition
	// CPUPerOp is the process's CPU time (all threads) per operation, the
	// least over repetitions: the work an operation costs, whatever else
	// the machine runs. NaN where it cannot be read.
	CPUPerOp   float64
	CPUSamples []float64
	// Bytes is the input tensor bytes of one operation, for MB/s.
	Bytes       int64
	AllocsPerOp int64
	Err         error
}

// Spread is the slowest repetition over the fastest: how noisy the
// measurement was.
func (r Result) Spread() float64 {
	if len(r.Samples) == 0 {
		return math.NaN()
	}
	return slices.Max(r.Samples) / slices.Min(r.Samples)
}

// Cost is what ratios and targets compare. For an operation that runs on
// one thread (every workload but the chain) it is the CPU time per
// operation, which other processes on a shared machine do not inflate
// (wall time there mostly measures how often the thread was descheduled);
// for the chain, whose calls hand off between goroutines so that its
// latency is the point, it is the fastest wall time, as it is wherever CPU
// time cannot be read.
func (r Result) Cost() float64 {
	if r.Workload.Chain() || math.IsNaN(r.CPUPerOp) || r.CPUPerOp <= 0 {
		return r.NsPerOp
	}
	return r.CPUPerOp
}

// MedianCost is Cost's median over the repetitions: what a target on a
// case's own cost compares (the fastest repetition is the least disturbed,
// the median the typical one; a target is met only when the typical run
// meets it).
func (r Result) MedianCost() float64 {
	if c := r.roundCosts(false); len(c) > 0 {
		return median(c)
	}
	return r.Cost()
}

// roundCosts is the cost of each repetition, in the order measured (wall:
// the wall times whatever Cost uses).
func (r Result) roundCosts(wall bool) []float64 {
	if wall || r.Workload.Chain() || math.IsNaN(r.CPUPerOp) || r.CPUPerOp <= 0 || len(r.CPUSamples) != len(r.Samples) {
		return r.Samples
	}
	return r.CPUSamples
}

// MBPerSec is the input tensor throughput, at Cost.
func (r Result) MBPerSec() float64 {
	if c := r.Cost(); c > 0 {
		return float64(r.Bytes) / c * 1e3
	}
	return 0
}

// setBenchTime makes testing.Benchmark run for d. testing.Benchmark reads
// -test.benchtime, registered by testing.Init outside `go test`.
func setBenchTime(d time.Duration) error {
	if flag.Lookup("test.benchtime") == nil {
		testing.Init()
	}
	return flag.Set("test.benchtime", d.String())
}

// Run measures every case of the table, workload by workload.
func Run(ctx context.Context, opts Options) ([]Result, error) {
	if opts.BenchTime <= 0 {
		opts.BenchTime = DefaultBenchTime
	}
	if opts.Reps <= 0 {
		opts.Reps = DefaultReps
	}
	if err := setBenchTime(opts.BenchTime); err != nil {
		return nil, err
	}
	env, err := NewEnv(ctx)
	if err != nil {
		return nil, err
	}
	defer env.Close()
	var results []Result
	for _, w := range Workloads() {
		var vs []Variant
		for _, v := range Variants() {
			if v.Supports(w) && (opts.Filter == nil || opts.Filter.MatchString(w.ID+"/"+v.ID)) {
				vs = append(vs, v)
			}
		}
		if len(vs) == 0 {
			continue
		}
		rs, err := runWorkload(ctx, env, w, vs, opts)
		if err != nil {
			return results, err
		}
		results = append(results, rs...)
	}
	return results, nil
}

// runWorkload sets up every variant of one workload, measures them Reps
// times round-robin, and closes them.
func runWorkload(ctx context.Context, env *Env, w Workload, vs []Variant, opts Options) ([]Result, error) {
	d := newData(w)
	runners := make([]*runner, len(vs))
	results := make([]Result, len(vs))
	defer func() {
		for _, r := range runners {
			if r != nil {
				r.close()
			}
		}
	}()
	for i, v := range vs {
		results[i] = Result{Workload: w, Variant: v, Bytes: int64(d.inputBytes() * w.Calls)}
		r, err := env.setup(v, d)
		if err != nil {
			results[i].Err = err
			continue
		}
		runners[i] = r
		// One warm-up operation, not measured: the first call grows guest
		// memory and faults its pages in, which is not the steady state.
		if err := r.op(); err != nil {
			results[i].Err = fmt.Errorf("%s/%s: %w", w.ID, v.ID, err)
		}
	}
	for rep := 0; rep < opts.Reps; rep++ {
		for i, r := range runners {
			if r == nil || results[i].Err != nil {
				continue
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			s, err := measure(r)
			if err != nil {
				results[i].Err = err
				continue
			}
			results[i].Samples = append(results[i].Samples, s.ns)
			results[i].CPUSamples = append(results[i].CPUSamples, s.cpu)
			results[i].AllocsPerOp = s.allocs
			if opts.Progress != nil {
				fmt.Fprintf(opts.Progress, "  %-22s %-30s %14s %14s cpu\n", w.ID, vs[i].ID, formatNs(s.ns), formatNs(s.cpu))
			}
		}
	}
	for i := range results {
		if len(results[i].Samples) > 0 {
			results[i].NsPerOp = slices.Min(results[i].Samples)
			results[i].Median = median(results[i].Samples)
			results[i].CPUPerOp = slices.Min(results[i].CPUSamples)
		}
	}
	return results, nil
}

// sample is one measurement of a case.
type sample struct {
	ns     float64 // wall time per op
	cpu    float64 // process CPU time per op (every thread), NaN if unknown
	allocs int64
}

// measure runs one case under testing.Benchmark. Besides the wall time it
// records the process's CPU time over the final round (the one the result
// reports), which other work on the machine does not inflate.
func measure(r *runner) (sample, error) {
	// Return the previous case's garbage to the OS now: left to the
	// background scavenger (Extism frees hundreds of MB per 32 MiB call) it
	// would run during, and be charged to, this measurement.
	debug.FreeOSMemory()
	var opErr error
	var cpu int64
	cpuOK := false
	res := testing.Benchmark(func(b *testing.B) {
		c0, ok0 := processCPU()
		for i := 0; i < b.N; i++ {
			if err := r.op(); err != nil {
				opErr = err
				b.FailNow()
			}
		}
		c1, ok1 := processCPU()
		cpu, cpuOK = c1-c0, ok0 && ok1
	})
	if opErr != nil {
		return sample{}, opErr
	}
	if res.N == 0 {
		return sample{}, errors.New("benchmark did not run")
	}
	s := sample{ns: float64(res.T.Nanoseconds()) / float64(res.N), cpu: math.NaN(), allocs: res.AllocsPerOp()}
	if cpuOK {
		s.cpu = float64(cpu) / float64(res.N)
	}
	return s, nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// formatNs prints a duration in ns with a readable unit.
func formatNs(ns float64) string {
	switch {
	case math.IsNaN(ns):
		return "?"
	case ns >= 1e9:
		return fmt.Sprintf("%.2f s", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.2f µs", ns/1e3)
	}
	return fmt.Sprintf("%.0f ns", ns)
}

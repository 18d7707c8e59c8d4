package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
)

// The batching target: a batched call of scale on BatchSize elements of
// BatchElemBytes, through Host.Do (Request.Batch), with batching parallel
// (the elements split over pooled instances) against batching sequential
// (the same entry, one element after another).

// The batch the target measures.
const (
	BatchSize      = 64
	BatchElemBytes = 64 << 10
)

// BatchResult is the batched call on one engine with at most Parallelism
// elements at once (a pool of that many instances, bounded by
// GOMAXPROCS), against the sequential rule, measured in the same
// interleaved repetitions.
type BatchResult struct {
	Engine      string
	Parallelism int
	// Parallel and Sequential are the wall ns of one batched call, per
	// repetition; Speedup is the median over repetitions of sequential /
	// parallel of the same repetition.
	Parallel, Sequential []float64
	Speedup              float64
	// ParallelCPU and SequentialCPU are the process CPU ns per batch, per
	// repetition (cpu / wall is how many cores a batch kept busy).
	ParallelCPU, SequentialCPU []float64
	// CPURatio is parallel / sequential process CPU time per batch (the
	// work parallelism adds), the median over repetitions.
	CPURatio float64
	// Ceiling is what the machine allowed in the same repetitions: the
	// median of one goroutine's time over Parallelism goroutines' time for
	// the same pure-Go loop, split between them. On an idle machine with
	// that many cores it is about Parallelism; other work on the machine
	// lowers it, and the batch's speedup with it.
	Ceiling float64
	// CopyCeiling is the same for a pure-Go copy of the batch's bytes (its
	// inputs in and its outputs out, as the batched call's copies are),
	// split between the goroutines: what the machine's memory allowed
	// parallel copies in the same repetitions. A batch whose kernel is
	// faster than its copies is bound by this one, not by Ceiling.
	CopyCeiling float64
	// OfCeiling is the speedup as a share of what the machine allowed:
	// the median over repetitions of the repetition's speedup over its
	// own Ceiling (1: the batch parallelised as well as pure Go did).
	OfCeiling float64
	Err       error
}

// batchParallelisms are the parallelisms measured: 1, 2, 4, ... up to
// GOMAXPROCS, and GOMAXPROCS itself.
func batchParallelisms() []int {
	var ps []int
	for p := 1; p < runtime.GOMAXPROCS(0); p *= 2 {
		ps = append(ps, p)
	}
	return append(ps, runtime.GOMAXPROCS(0))
}

// MeasureBatch measures the batched call on one engine at every
// parallelism of batchParallelisms, reps times, interleaving the
// sequential case with the parallel ones in every repetition; each
// measurement runs batched calls for at least sampleTime.
func MeasureBatch(ctx context.Context, engine string, reps int, sampleTime time.Duration) []BatchResult {
	ps := batchParallelisms()
	res := make([]BatchResult, len(ps))
	for i, p := range ps {
		res[i] = BatchResult{Engine: engine, Parallelism: p, Speedup: math.NaN(), CPURatio: math.NaN(), Ceiling: math.NaN(), CopyCeiling: math.NaN(), OfCeiling: math.NaN()}
	}
	fail := func(err error) []BatchResult {
		for i := range res {
			res[i].Err = err
		}
		return res
	}
	wasm, err := KernelsModule()
	if err != nil {
		return fail(err)
	}
	dir, err := os.MkdirTemp("", "callbox-bench-batch-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	// One host: callback "seq" is sequential, "par<p>" parallel with a
	// pool of p.
	names := []string{"seq"}
	for _, p := range ps {
		names = append(names, fmt.Sprintf("par%d", p))
	}
	h, err := newHost(ctx, dir, wasm, func(name string) config.Callback {
		cb := config.DefaultCallback()
		cb.Name, cb.Export, cb.Engine, cb.Module = name, "scale", engine, "bench-kernels.wasm"
		cb.Limits.Timeout, cb.Limits.MaxMemory = BenchTimeout, 256<<20
		cb.MaxInstances = 1
		if name != "seq" {
			cb.Batching = config.BatchingParallel
			fmt.Sscanf(name, "par%d", &cb.MaxInstances)
		}
		return cb
	}, names...)
	if err != nil {
		return fail(err)
	}
	defer h.Close(ctx)

	const n = BatchElemBytes / 4
	xs, fs := make([]float32, BatchSize*n), make([]float32, BatchSize)
	for i := range xs {
		xs[i] = float32(i%1000) / 7
	}
	for i := range fs {
		fs[i] = float32(i%5) + 0.5
	}
	ins := []host.Tensor{abi.From(xs, BatchSize, n), abi.From(fs, BatchSize)}
	want := make([]float32, len(xs))
	for i := range want {
		want[i] = xs[i] * fs[i/n]
	}
	runners := make([]*runner, len(names))
	k := 1
	for i, name := range names {
		out := make([]float32, len(xs))
		outs := []host.Tensor{abi.From(out, BatchSize, n)}
		r := &runner{op: func() error {
			_, err := h.Do(ctx, &host.Request{Callback: name, Inputs: ins, Outputs: outs, Batch: true})
			return err
		}}
		// Warm-up, and the result checked once.
		if err := r.op(); err != nil {
			return fail(err)
		}
		// The calls per measurement: enough for sampleTime sequentially.
		if name == "seq" {
			if k, err = calibrate(r, sampleTime); err != nil {
				return fail(err)
			}
		}
		if !slices.Equal(out, want) {
			return fail(fmt.Errorf("%s: the batched call's result differs from Go's", name))
		}
		runners[i] = r
	}
	// The control: the same pure-Go work on 1 and on p goroutines.
	spins := make([]*runner, len(ps)+1)
	spins[0] = spinRunner(1)
	for i, p := range ps {
		spins[i+1] = spinRunner(p)
	}
	ks, err := calibrate(spins[0], sampleTime)
	if err != nil {
		return fail(err)
	}
	// The memory control: the batch's copies alone, in pure Go.
	copies := make([]*runner, len(ps)+1)
	copies[0] = copyRunner(1, len(xs)*4)
	for i, p := range ps {
		copies[i+1] = copyRunner(p, len(xs)*4)
	}
	kc, err := calibrate(copies[0], sampleTime)
	if err != nil {
		return fail(err)
	}
	ratios := make([][]float64, len(ps))
	cpus := make([][]float64, len(ps))
	ceilings := make([][]float64, len(ps))
	copyCeilings := make([][]float64, len(ps))
	ofCeilings := make([][]float64, len(ps))
	for rep := 0; rep < reps && ctx.Err() == nil; rep++ {
		s := make([]sample, len(names))
		for i, r := range runners {
			if s[i], err = timeOps(r, k); err != nil {
				return fail(err)
			}
		}
		c := make([]sample, len(spins))
		for i, r := range spins {
			if c[i], err = timeOps(r, ks); err != nil {
				return fail(err)
			}
		}
		for i := range ps {
			ceilings[i] = append(ceilings[i], c[0].ns/c[i+1].ns)
		}
		m := make([]sample, len(copies))
		for i, r := range copies {
			if m[i], err = timeOps(r, kc); err != nil {
				return fail(err)
			}
		}
		for i := range ps {
			copyCeilings[i] = append(copyCeilings[i], m[0].ns/m[i+1].ns)
		}
		for i := range ps {
			res[i].Sequential = append(res[i].Sequential, s[0].ns)
			res[i].Parallel = append(res[i].Parallel, s[i+1].ns)
			res[i].SequentialCPU = append(res[i].SequentialCPU, s[0].cpu)
			res[i].ParallelCPU = append(res[i].ParallelCPU, s[i+1].cpu)
			ratios[i] = append(ratios[i], s[0].ns/s[i+1].ns)
			ofCeilings[i] = append(ofCeilings[i], (s[0].ns/s[i+1].ns)/(c[0].ns/c[i+1].ns))
			cpus[i] = append(cpus[i], s[i+1].cpu/s[0].cpu)
		}
	}
	for i := range res {
		res[i].Speedup, res[i].CPURatio, res[i].Ceiling = median(ratios[i]), median(cpus[i]), median(ceilings[i])
		res[i].CopyCeiling, res[i].OfCeiling = median(copyCeilings[i]), median(ofCeilings[i])
	}
	return res
}

// spinWork is the control's work per operation: about a millisecond of
// integer arithmetic.
const spinWork = 1 << 20

// spinRunner is the control: spinWork iterations of a loop with no memory
// traffic, split over p goroutines.
func spinRunner(p int) *runner {
	sink := make([]uint64, p)
	op := func() error {
		var wg sync.WaitGroup
		for g := range p {
			wg.Add(1)
			go func() {
				defer wg.Done()
				x := uint64(g)
				for range spinWork / p {
					x = x*6364136223846793005 + 1442695040888963407
				}
				sink[g] = x
			}()
		}
		wg.Wait()
		return nil
	}
	return &runner{op: op}
}

// copyRunner is the memory control: a batch's copies (bytes of input
// copied in, the outputs' bytes saved into the undo log, and as many of
// output copied out, as a guarded batch does) in pure Go, split over p
// goroutines.
func copyRunner(p, bytes int) *runner {
	src, scratch, dst := make([]byte, bytes), make([]byte, bytes), make([]byte, bytes)
	guest := make([]byte, bytes)
	op := func() error {
		var wg sync.WaitGroup
		for g := range p {
			lo, hi := g*bytes/p, (g+1)*bytes/p
			wg.Add(1)
			go func() {
				defer wg.Done()
				copy(guest[lo:hi], src[lo:hi])   // inputs into guest memory
				copy(scratch[lo:hi], dst[lo:hi]) // the outputs' bytes saved (undo log)
				copy(dst[lo:hi], guest[lo:hi])   // results out of it
			}()
		}
		wg.Wait()
		return nil
	}
	return &runner{op: op}
}

// calibrate is how many operations of r take at least d.
func calibrate(r *runner, d time.Duration) (int, error) {
	start := time.Now()
	for k := 1; ; k++ {
		if err := r.op(); err != nil {
			return 0, err
		}
		if el := time.Since(start); el >= d/4 {
			return max(1, int(float64(k)*float64(d)/float64(el)+0.5)), nil
		}
	}
}

// timeOps times k operations of r: wall and process CPU time per
// operation.
func timeOps(r *runner, k int) (sample, error) {
	runtime.GC()
	c0, ok0 := processCPU()
	start := time.Now()
	for i := 0; i < k; i++ {
		if err := r.op(); err != nil {
			return sample{}, err
		}
	}
	s := sample{ns: float64(time.Since(start).Nanoseconds()) / float64(k), cpu: math.NaN()}
	if c1, ok1 := processCPU(); ok0 && ok1 {
		s.cpu = float64(c1-c0) / float64(k)
	}
	return s, nil
}

// batchTarget is the batching target: at 2 elements at once the parallel
// batch's speedup over the sequential one is at least 0.9x of the speedup
// pure Go got on 2 goroutines in the same repetitions, on every engine.
// (It was an absolute 1.8x; the VM's second core comes and goes, so the
// target is relative to the control measured beside it.)
func (r *Report) batchTarget() Target {
	t := Target{N: 10, Title: fmt.Sprintf("parallel batch of %d x %s, 2 at once: its speedup over sequential >= 0.9x of pure Go's on 2 goroutines in the same reps", BatchSize, config.FormatSize(BatchElemBytes))}
	for _, e := range Engines() {
		var two *BatchResult
		var scale []string
		for i := range r.Batch {
			b := &r.Batch[i]
			if b.Engine != e || b.Err != nil {
				continue
			}
			scale = append(scale, fmt.Sprintf("%d: %s", b.Parallelism, fmtRatio(b.Speedup)))
			if b.Parallelism == 2 {
				two = b
			}
		}
		c := Check{What: e + ": the batch's speedup (sequential / parallel wall time, 2 at once) / pure Go's", Limit: ">= 0.9x", Measured: two != nil}
		if two != nil {
			c.Met = two.OfCeiling >= 0.9
			c.Value = fmt.Sprintf("%s of pure Go's (median of %d interleaved reps' ratios; the batch %s: %s vs %s per batch; pure Go on 2 goroutines %s, the batch's copies alone %s; cpu %s of sequential; by parallelism %s)",
				fmtRatio(two.OfCeiling), len(two.Parallel), fmtRatio(two.Speedup), formatNs(median(two.Sequential)), formatNs(median(two.Parallel)),
				fmtRatio(two.Ceiling), fmtRatio(two.CopyCeiling), fmtRatio(two.CPURatio), strings.Join(scale, ", "))
		}
		t.Checks = append(t.Checks, c)
	}
	return t
}

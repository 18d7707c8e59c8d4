package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

// Report is one run of the whole suite: the table, the target
// measurements and where it ran.
type Report struct {
	Machine     Machine
	Command     string
	Started     time.Time
	Duration    time.Duration
	BenchTime   time.Duration
	Reps        int
	Results     []Result
	Accuracy    []AccuracyResult
	Instantiate []InstantiateResult
	Cache       []CacheResult
	Batch       []BatchResult      // batch.go
	UserKernels []UserKernelResult // userkernels.go
	Targets     []Target
	// MakeDuration is the whole `make bench`, when the caller knows it.
	MakeDuration time.Duration
	// GoBench is the output of the micro-benchmarks run before, if any.
	GoBench string
	// XLABench is the Markdown that python/bench_jax.py wrote in the same
	// make bench: callbox through XLA beside JAX's callbacks and a raw C
	// FFI handler, if any.
	XLABench string
	// ElixirBench is the output of make elixir-bench from the same make
	// bench: the NIF's 1 KiB call beside the C API's in the same VM, if
	// any (target 15).
	ElixirBench string
}

// SuiteOptions configure RunSuite.
type SuiteOptions struct {
	Options
	// Command is the command line to print as the way to reproduce.
	Command string
	// AccuracyRuns and AccuracyTimeout configure the timeout-accuracy
	// target (defaults 200 and 10ms).
	AccuracyRuns    int
	AccuracyTimeout time.Duration
	// CacheReps is how many warm-cache compiles the cache target times
	// (default 5).
	CacheReps int
	// SkipTargets runs the table only.
	SkipTargets bool
	// Targets, when set, keeps the targets' measurements whose name
	// ("instantiate", "accuracy", "cache", "batch", "user") it matches.
	Targets *regexp.Regexp
	// GoBench is the output of the micro-benchmarks run before (make
	// bench), for the report and the targets read from it (9).
	GoBench string
	// XLABench is the Markdown of python/bench_jax.py from the same make
	// bench, included in the report as it is.
	XLABench string
	// ElixirBench is the output of make elixir-bench from the same make
	// bench, for the report and target 15.
	ElixirBench string
}

// runTarget reports whether the suite runs the named target measurement.
func (o SuiteOptions) runTarget(name string) bool {
	return !o.SkipTargets && (o.Targets == nil || o.Targets.MatchString(name))
}

// RunSuite runs the table and the target measurements.
func RunSuite(ctx context.Context, opts SuiteOptions) (*Report, error) {
	if opts.AccuracyRuns <= 0 {
		opts.AccuracyRuns = 200
	}
	if opts.AccuracyTimeout <= 0 {
		opts.AccuracyTimeout = 10 * time.Millisecond
	}
	if opts.CacheReps <= 0 {
		opts.CacheReps = 5
	}
	rep := &Report{Machine: ReadMachine(), Command: opts.Command, Started: time.Now()}
	progress := func(format string, args ...any) {
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, format+"\n", args...)
		}
	}
	progress("table: %d workloads x %d variants", len(Workloads()), len(Variants()))
	results, err := Run(ctx, opts.Options)
	rep.Results = results
	if opts.Options.BenchTime <= 0 {
		opts.Options.BenchTime = DefaultBenchTime
	}
	if opts.Options.Reps <= 0 {
		opts.Options.Reps = DefaultReps
	}
	rep.BenchTime, rep.Reps = opts.Options.BenchTime, opts.Options.Reps
	if err != nil {
		return rep, err
	}
	if opts.runTarget("instantiate") {
		for _, e := range Engines() {
			progress("target: fresh instantiate on %s", e)
			for _, m := range InstantiateMemories {
				rep.Instantiate = append(rep.Instantiate, MeasureInstantiate(ctx, e, m))
			}
		}
	}
	if opts.runTarget("accuracy") {
		for _, e := range Engines() {
			// The baseline (no other guests) tells this machine's own
			// scheduling delays from what busy Go threads add.
			progress("target: timeout accuracy on %s (%d runs idle, %d with %d burners)", e, opts.AccuracyRuns, opts.AccuracyRuns, runtime.GOMAXPROCS(0))
			rep.Accuracy = append(rep.Accuracy, MeasureTimeoutAccuracy(ctx, e, opts.AccuracyRuns, opts.AccuracyTimeout, runtime.GOMAXPROCS(0))...)
		}
	}
	if opts.runTarget("cache") {
		wasm := CacheModule()
		for _, e := range Engines() {
			progress("target: module cache on %s (%.1f MB module)", e, float64(len(wasm))/1e6)
			rep.Cache = append(rep.Cache, MeasureCache(ctx, e, wasm, opts.CacheReps))
		}
	}
	if opts.runTarget("batch") {
		for _, e := range Engines() {
			progress("target: parallel batch of %d x %s on %s", BatchSize, config.FormatSize(BatchElemBytes), e)
			rep.Batch = append(rep.Batch, MeasureBatch(ctx, e, rep.Reps, 4*rep.BenchTime)...)
		}
	}
	if opts.runTarget("user") {
		progress("target: users' kernels (%d kernels, every engine, raw loops beside)", len(UserKernels))
		rep.UserKernels = MeasureUserKernels(ctx, rep.Reps, 2*rep.BenchTime)
	}
	rep.Machine.LoadAfter = readLoad()
	rep.Duration = time.Since(rep.Started)
	rep.GoBench = opts.GoBench
	rep.XLABench = opts.XLABench
	rep.ElixirBench = opts.ElixirBench
	rep.Targets = rep.evaluate()
	return rep, ctx.Err()
}

// Machine describes where the suite ran.
type Machine struct {
	CPU        string
	Cores      int
	GOMAXPROCS int
	Memory     string
	OS         string
	Go         string
	Engines    map[string]string // engine or library -> version
	LoadBefore string            // /proc/loadavg at the start: other work on the machine
	LoadAfter  string
}

// ReadMachine reads the machine's description (Linux /proc where there is
// one).
func ReadMachine() Machine {
	m := Machine{
		CPU:        cpuModel(),
		Cores:      runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		Memory:     memTotal(),
		OS:         runtime.GOOS + "/" + runtime.GOARCH,
		Go:         runtime.Version(),
		LoadBefore: readLoad(),
		Engines: map[string]string{
			config.EngineWazero: engines.Version(config.EngineWazero),
			"extism go-sdk":     moduleVersion("github.com/extism/go-sdk"),
		},
	}
	if engines.WasmtimeAvailable() {
		m.Engines[config.EngineWasmtime] = "wasmtime-go " + engines.Version(config.EngineWasmtime)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.OS += ", Linux " + strings.TrimSpace(string(b))
	}
	return m
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		var kb uint64
		if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kb); err == nil {
			return fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
		}
	}
	return "?"
}

func readLoad() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func moduleVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "?"
}

// result returns a case's result, or nil.
func (r *Report) result(workload, variant string) *Result {
	for i := range r.Results {
		if r.Results[i].Workload.ID == workload && r.Results[i].Variant.ID == variant && r.Results[i].Err == nil && r.Results[i].NsPerOp > 0 {
			return &r.Results[i]
		}
	}
	return nil
}

// ratio is the cost of case a over case b of one workload: the median,
// over the interleaved rounds, of the ratio within each round (round i of
// a over round i of b, measured moments apart), so a round disturbed by
// other work on the machine moves one ratio, not the result. NaN when
// either case is missing.
func (r *Report) ratio(workload, a, b string) float64 {
	return medianOrNaN(r.roundRatios(workload, a, b, false))
}

// ratioWall is ratio over the wall times per operation.
func (r *Report) ratioWall(workload, a, b string) float64 {
	return medianOrNaN(r.roundRatios(workload, a, b, true))
}

// medianOrNaN is the median of xs, NaN when there are none.
func medianOrNaN(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return median(xs)
}

// ratioRange is the lowest and highest per-round ratio of ratio.
func (r *Report) ratioRange(workload, a, b string) (lo, hi float64, n int) {
	rs := r.roundRatios(workload, a, b, false)
	if len(rs) == 0 {
		return math.NaN(), math.NaN(), 0
	}
	return slices.Min(rs), slices.Max(rs), len(rs)
}

// roundRatios is a's cost over b's in each round both were measured in
// (wall: of wall times); nil when either case is missing.
func (r *Report) roundRatios(workload, a, b string, wall bool) []float64 {
	x, y := r.result(workload, a), r.result(workload, b)
	if x == nil || y == nil {
		return nil
	}
	xs, ys := x.roundCosts(wall), y.roundCosts(wall)
	n := min(len(xs), len(ys))
	if n == 0 {
		return []float64{x.Cost() / y.Cost()}
	}
	rs := make([]float64, n)
	for i := range rs {
		rs[i] = xs[i] / ys[i]
	}
	return rs
}

// rawOf is the raw variant a result is compared with: the raw engine it
// runs on.
func rawOf(v Variant) string {
	if v.SIMD {
		return "" // the raw variants run the scalar kernels
	}
	switch v.Group {
	case GroupCallbox, GroupExtism:
		return "raw-" + v.Engine
	}
	return ""
}

// WriteText prints the table as plain text, one block per workload.
func (r *Report) WriteText(w io.Writer) {
	for _, wl := range Workloads() {
		rows := r.rows(wl)
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s (%s of input per op)\n", wl.Name, config.FormatSize(uint64(rows[0].res.Bytes)))
		fmt.Fprintf(w, "  %-46s %11s %11s %11s %9s %9s %9s %8s %7s\n", "variant", "time/op", "median", "cpu/op", "MB/s", "x native", "x copy", "x raw", "spread")
		for _, row := range rows {
			if row.res.Err != nil {
				fmt.Fprintf(w, "  %-46s failed: %v\n", row.res.Variant.Name, row.res.Err)
				continue
			}
			fmt.Fprintf(w, "  %-46s %11s %11s %11s %9.0f %9s %9s %8s %7s\n", row.res.Variant.Name, formatNs(row.res.NsPerOp),
				formatNs(row.res.Median), formatNs(row.res.CPUPerOp), row.res.MBPerSec(), fmtRatio(row.native), fmtRatio(row.copy), fmtRatio(row.raw), fmtRatio(row.res.Spread()))
		}
	}
	fmt.Fprintln(w)
	for _, t := range r.Targets {
		fmt.Fprintf(w, "target %d: %-6s %s\n", t.N, t.Status(), t.Title)
		for _, c := range t.Checks {
			fmt.Fprintf(w, "    %-7s %-52s %s (%s)\n", c.status(), c.What, c.Value, c.Limit)
		}
	}
}

type row struct {
	res               *Result
	native, copy, raw float64
}

func (r *Report) rows(wl Workload) []row {
	var rows []row
	for i := range r.Results {
		res := &r.Results[i]
		if res.Workload.ID != wl.ID {
			continue
		}
		rw := row{res: res, native: math.NaN(), copy: math.NaN(), raw: math.NaN()}
		if res.Err == nil {
			rw.native = r.ratio(wl.ID, res.Variant.ID, "go-native")
			rw.copy = r.ratio(wl.ID, res.Variant.ID, "go-copy")
			if raw := rawOf(res.Variant); raw != "" {
				rw.raw = r.ratio(wl.ID, res.Variant.ID, raw)
			}
		}
		rows = append(rows, rw)
	}
	return rows
}

func fmtRatio(x float64) string {
	switch {
	case math.IsNaN(x):
		return ""
	case x >= 100:
		return fmt.Sprintf("%.0fx", x)
	case x >= 10:
		return fmt.Sprintf("%.1fx", x)
	}
	return fmt.Sprintf("%.2fx", x)
}

func formatDuration(d time.Duration) string { return formatNs(float64(d.Nanoseconds())) }

package bench

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/seed4b3e0ccb/callbox/config"
)

// Target is one of the performance targets, with what was
// measured for it.
type Target struct {
	N      int
	Title  string
	Checks []Check
}

// Check is one measured condition of a target.
type Check struct {
	What     string // "wazero", "wasmtime 32 MiB", ...
	Value    string // the measurement, e.g. "2.46 µs" or "1.31x"
	Limit    string // e.g. "<= 1.5 µs"
	Met      bool
	Measured bool
}

func (c Check) status() string {
	switch {
	case !c.Measured:
		return "n/a"
	case c.Met:
		return "met"
	}
	return "MISSED"
}

// Met reports whether every check of the target was measured and met.
func (t Target) Met() bool {
	if len(t.Checks) == 0 {
		return false
	}
	for _, c := range t.Checks {
		if !c.Measured || !c.Met {
			return false
		}
	}
	return true
}

// Status is "met", "missed" or "n/a" (nothing measured).
func (t Target) Status() string {
	measured := false
	for _, c := range t.Checks {
		measured = measured || c.Measured
	}
	switch {
	case !measured:
		return "n/a"
	case t.Met():
		return "met"
	}
	return "MISSED"
}

// ratioCheck is a check of a ratio of costs against a limit (le: at most;
// else at least). wall, the same ratio of wall times, is shown beside it
// when it differs.
func ratioCheck(what string, x, wall, limit float64, le bool) Check {
	c := Check{What: what, Measured: !math.IsNaN(x)}
	if le {
		c.Limit = fmt.Sprintf("<= %.3gx", limit)
		c.Met = x <= limit
	} else {
		c.Limit = fmt.Sprintf(">= %.3gx", limit)
		c.Met = x >= limit
	}
	if c.Measured {
		c.Value = fmtRatio(x)
		if c.Value == fmtRatio(limit) {
			c.Value = fmt.Sprintf("%.3fx", x) // on the limit: show which side
		}
		if !math.IsNaN(wall) && fmtRatio(wall) != c.Value {
			c.Value += " (wall " + fmtRatio(wall) + ")"
		}
	}
	return c
}

// roundCheck is ratioCheck of cases a over b of a workload, judged on the
// median of the per-round ratios, with their range beside it.
func (r *Report) roundCheck(what, workload, a, b string, limit float64, le bool) Check {
	x, wall := r.ratios(workload, a, b)
	c := ratioCheck(what, x, wall, limit, le)
	if lo, hi, n := r.ratioRange(workload, a, b); c.Measured && n > 1 {
		c.Value += fmt.Sprintf(" [median of %d rounds; %s-%s]", n, fmtRatio(lo), fmtRatio(hi))
	}
	return c
}

// ratios is ratio and ratioWall of two cases.
func (r *Report) ratios(workload, a, b string) (cost, wall float64) {
	return r.ratio(workload, a, b), r.ratioWall(workload, a, b)
}

func durationCheck(what string, d, limit time.Duration, measured bool) Check {
	c := Check{What: what, Limit: "<= " + formatDuration(limit), Measured: measured, Met: d <= limit}
	if measured {
		c.Value = formatDuration(d)
	}
	return c
}

// baseline is the engine's accuracy result with no burners.
func (r *Report) baseline(engine string) *AccuracyResult {
	for i := range r.Accuracy {
		if a := &r.Accuracy[i]; a.Engine == engine && a.Burners == 0 && a.Err == nil {
			return a
		}
	}
	return nil
}

// costString is a result's cost, with its wall time beside.
func costString(r *Result) string {
	if r.Cost() == r.NsPerOp {
		return formatNs(r.NsPerOp)
	}
	return formatNs(r.Cost()) + " cpu (wall " + formatNs(r.NsPerOp) + ")"
}

// medianCostString is a result's median cost, with the fastest
// repetition's and the spread beside it.
func medianCostString(r *Result) string {
	return fmt.Sprintf("%s median (fastest %s, spread %s)", formatNs(r.MedianCost()), costString(r), fmtRatio(r.Spread()))
}

// evaluate checks every target against the run's measurements.
func (r *Report) evaluate() []Target {
	engines := Engines()
	var ts []Target

	t := Target{N: 1, Title: "tiny 1 KiB call with a timeout <= 1.5 µs on both engines"}
	for _, e := range engines {
		res := r.result("tiny-1KiB", "callbox-"+e)
		c := Check{What: e + " (pooled, timeout, copy)", Limit: "<= 1.5 µs", Measured: res != nil}
		if res != nil {
			c.Value, c.Met = medianCostString(res), res.MedianCost() <= 1500
		}
		t.Checks = append(t.Checks, c)
	}
	ts = append(ts, t)

	t = Target{N: 2, Title: "4 and 32 MiB round trips <= 1.25x raw on the same engine; zero-copy >= 2.5x faster than copying at 32 MiB"}
	for _, e := range engines {
		for _, wl := range []string{"scale-4MiB", "scale-32MiB"} {
			t.Checks = append(t.Checks, r.roundCheck(fmt.Sprintf("%s %s: callbox / raw", e, wl), wl, "callbox-"+e, "raw-"+e, 1.25, true))
		}
	}
	for _, e := range engines {
		t.Checks = append(t.Checks, r.roundCheck(e+" scale-32MiB: copying / zero-copy", "scale-32MiB", "callbox-"+e, "callbox-"+e+":zero-copy", 2.5, false))
	}
	ts = append(ts, t)

	t = Target{N: 3, Title: "matmul with a timeout <= 1.2x no timeout on wasmtime, <= 1.5x on wazero"}
	for _, e := range engines {
		limit := 1.5
		if e == config.EngineWasmtime {
			limit = 1.2
		}
		t.Checks = append(t.Checks, r.roundCheck(e+" matmul-256: timeout / no timeout", "matmul-256", "callbox-"+e, "callbox-"+e+":no-timeout", limit, true))
	}
	ts = append(ts, t)

	t = Target{N: 4, Title: "a runaway guest stopped within 5 ms of its deadline at p99 while guests busy every Go thread"}
	for _, a := range r.Accuracy {
		if a.Burners == 0 {
			continue // the machine's baseline, shown beside
		}
		c := durationCheck(fmt.Sprintf("%s: p99 lateness with %d burners", a.Engine, a.Burners), a.P99, 5*time.Millisecond, a.Err == nil)
		if a.Err != nil {
			c.Value = "error: " + a.Err.Error()
		} else {
			c.Value += fmt.Sprintf(" (p50 %s, max %s, %d runs", formatDuration(a.P50), formatDuration(a.Max), a.Runs)
			if b := r.baseline(a.Engine); b != nil {
				c.Value += fmt.Sprintf("; no burners: p99 %s", formatDuration(b.P99))
			}
			c.Value += ")"
		}
		t.Checks = append(t.Checks, c)
	}
	ts = append(ts, t)

	t = Target{N: 5, Title: "fresh instance of a module with <= 1 MiB memory < 50 µs on the default engine (wazero)"}
	for _, in := range r.Instantiate {
		if in.Engine == config.EngineWazero && in.MemoryBytes <= 1<<20 {
			c := Check{What: fmt.Sprintf("wazero instantiate + close, %s memory", config.FormatSize(uint64(in.MemoryBytes))), Limit: "< 50 µs", Measured: in.Err == nil}
			if in.Err == nil {
				c.Value, c.Met = formatNs(in.Cost())+" cpu (wall "+formatNs(in.NsPerOp)+")", in.Cost() < 50e3
			}
			t.Checks = append(t.Checks, c)
		}
	}
	if fresh := r.result("tiny-1KiB", "callbox-wazero:fresh"); fresh != nil {
		t.Checks = append(t.Checks, Check{What: "wazero fresh-isolation tiny call, whole (128 KiB memory)", Limit: "< 50 µs",
			Value: medianCostString(fresh), Met: fresh.MedianCost() < 50e3, Measured: true})
	}
	ts = append(ts, t)

	t = Target{N: 6, Title: "module cache hit for a 5 MB module <= 1 ms on wasmtime, <= 100 ms on wazero"}
	for _, c := range r.Cache {
		limit := 100 * time.Millisecond
		if c.Engine == config.EngineWasmtime {
			limit = time.Millisecond
		}
		ch := durationCheck(c.Engine+": engine Compile from a warm cache (cpu)", c.Hit, limit, c.Err == nil)
		if c.Err != nil {
			ch.Value = "error: " + c.Err.Error()
		} else {
			ch.Value += fmt.Sprintf(" (wall %s; host LoadModule %s; cold compile %s)", formatDuration(c.HitWall), formatDuration(c.HitLoad), formatDuration(c.Cold))
		}
		t.Checks = append(t.Checks, ch)
	}
	ts = append(ts, t)

	t = Target{N: 7, Title: "faster than Extism on every tensor workload above 1 KiB"}
	for _, e := range engines {
		for _, wl := range []string{"scale-64KiB", "scale-4MiB", "scale-32MiB", "matmul-256", "softmax-1024x1024"} {
			c := r.roundCheck(fmt.Sprintf("%s %s: callbox / Extism", e, wl), wl, "callbox-"+e, "extism", 1, true)
			c.Limit, c.Met = "< 1x", r.ratio(wl, "callbox-"+e, "extism") < 1
			t.Checks = append(t.Checks, c)
		}
	}
	ts = append(ts, t)

	t = Target{N: 8, Title: "100-call ordered chain of tiny calls: synchronous (Chain.Invoke) <= 1.05x the sum of its calls, asynchronous (Submit, Barrier) <= 1.15x"}
	for _, e := range engines {
		t.Checks = append(t.Checks, r.roundCheck(e+" chain (Submit, Barrier) / 100 x Invoke", "chain-100", "callbox-"+e, "callbox-"+e+":calls", 1.15, true))
		t.Checks = append(t.Checks, r.roundCheck(e+" chain (Chain.Invoke) / 100 x Invoke", "chain-100", "callbox-"+e+":chain-invoke", "callbox-"+e+":calls", 1.05, true))
	}
	ts = append(ts, t)

	ts = append(ts, r.doorTarget(), r.batchTarget(), r.simdTarget())

	t = Target{N: 12, Title: "wazero metering: the metered module's matmul <= 1.2x the plain module's, called by hand"}
	t.Checks = append(t.Checks, r.roundCheck("wazero matmul-256: metered / plain", "matmul-256", "raw-wazero-metered", "raw-wazero", 1.2, true))
	ts = append(ts, t)
	if len(r.UserKernels) > 0 {
		ts = append(ts, r.userKernelsTarget())
	}
	return append(ts, r.processTarget(), r.elixirTarget(), r.profilerTarget())
}

// profilerTarget is the guest profiler's overhead (issue 47), from
// BenchmarkGuestProfiler (host/profile_bench_test.go): profiled against
// plain calls of a loop-bound and a call-bound guest, in interleaved
// rounds. On wasmtime a profiled module is metered (the profiler counts
// fuel) where a plain one without fuel is not, so its loop-bound ratio
// includes the meter's cost.
func (r *Report) profilerTarget() Target {
	t := Target{N: 16, Title: "guest profiler: a loop-bound guest profiled <= 1.1x unprofiled on wazero, <= 1.5x on wasmtime (the meter included); a guest call's two reports measured"}
	for _, e := range Engines() {
		m := goBenchMetrics(r.GoBench, "BenchmarkGuestProfiler/"+e)
		x, ok := m["loops-ratio"]
		if !ok {
			x = math.NaN()
		}
		limit := 1.1
		if e == "wasmtime" {
			limit = 1.5
		}
		c := ratioCheck(e+" loop-bound guest: profiled / plain", x, math.NaN(), limit, true)
		if ok {
			c.Value += fmt.Sprintf(" (a call-bound guest, 10,000 guest calls a call: %s; each guest call's reports: %s)", fmtRatio(m["calls-ratio"]), formatNs(m["report-ns"]))
		}
		t.Checks = append(t.Checks, c)
	}
	return t
}

// elixirLine matches a result line of elixir/bench/call_bench.exs: the
// callback, its engine, the variant, the median ns per call, the fastest
// round's, the median of the rounds' ratios to capi and the best round's
// ratio.
var elixirLine = regexp.MustCompile(`^elixir (\S+) (\S+) 1KiB (\S+) median_ns_per_call (\S+) min (\S+) ratio_to_capi median (\S+) best_round (\S+)$`)

// elixirResult is one variant of one callback in make elixir-bench's
// output: median ns per call and median ratio to the C API's call.
type elixirResult struct{ ns, ratio, best float64 }

// elixirResults reads make elixir-bench's output: engine -> variant ->
// result (the bench runs one callback per engine).
func elixirResults(out string) map[string]map[string]elixirResult {
	res := map[string]map[string]elixirResult{}
	for _, line := range strings.Split(out, "\n") {
		m := elixirLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		var v [3]float64
		ok := true
		for i, f := range []string{m[4], m[6], m[7]} {
			x, err := strconv.ParseFloat(f, 64)
			ok = ok && err == nil
			v[i] = x
		}
		if !ok {
			continue
		}
		if res[m[2]] == nil {
			res[m[2]] = map[string]elixirResult{}
		}
		res[m[2]][m[3]] = elixirResult{ns: v[0], ratio: v[1], best: v[2]}
	}
	return res
}

// elixirTarget is the Elixir door's target, from make elixir-bench's
// output (elixir/bench/call_bench.exs: Callbox.call/3 against callbox_call
// from C inside the same VM, in interleaved rounds).
func (r *Report) elixirTarget() Target {
	t := Target{N: 15, Title: "Elixir: a 1 KiB call through the NIF (Callbox.call/3) <= 1.5x the C API's call in the same VM, on both engines"}
	res := elixirResults(r.ElixirBench)
	for _, e := range Engines() {
		call, ok := res[e]["call"]
		x := math.NaN()
		if ok {
			x = call.ratio
		}
		c := ratioCheck(e+": Callbox.call/3 / callbox_call from C", x, math.NaN(), 1.5, true)
		if ok {
			c.Value += fmt.Sprintf(" (%s against %s per call, medians of the rounds; best round %s", formatNs(call.ns), formatNs(res[e]["capi"].ns), fmtRatio(call.best))
			if many, ok := res[e]["many"]; ok {
				c.Value += fmt.Sprintf("; call_many, per call: %s", fmtRatio(many.ratio))
			}
			if h, ok := res[e]["handoff"]; ok {
				c.Value += fmt.Sprintf("; a thread hand-off with no call: %s", formatNs(h.ns))
			}
			c.Value += ")"
		}
		t.Checks = append(t.Checks, c)
	}
	return t
}

// processTarget is isolation: process against in process (issue 33),
// from the host's micro-benchmarks (host/process_bench_test.go), each of
// which alternates the two on one host in one run.
func (r *Report) processTarget() Target {
	t := Target{N: 14, Title: "isolation: process: a 1 KiB call <= 5 µs (the doorbell); the doorbell no slower than the socket with more callers than cores; 4 MiB <= 1.3x and 32 MiB <= 1.2x the in-process call; a worker started <= 20 ms; throughput scaling with workers on both cores (2 callers >= 1.5x one)"}
	for _, e := range Engines() {
		m := goBenchMetrics(r.GoBench, "BenchmarkProcessCall/1KiB/"+e)
		ns, ok := m["process-ns/op"]
		c := Check{What: e + " 1 KiB call in a worker", Limit: "<= 5 µs", Measured: ok, Met: ok && ns <= 5000}
		if ok {
			c.Value = fmt.Sprintf("%s (in process %s)", formatNs(ns), formatNs(m["inproc-ns/op"]))
		}
		t.Checks = append(t.Checks, c)
		for _, size := range []struct {
			name  string
			limit float64
		}{{"4MiB", 1.3}, {"32MiB", 1.2}} {
			m := goBenchMetrics(r.GoBench, "BenchmarkProcessCall/"+size.name+"/"+e)
			x, ok := m["ratio"]
			if !ok {
				x = math.NaN()
			}
			t.Checks = append(t.Checks, ratioCheck(e+" "+size.name+": in a worker / in process", x, math.NaN(), size.limit, true))
		}
		bell := goBenchMetrics(r.GoBench, "BenchmarkProcessBell/"+e)
		for _, load := range []struct{ tag, what string }{{"one", "one caller"}, {"crowd", "twice as many callers as cores"}} {
			callers := load.tag
			x, ok := bell[callers+"-speedup"]
			if !ok {
				x = math.NaN()
			}
			c := ratioCheck(e+" 1 KiB calls from "+load.what+": doorbell / socket calls/s", x, math.NaN(), 1, false)
			if ok {
				c.Value += fmt.Sprintf(" (%s against %s a call; CPU per call, host and workers: %.1f µs against %.1f)",
					formatNs(bell[callers+"-bell-ns/call"]), formatNs(bell[callers+"-socket-ns/call"]),
					bell[callers+"-bell-cpu-us"], bell[callers+"-socket-cpu-us"])
			}
			t.Checks = append(t.Checks, c)
		}
		m = goBenchMetrics(r.GoBench, "BenchmarkWorkerStart/"+e)
		us, ok := m["process-load-µs"]
		c = Check{What: e + " load with a new worker", Limit: "<= 20 ms", Measured: ok, Met: ok && us <= 20000}
		if ok {
			c.Value = fmt.Sprintf("%s (in process %s)", formatNs(us*1e3), formatNs(m["inproc-load-µs"]*1e3))
		}
		t.Checks = append(t.Checks, c)
		m = goBenchMetrics(r.GoBench, "BenchmarkProcessThroughput/"+e)
		x, ok := m["process-scaling"]
		if !ok {
			x = math.NaN()
		}
		c = ratioCheck(e+" 1 KiB calls, 2 callers / 1", x, math.NaN(), 1.5, false)
		if ok {
			c.Value += fmt.Sprintf(" (in process %s)", fmtRatio(m["inproc-scaling"]))
		}
		t.Checks = append(t.Checks, c)
	}
	return t
}

// doorTarget is the C door's target, from BenchmarkTinyDoorRatios in the
// micro-benchmarks' output (ffi/bench_test.go: InvokeInto in the test
// process against the C API call and the XLA handler from a C program, in
// interleaved rounds; it reports the median ratio and its spread).
func (r *Report) doorTarget() Target {
	t := Target{N: 9, Title: "C API call and XLA FFI handler, tiny call (1 KiB, wazero) <= 1.15x the Go API's InvokeInto"}
	m := goBenchMetrics(r.GoBench, "BenchmarkTinyDoorRatios")
	for _, d := range []struct{ what, unit, ns string }{
		{"C API (callbox_call from C) / InvokeInto", "capi/into", "capi-cpu-ns"},
		{"XLA handler (callbox_xla_ffi from C) / InvokeInto", "xla/into", "xla-cpu-ns"},
	} {
		x, ok := m[d.unit]
		c := ratioCheck(d.what, x, math.NaN(), 1.15, true)
		c.Measured = ok
		if ok {
			c.Value += fmt.Sprintf(" (cpu %s against %s; median of %d rounds, spread %s; against InvokeInto on an untimed host as the C door's are, %s: %s; the C-to-Go crossing alone: %s",
				formatNs(m[d.ns]), formatNs(m["into-cpu-ns"]), doorRounds, fmtRatio(m[d.unit+"-spread"]),
				formatNs(m["into-untimed-cpu-ns"]), fmtRatio(m[d.unit+"-untimed"]), formatNs(m["crossing-cpu-ns"]))
			if d.unit == "capi/into" && m["bridge-cpu-ns"] > 0 {
				c.Value += fmt.Sprintf("; the C API's Go half called from Go (no crossing, not the c-shared build): %s", formatNs(m["bridge-cpu-ns"]))
			}
			c.Value += ")"
		}
		t.Checks = append(t.Checks, c)
	}
	return t
}

// doorRounds is the rounds BenchmarkTinyDoorRatios runs (ffi/bench_test.go).
const doorRounds = 7

// goBenchMetrics is the metrics (unit -> value) of one benchmark's line in
// `go test -bench` output; empty when the benchmark is not there.
func goBenchMetrics(out, name string) map[string]float64 {
	m := map[string]float64{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || (f[0] != name && !strings.HasPrefix(f[0], name+"-")) {
			continue
		}
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				m[f[i+1]] = v
			}
		}
	}
	return m
}

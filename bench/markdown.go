package bench

import (
	_ "embed"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"text/template"
	"time"

	"github.com/seed4b3e0ccb/callbox/config"
)

//go:embed performance.md.tmpl
var performanceTemplate string

// WriteMarkdown writes the report (docs/PERFORMANCE.md) from
// performance.md.tmpl; chart is the chart's path relative to the report.
func (r *Report) WriteMarkdown(w io.Writer, chart string) error {
	t, err := template.New("performance").Funcs(template.FuncMap{
		"ns":       formatNs,
		"dur":      formatDuration,
		"ratio":    fmtRatio,
		"bytes":    func(n uint64) string { return config.FormatSize(uint64(n)) },
		"mb":       func(n int) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) },
		"date":     func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
		"round":    func(d time.Duration) time.Duration { return d.Round(time.Second) },
		"mdStatus": func(s string) string { return strings.ToLower(s) },
	}).Parse(performanceTemplate)
	if err != nil {
		return err
	}
	return t.Execute(w, r.view(chart))
}

// view is what the template reads.
type view struct {
	*Report
	Chart     string
	Workloads []workloadView
	Engines   []string
	Reading   []string
}

type workloadView struct {
	Workload
	InputBytes string
	Rows       []rowView
}

type rowView struct {
	Name, Time, Median, CPU, MBs, Allocs, Native, Copy, Raw, Spread string
	Err                                                             string
}

func (r *Report) view(chart string) view {
	v := view{Report: r, Chart: chart, Engines: Engines()}
	for _, wl := range Workloads() {
		rows := r.rows(wl)
		if len(rows) == 0 {
			continue
		}
		wv := workloadView{Workload: wl, InputBytes: config.FormatSize(uint64(rows[0].res.Bytes))}
		for _, row := range rows {
			res := row.res
			rv := rowView{Name: res.Variant.Name}
			if res.Err != nil {
				rv.Err = strings.ReplaceAll(res.Err.Error(), "|", "/")
			} else {
				rv.Time, rv.Median, rv.CPU = formatNs(res.NsPerOp), formatNs(res.Median), formatNs(res.CPUPerOp)
				rv.MBs = fmt.Sprintf("%.0f", res.MBPerSec())
				rv.Allocs = fmt.Sprint(res.AllocsPerOp)
				rv.Native, rv.Copy, rv.Raw, rv.Spread = fmtRatio(row.native), fmtRatio(row.copy), fmtRatio(row.raw), fmtRatio(res.Spread())
			}
			wv.Rows = append(wv.Rows, rv)
		}
		v.Workloads = append(v.Workloads, wv)
	}
	v.Reading = r.reading()
	return v
}

// BenchTimeout is the timeout of the callbox variants that set one.
func (view) BenchTimeout() time.Duration { return BenchTimeout }

// EngineList is the engines' versions, sorted.
func (m Machine) EngineList() string {
	var s []string
	for k, ver := range m.Engines {
		s = append(s, k+" "+ver)
	}
	sort.Strings(s)
	return strings.Join(s, ", ")
}

// minMax is the range of the finite values in xs.
func minMax(xs []float64) (lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			lo, hi, ok = math.Min(lo, x), math.Max(hi, x), true
		}
	}
	return lo, hi, ok
}

// reading is the report's interpretation, computed from this run: each
// paragraph states what the numbers show and the mechanism behind it.
func (r *Report) reading() []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	tensor := []string{"scale-64KiB", "scale-4MiB", "scale-32MiB", "matmul-256", "softmax-1024x1024"}

	// Extism.
	for _, e := range Engines() {
		var wins []float64
		var lost []string
		measured := 0
		for _, wl := range tensor {
			x := r.ratio(wl, "extism", "callbox-"+e)
			if math.IsNaN(x) {
				continue
			}
			measured++
			if x < 1 {
				lost = append(lost, fmt.Sprintf("%s (Extism %s faster)", wl, fmtRatio(1/x)))
			} else {
				wins = append(wins, x)
			}
		}
		lo, hi, ok := minMax(wins)
		switch {
		case measured == 0:
		case len(lost) == 0:
			add("**Against Extism, callbox on %s is %s to %s faster** on every tensor workload above 1 KiB.", e, fmtRatio(lo), fmtRatio(hi))
		case ok:
			add("**Against Extism, callbox on %s wins %d of %d tensor workloads** (%s to %s faster) and loses %s.", e, len(wins), measured, fmtRatio(lo), fmtRatio(hi), strings.Join(lost, ", "))
		default:
			add("**Against Extism, callbox on %s loses** %s.", e, strings.Join(lost, ", "))
		}
	}
	if x := r.ratio("tiny-1KiB", "extism", "callbox-"+config.EngineWazero); !math.IsNaN(x) {
		ext := r.result("tiny-1KiB", "extism")
		add("Extism's cost is in how data moves, not in the kernel: its guest reads the input from the Extism kernel's memory 8 bytes per `input_load_u64` host call and writes the output back 8 bytes per `store_u64` call, the SDK copies input and output once more each way, and every internal kernel call (`reset`, `alloc`, `input_set`, `output_offset`, …) goes through wazero's `ExportedFunction`, which allocates a fresh call engine with a 10 KiB stack (%d allocations per tiny call here). A 1 KiB call costs %s, %s callbox's on the same engine.", ext.AllocsPerOp, formatNs(ext.Cost()), fmtRatio(x))
	}
	if x := r.ratio("matmul-256", "callbox-"+config.EngineWazero, "extism"); x > 1 {
		lo, hi, n := r.ratioRange("matmul-256", "callbox-"+config.EngineWazero, "extism")
		meter := r.ratio("matmul-256", "raw-wazero-metered", "raw-wazero")
		why := "the kernel's inner loop pays the meter, and a 256³ matmul is almost all inner loop"
		if meter <= 1.1 {
			why = "but the meter is not the gap: the rounds varied more than it costs"
		}
		add("Where Extism wins — matmul on wazero, %s (median of %d rounds, which ranged %s to %s) — it runs the plain wazero module, while callbox on wazero runs the load-time metered module (budget checks at every loop header, for timeouts, fuel and the stack limit). Called by hand, the metered matmul costs %s of the plain one in this run: %s. On wasmtime callbox is %s Extism's time.",
			fmtRatio(x), n, fmtRatio(lo), fmtRatio(hi), fmtRatio(meter), why, fmtRatio(r.ratio("matmul-256", "callbox-"+config.EngineWasmtime, "extism")))
	}

	// Per-call overhead.
	for _, e := range Engines() {
		cb, raw := r.result("tiny-1KiB", "callbox-"+e), r.result("tiny-1KiB", "raw-"+e)
		if cb == nil || raw == nil {
			continue
		}
		add("**Per-call overhead (%s):** a tiny callbox call with a timeout costs %s against %s for the hand-written call: callbox adds %s per call for looking the callback up, validating inputs against the signature, taking an instance from the pool, writing and verifying the frame (header, descriptors, guard bytes), arming the timeout and recording stats.",
			e, formatNs(cb.Cost()), formatNs(raw.Cost()), formatNs(cb.Cost()-raw.Cost()))
	}

	// Large tensors.
	for _, e := range Engines() {
		r4, r32 := r.ratio("scale-4MiB", "callbox-"+e, "raw-"+e), r.ratio("scale-32MiB", "callbox-"+e, "raw-"+e)
		zc := r.ratio("scale-32MiB", "callbox-"+e, "callbox-"+e+":zero-copy")
		zn := r.ratio("scale-32MiB", "callbox-"+e+":zero-copy", "go-native")
		if math.IsNaN(r4) && math.IsNaN(r32) {
			continue
		}
		meter := ""
		if e == config.EngineWazero {
			meter = fmt.Sprintf(" (for comparison, the metered module called by hand costs %s of the plain one at 4 MiB and %s at 32 MiB)",
				fmtRatio(r.ratio("scale-4MiB", "raw-wazero-metered", "raw-wazero")), fmtRatio(r.ratio("scale-32MiB", "raw-wazero-metered", "raw-wazero")))
		}
		bound := ""
		if z, c := r.result("scale-32MiB", "callbox-"+e+":zero-copy"), r.result("scale-32MiB", "go-copy"); z != nil && c != nil {
			// Zero-copy saves at most the two copies: (kernel + copies) / kernel.
			max := (z.Cost() + c.Cost()) / z.Cost()
			bound = fmt.Sprintf(" The most it can gain is the copies: the kernel alone takes %s and the two copies %s, so at best (kernel + copies) / kernel = %s", formatNs(z.Cost()), formatNs(c.Cost()), fmtRatio(max))
			if max < 2.5 {
				bound += " — below the 2.5x target: this scalar kernel streams memory little faster than a copy does, so removing the copies cannot gain 2.5x (a kernel that streams memory faster gains more, see SIMD below; one doing more work per byte gains less)"
			}
			bound += "."
		}
		add("**Large tensors (%s):** the copying API costs %s of the hand-written round trip at 4 MiB and %s at 32 MiB%s — both make the same two copies. The zero-copy session removes them: %s faster than copying at 32 MiB, at %s of native Go's own loop.%s",
			e, fmtRatio(r4), fmtRatio(r32), meter, fmtRatio(zc), fmtRatio(zn), bound)
	}

	// Loops and timeouts.
	if m := r.ratio("matmul-256", "raw-wazero-metered", "raw-wazero"); !math.IsNaN(m) {
		add("**Metering (wazero):** the module callbox runs on wazero is rewritten at load to count instructions — a budget decremented at every loop header and function entry (kept in a local, i.e. a register, while a function with loops runs) — which timeouts, fuel and the stack limit all rely on, so it is on with or without a timeout. Called by hand, the metered module's matmul costs %s of the plain module's and its 4 MiB scale %s; callbox's own frame, checks and copies add little on top (callbox matmul: %s of the metered raw call). So on wazero callbox's loop-heavy kernels run %s of raw with a timeout and %s without. On wasmtime, whose epoch checks are compiled into raw and callbox alike, callbox's matmul is %s of raw. Between engines, wasmtime's code runs the raw matmul %s faster than wazero's.",
			fmtRatio(m), fmtRatio(r.ratio("scale-4MiB", "raw-wazero-metered", "raw-wazero")), fmtRatio(r.ratio("matmul-256", "callbox-wazero", "raw-wazero-metered")),
			fmtRatio(r.ratio("matmul-256", "callbox-wazero", "raw-wazero")), fmtRatio(r.ratio("matmul-256", "callbox-wazero:no-timeout", "raw-wazero")),
			fmtRatio(r.ratio("matmul-256", "callbox-wasmtime", "raw-wasmtime")), fmtRatio(r.ratio("matmul-256", "raw-wazero", "raw-wasmtime")))
	}

	// Fresh instances.
	var inst []string
	for _, in := range r.Instantiate {
		if in.Err == nil {
			inst = append(inst, fmt.Sprintf("%s %s: %s", in.Engine, config.FormatSize(uint64(in.MemoryBytes)), formatNs(in.Cost())))
		}
	}
	if len(inst) > 0 {
		s := "**Fresh instances:** instantiating (and closing) a module costs about the same whatever its initial memory (" + strings.Join(inst, "; ") + "): both engines reserve linear memory lazily, so nothing is zeroed or committed up front."
		if f, p := r.result("tiny-1KiB", "callbox-wazero:fresh"), r.result("tiny-1KiB", "callbox-wazero"); f != nil && p != nil {
			s += fmt.Sprintf(" A whole fresh-isolation call on wazero costs %s (pooled: %s): besides instantiation it resolves three exports (`_initialize`, the callback and `callbox_alloc`; each wazero `ExportedFunction` allocates a call engine with a 10 KiB stack), runs `_initialize`, asks the guest for a scratch region, and closes the instance, which unmaps its memory (the ABI version is checked once, on the instance made at load, and `callbox_free` is resolved only when a call needs it).", formatNs(f.Cost()), formatNs(p.Cost()))
		}
		if f, p := r.result("scale-32MiB", "callbox-wazero:fresh"), r.result("scale-32MiB", "callbox-wazero"); f != nil && p != nil {
			s += fmt.Sprintf(" The floor where memory is larger is the first touch: a fresh instance's memory is new, so a 32 MiB call (64 MiB of frame) pays its page faults and zeroing every time — %s against %s pooled on wazero, %s per MiB of frame.",
				formatNs(f.Cost()), formatNs(p.Cost()), formatNs((f.Cost()-p.Cost())/64))
		}
		out = append(out, s)
	}

	// Chain.
	for _, e := range Engines() {
		if x := r.ratio("chain-100", "callbox-"+e, "callbox-"+e+":calls"); !math.IsNaN(x) {
			add("**Ordered chain (%s):** 100 calls submitted asynchronously (`Submit`, then `Barrier`) take %s of 100 separate `Invoke` calls; made with the synchronous `Chain.Invoke` (each call waits, as XLA runs ordered effects), %s. The synchronous chain runs each call on the caller's goroutine, adding only a sequence number and the failure check. The asynchronous one adds a future per call and hands the calls to a worker goroutine while the submitter runs ahead: the first `Submit` wakes a sleeping thread for that goroutine on the other P, and the submitter parked in `Barrier` is woken at the end (futex calls, about 25 µs per 100-call chain in a CPU profile on this VM); otherwise the two paths' profiles differ little. With one P (GOMAXPROCS=1) the asynchronous chain measured 1.04-1.24x in earlier rounds and 1.07x in round 4 (`go test -bench 'Chain100|Invoke100' ./host`); RATIONALE.md, round 4, has what was tried.", e, fmtRatio(x), fmtRatio(r.ratio("chain-100", "callbox-"+e+":chain-invoke", "callbox-"+e+":calls")))
		}
	}

	// Timeout accuracy.
	for _, e := range Engines() {
		var base, busy *AccuracyResult
		for i := range r.Accuracy {
			a := &r.Accuracy[i]
			if a.Engine != e || a.Err != nil {
				continue
			}
			if a.Burners == 0 {
				base = a
			} else {
				busy = a
			}
		}
		if base == nil || busy == nil {
			continue
		}
		why := "the runaway guest checks its own deadline on its own goroutine, every ~20,000 instructions; with more guests than Go threads, Go's scheduler time-slices goroutines that sit in compiled wasm at about 10 ms (wasm code cannot be preempted asynchronously, only where it calls into Go), so a guest whose deadline passes while it waits for a thread notices only when it runs again"
		if e == config.EngineWasmtime {
			why = "guests run in cgo calls on their own OS threads; the epoch that interrupts them is advanced by a C thread (real-time priority where allowed) every 1 ms and at the earliest deadline of a running call, and the deadline is checked in C, so neither waits for Go's scheduler; guest calls longer than a tick take turns on GOMAXPROCS cores (the rest block), a call near its deadline keeps its turn, a handed-on turn wakes its next guest on the giver's core, and a stopped call's thread keeps its turn a tick to return the error and start the next call (RATIONALE.md, core turns); what is left is the OS and other processes delaying the threads that hold the turns"
		}
		caveat := ""
		if base.P99 > 5*time.Millisecond {
			caveat = fmt.Sprintf(" This run cannot settle the 5 ms target either way: even with no other guest, this machine's own load delays the p99 call by %s.", formatDuration(base.P99))
		}
		add("**Timeout accuracy (%s):** with %d other guests spinning, a runaway guest with a %s timeout returns %s late at the median and %s at p99 (max %s); in the same run with no other guests (measured in alternating blocks) it is %s and %s. Why: %s. Other processes on this machine (load average %s at the start) add to both.%s",
			e, busy.Burners, busy.Timeout, formatDuration(busy.P50), formatDuration(busy.P99), formatDuration(busy.Max), formatDuration(base.P50), formatDuration(base.P99), why, r.Machine.LoadBefore, caveat)
	}

	// Cache.
	for _, c := range r.Cache {
		if c.Err != nil {
			continue
		}
		add("**Module cache (%s):** a %.1f MB module compiles cold in %s; a fresh engine compiling it again from the warm cache takes %s (a whole host `LoadModule`, %s). A hit hashes the original module (the key covers its sha256, the rewrite's version, the engine's version and every setting that changes compiled code) and skips the rewrite%s.",
			c.Engine, float64(c.ModuleBytes)/1e6, formatDuration(c.Cold), formatDuration(c.Hit), formatDuration(c.HitLoad),
			map[bool]string{true: "; it then checksums the whole compiled artifact (XXH3-64 over a read-only mapping: a corrupt or foreign entry is recompiled, never run) and deserializes it", false: "; wazero then decodes and validates every function body before it consults its own file cache"}[c.Engine == config.EngineWasmtime])
	}
	out = append(out, r.simdReading()...)
	out = append(out, r.userKernelsReading()...)
	return out
}

// TargetRows flattens the targets for the summary table.
func (r *Report) TargetRows() []struct {
	N             int
	Title, Status string
	Measured      string
} {
	var rows []struct {
		N             int
		Title, Status string
		Measured      string
	}
	for _, t := range r.Targets {
		var m []string
		for _, c := range t.Checks {
			if c.Measured {
				m = append(m, fmt.Sprintf("%s: %s %s", c.What, c.Value, map[bool]string{true: "✓", false: "✗"}[c.Met]))
			}
		}
		rows = append(rows, struct {
			N             int
			Title, Status string
			Measured      string
		}{t.N, t.Title, t.Status(), strings.Join(m, "<br>")})
	}
	return rows
}

// AccuracyRows are the accuracy results in engine order, baseline first.
func (r *Report) AccuracyRows() []AccuracyResult {
	rows := slices.Clone(r.Accuracy)
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].Engine != rows[j].Engine {
			return rows[i].Engine > rows[j].Engine // wazero first
		}
		return rows[i].Burners < rows[j].Burners
	})
	return rows
}

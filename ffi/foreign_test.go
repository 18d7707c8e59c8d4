//go:build cgo

package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/config/configfile"
	"github.com/seed4b3e0ccb/callbox/internal/testing/hostile"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
)

// The whole hostile suite (internal/hostile, the cases of host's
// TestHostile and docs/SECURITY.md's table) inside processes that are not
// Go programs: a C program (testdata/foreign.c) that installs its own
// signal handlers and loads libcallbox with dlopen, and Debian's python3
// through the callbox package (testdata/foreign.py). Each runs every case
// on both engines from four threads at once while SIGUSR1 keeps arriving,
// checks each kind against the one Go gets, checks the hosts still serve,
// that its own handlers still receive its signals and that its crash
// handler never saw a fault, and prints its RSS and thread count after
// each of several passes, which this test bounds.

const (
	foreignThreads = 4
	foreignPasses  = 3
	// foreignRSSGrowth bounds how much the resident set may grow from the
	// end of the first pass to the end of the last. Each pass opens 58
	// hosts and makes 150 hostile calls, some of which allocate megabytes
	// (3 MiB error and log messages, 8-16 MiB guest memories, 300 MiB of
	// stdout in 64 KiB writes); the Go heap may reach twice its live size
	// before a collection (GOGC=100) and returns freed pages to the OS
	// lazily, so the RSS at the end of a pass swings by tens of MiB (10
	// passes of the C run: 124 to 188 MiB, no trend; of the Python run:
	// 153 to 222 MiB). The two later passes make 300 hostile calls and
	// open 116 hosts: the bound catches a leak of more than about 0.3 MiB
	// per call or open (a guest memory the cases fill, 1 to 16 MiB; a
	// compiled module; a host).
	foreignRSSGrowth = 128 << 10 // KiB
	// foreignThreadGrowth bounds the growth of the thread count over the
	// same passes (the Go runtime may start an M or two more as load
	// shifts; a thread leaked per call or per host would add hundreds).
	foreignThreadGrowth = 8
	// foreignHang is how long a foreign process may run before the test
	// kills it as hung (a run takes 2 to 15 s on the development machine).
	foreignHang = 3 * time.Minute
)

// foreignTimeout is the timeout, in the foreign runs, of the cases that
// must not time out. Those runs keep four threads busy on every core
// (the development machine has two), and the runaway cases spin to their
// 250 ms deadlines, so a case that does a few milliseconds of legitimate
// work (load_fuel's 10 million instructions in callbox_alloc, say) can be
// starved past 250 ms and time out. The Go suite holds every case to its
// own timeout; here the kinds are what is compared, and the cases that
// must time out keep theirs.
const foreignTimeout = 5 * time.Second

// foreignTimeouts are the timeouts of cases that must time out at their
// call but do legitimate wall-clock work at load. deadline_split
// busy-waits 150 ms in _initialize, which the load-time probe runs under
// the timeout, then 150 ms in each of the call's three entries: 400 ms
// leaves the load 250 ms of margin on a starved machine, and the call
// (450 ms of busy-waiting at least) still times out. The call's margin
// matters too: a guest thread descheduled across the deadline (tens of
// ms on a 2-core machine running other builds) wakes to a clock past its
// busy-wait's end and returns before its next deadline check; at 440 ms
// (10 ms of margin) that happened under load.
var foreignTimeouts = map[string]time.Duration{"deadline_split": 400 * time.Millisecond}

// foreignCallback is hc's callback on engine in the foreign runs.
func foreignCallback(hc hostile.Case, engine string) config.Callback {
	cb := hc.Callback(engine)
	if d, ok := foreignTimeouts[hc.Name]; ok {
		cb.Limits.Timeout = d
	} else if hc.Expected(engine) != abi.Timeout && cb.Limits.Timeout < foreignTimeout {
		cb.Limits.Timeout = foreignTimeout
	}
	return cb
}

// foreignYAML writes cb as one callback of a YAML config.
func foreignYAML(b *strings.Builder, cb config.Callback) {
	fmt.Fprintf(b, "  %s:\n    module: %s\n    export: %s\n    signature: %q\n    engine: %s\n", cb.Name, cb.Module, cb.Export, cb.Signature, cb.Engine)
	fmt.Fprintf(b, "    timeout: %s\n    max_memory: %dB\n    max_output: %dB\n    max_error: %dB\n    max_log: %dB\n", cb.Limits.Timeout, cb.Limits.MaxMemory, cb.Limits.MaxOutput, cb.Limits.MaxError, cb.Limits.MaxLog)
	if cb.Limits.Fuel > 0 {
		fmt.Fprintf(b, "    fuel: %d\n", cb.Limits.Fuel)
	}
	if cb.Limits.MaxStack > 0 {
		fmt.Fprintf(b, "    max_stack: %dB\n", cb.Limits.MaxStack)
	}
	fmt.Fprintf(b, "    isolation: %s\n    max_instances: %d\n    wasi: %s\n    batching: %s\n", cb.Isolation, cb.MaxInstances, cb.WASI, cb.Batching)
}

func floats(x []float32) string {
	if x == nil {
		return "-"
	}
	s := make([]string, len(x))
	for i, v := range x {
		s[i] = strconv.FormatFloat(float64(v), 'g', -1, 32)
	}
	return strings.Join(s, ",")
}

// writeForeignSuite writes every case's module, one config per engine
// holding the call-time cases, one config per load-time case and engine,
// and the manifest; it returns the manifest's path and the kind expected
// of each "engine/case".
func writeForeignSuite(t *testing.T, dir string) (string, map[string]abi.Kind) {
	t.Helper()
	kit, err := os.ReadFile("testdata/kit.wat")
	require.NoError(t, err)
	kitWasm, err := wat.Compile(string(kit))
	require.NoError(t, err)
	kitPath := filepath.Join(dir, "kit.wasm")
	require.NoError(t, os.WriteFile(kitPath, kitWasm, 0o644))
	healthy := func(engine string) config.Callback {
		cb := config.DefaultCallback()
		cb.Name, cb.Module, cb.Export, cb.Signature, cb.Engine = "healthy", kitPath, "copy", "(x: f32[n]) -> f32[n]", engine
		cb.Limits.Timeout = foreignTimeout
		return cb
	}

	engines := []string{config.EngineWazero, config.EngineWasmtime}
	expected := map[string]abi.Kind{}
	hostLines := map[string]string{}
	var calls, loads [][]string // per case: one line per engine
	for _, hc := range hostile.Cases {
		wasm, err := hc.Wasm(filepath.Join("..", "host", "testdata", "hostile"))
		require.NoError(t, err, hc.Name)
		mod := filepath.Join(dir, hc.Name+".wasm")
		require.NoError(t, os.WriteFile(mod, wasm, 0o644))
		var lines []string
		for _, e := range engines {
			cb := foreignCallback(hc, e)
			cb.Module = mod
			kind := hc.Expected(e)
			expected[e+"/"+hc.Name] = kind
			if hc.Phase == hostile.AtLoad {
				var b strings.Builder
				b.WriteString("callbacks:\n")
				foreignYAML(&b, healthy(e))
				foreignYAML(&b, cb)
				path := filepath.Join(dir, "load_"+hc.Name+"_"+e+".yaml")
				require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
				lines = append(lines, fmt.Sprintf("load\t%s\t%s\t%d\t%s", e, hc.Name, kind, path))
				continue
			}
			var b strings.Builder
			if hostLines[e] == "" {
				b.WriteString("callbacks:\n")
				foreignYAML(&b, healthy(e))
			}
			foreignYAML(&b, cb)
			hostLines[e] += b.String()
			x := hc.Input()
			var want []float32
			if kind == hostile.OK {
				want = x
				if hc.Want != nil {
					want = hc.Want(x)
				}
			}
			lines = append(lines, fmt.Sprintf("call\t%s\t%s\t%d\t%d\t%s\t%s", e, hc.Name, kind, hc.Before, floats(x), floats(want)))
		}
		if hc.Phase == hostile.AtLoad {
			loads = append(loads, lines)
		} else {
			calls = append(calls, lines)
		}
	}

	var m strings.Builder
	for _, e := range engines {
		path := filepath.Join(dir, "calls_"+e+".yaml")
		require.NoError(t, os.WriteFile(path, []byte(hostLines[e]), 0o644))
		// The config says what the Go suite runs: every callback as
		// hostile.Case.Callback builds it (but for foreignTimeout).
		cfg, err := configfile.LoadEnv(path, nil)
		require.NoError(t, err)
		for _, hc := range hostile.Cases {
			if hc.Phase == hostile.AtCall {
				got, found := cfg.Callback(hc.Name)
				require.True(t, found, hc.Name)
				want := foreignCallback(hc, e)
				want.Module = got.Module
				assert.Equal(t, want, got, "%s: the foreign config differs from the Go suite's callback", hc.Name)
			}
		}
		fmt.Fprintf(&m, "host\t%s\t%s\n", e, path)
	}
	// Interleave: a call case of each engine, then a load case, so that
	// the threads run both engines and both phases side by side.
	for i := 0; i < len(calls) || i < len(loads); i++ {
		for _, group := range [][][]string{calls, loads} {
			if i < len(group) {
				for _, l := range group[i] {
					m.WriteString(l + "\n")
				}
			}
		}
	}
	manifest := filepath.Join(dir, "manifest.tsv")
	require.NoError(t, os.WriteFile(manifest, []byte(m.String()), 0o644))
	return manifest, expected
}

// foreignRun is what a foreign process printed.
type foreignRun struct {
	kinds  map[string]map[int]abi.Kind // engine/case -> pass -> kind
	rss    map[int]int64               // pass -> KiB
	thr    map[int]int64
	fails  []string
	faults int64 // the faults the program's crash handler saw (C)
	done   bool
	output string
}

func parseForeign(t *testing.T, out string) *foreignRun {
	r := &foreignRun{kinds: map[string]map[int]abi.Kind{}, rss: map[int]int64{}, thr: map[int]int64{}, output: out}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		switch f[0] {
		case "CASE":
			require.Len(t, f, 6, sc.Text())
			pass, _ := strconv.Atoi(f[1])
			kind, _ := strconv.Atoi(f[4])
			key := f[2] + "/" + f[3]
			if r.kinds[key] == nil {
				r.kinds[key] = map[int]abi.Kind{}
			}
			r.kinds[key][pass] = abi.Kind(kind)
		case "MEM":
			require.Len(t, f, 4, sc.Text())
			pass, _ := strconv.Atoi(f[1])
			r.rss[pass], _ = strconv.ParseInt(f[2], 10, 64)
			r.thr[pass], _ = strconv.ParseInt(f[3], 10, 64)
		case "SIG":
			if len(f) == 3 && f[1] == "fatal" {
				r.faults, _ = strconv.ParseInt(f[2], 10, 64)
			}
		case "FAIL":
			r.fails = append(r.fails, sc.Text())
		case "DONE":
			r.done = true
		}
	}
	return r
}

// check asserts every case ran in every pass with the kind Go gets, and
// the bounds on RSS and threads.
func (r *foreignRun) check(t *testing.T, expected map[string]abi.Kind, passes int) {
	t.Helper()
	require.True(t, r.done, "the process did not finish (crashed?):\n%s", r.output)
	assert.Empty(t, r.fails, "checks inside the process failed")
	for key, want := range expected {
		for pass := 1; pass <= passes; pass++ {
			got, ran := r.kinds[key][pass]
			if assert.True(t, ran, "%s did not run in pass %d", key, pass) {
				assert.Equal(t, want.Ident(), got.Ident(), "%s, pass %d", key, pass)
			}
		}
	}
	require.Contains(t, r.rss, 1)
	require.Contains(t, r.rss, passes)
	t.Logf("RSS after each pass (KiB): %v; threads: %v", r.rss, r.thr)
	assert.LessOrEqual(t, r.rss[passes]-r.rss[1], int64(foreignRSSGrowth), "RSS grew from pass 1 to pass %d", passes)
	assert.LessOrEqual(t, r.thr[passes]-r.thr[1], int64(foreignThreadGrowth), "threads grew from pass 1 to pass %d", passes)
}

// skipUnderRace skips a foreign run in the race detector's pass (make
// race): the processes it runs are the same as in the normal pass (the
// library is not built with the race detector), so running them again
// would only add time.
func skipUnderRace(t *testing.T) {
	if raceEnabled {
		t.Skip("the foreign processes are not race-instrumented; the normal test pass runs them")
	}
}

var (
	foreignOnce sync.Once
	foreignBin  string
	foreignErr  error
)

func TestHostileForeignC(t *testing.T) {
	skipUnderRace(t)
	dir := buildHarness(t)
	foreignOnce.Do(func() {
		foreignBin = filepath.Join(dir, "foreign")
		out, err := exec.Command("cc", "-O2", "-Wall", "-Wextra", "-Werror", "-std=gnu11", "-Iinclude",
			"-o", foreignBin, "testdata/foreign.c", "-ldl", "-lpthread").CombinedOutput()
		if err != nil {
			foreignErr = fmt.Errorf("building foreign: %v\n%s", err, out)
		}
	})
	require.NoError(t, foreignErr)
	manifest, expected := writeForeignSuite(t, t.TempDir())
	for _, mode := range []string{"first", "after", "late"} {
		t.Run(mode, func(t *testing.T) {
			passes := foreignPasses
			if mode != "first" {
				passes = 1 // the leak bound is measured in mode "first"
			}
			ctx, cancel := context.WithTimeout(context.Background(), foreignHang)
			defer cancel()
			cmd := exec.CommandContext(ctx, foreignBin, filepath.Join(dir, "libcallbox.so"), manifest, mode, strconv.Itoa(passes), strconv.Itoa(foreignThreads))
			out, err := cmd.CombinedOutput()
			require.NoError(t, ctx.Err(), "the process hung:\n%s", out)
			r := parseForeign(t, string(out))
			assert.NoError(t, err, "exit status")
			r.check(t, expected, passes)
			t.Logf("faults seen by the program's crash handler: %d", r.faults)
			if mode == "late" {
				// The program's crash handler, installed after
				// wasmtime's, saw wasmtime's traps and passed them on.
				assert.Positive(t, r.faults, "no wasm trap went through the program's crash handler")
			} else {
				assert.Zero(t, r.faults, "a wasm trap reached the program's crash handler")
			}
		})
	}
}

func TestHostileForeignPython(t *testing.T) {
	skipUnderRace(t)
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import numpy").Run(); err != nil {
		t.Skipf("%s with numpy is needed (scripts/install-toolchains.sh installs python3-numpy): %v", python, err)
	}
	dir := buildHarness(t)
	manifest, expected := writeForeignSuite(t, t.TempDir())
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), foreignHang)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "testdata/foreign.py", manifest, strconv.Itoa(foreignPasses), strconv.Itoa(foreignThreads))
	cmd.Env = append(os.Environ(), "CALLBOX_LIB="+filepath.Join(dir, "libcallbox.so"), "PYTHONPATH="+filepath.Join(root, "python"))
	out, err := cmd.CombinedOutput()
	require.NoError(t, ctx.Err(), "the process hung:\n%s", out)
	r := parseForeign(t, string(out))
	assert.NoError(t, err, "exit status:\n%s", out)
	r.check(t, expected, foreignPasses)
}

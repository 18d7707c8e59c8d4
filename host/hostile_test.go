package host_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/testing/hostile"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

// The hostile-guest suite. Every case is a guest module under
// testdata/hostile (or, for the decoder bombs, bytes built below) that
// attacks the host in one way, with the failure kind it must produce. Every
// case runs on every engine and asserts:
//
//   - the error's kind (per engine, where they legitimately differ, with
//     the reason), that it is typed (*host.CallbackError or *host.LoadError)
//     and names the callback;
//   - that the call (or the load) returned within the callback's timeout
//     plus hostileSlack;
//   - that a failed call left the caller's output buffer byte-for-byte
//     unchanged, and never changed the caller's inputs;
//   - that the instance was discarded (PoolStats) unless the kind lets the
//     ABI keep it (GuestError with a valid status, or success);
//   - that the guest's log output and error message stayed within their
//     caps;
//   - that the host then serves a normal call;
//   - that no goroutine outlives the host (goleak, after Close).
//
// The results are the table in docs/SECURITY.md: run with -security-doc to
// regenerate it; a normal run fails when the committed table no longer
// matches (measured times excepted).

const (
	// hostileTimeout is every hostile callback's timeout.
	hostileTimeout = hostile.Timeout
	// hostileSlack is how far past its timeout a hostile call may return.
	// It is a containment bound, not a performance target: generous
	// enough for a loaded 2-core CI machine under the race detector
	// (where a call typically returns within a few ms of its deadline).
	hostileSlack = time.Second
	// workerStartSlack is what a worker's start may add to a load under
	// isolation: process on a loaded machine.
	workerStartSlack = 10 * time.Second
)

// The cases are internal/hostile's (shared with the FFI's foreign-process
// run of the same suite).
type (
	hostileCase = hostile.Case
	phase       = hostile.Phase
)

const (
	atCall = hostile.AtCall
	atLoad = hostile.AtLoad
)

// ok is the "kind" of a call that must succeed.
const ok = hostile.OK

var hostileCases = hostile.Cases

// hostileResult is what one case did on one engine.
type hostileResult struct {
	kind    host.Kind
	elapsed time.Duration
	// head is the error message up to its first parenthesis: the words
	// that must not depend on the engine (engine detail may follow).
	head string
}

func messageHead(err error) string {
	head, _, _ := strings.Cut(err.Error(), " (")
	return head
}

var (
	hostileMu      sync.Mutex
	hostileResults = map[string]map[string]hostileResult{}
)

func TestHostile(t *testing.T) {
	names := map[string]bool{}
	for _, hc := range hostileCases {
		require.False(t, names[hc.Name], "duplicate case %s", hc.Name)
		names[hc.Name] = true
		for _, engine := range engineNames() {
			t.Run(hc.Name+"/"+engine, func(t *testing.T) { runHostile(t, engine, hc) })
		}
	}
	hostileTable(t)
}

// TestHostileProcess runs the whole hostile suite again under isolation:
// process, on both engines, with every per-callback limit a case leaves
// unset set to a value that changes no case's outcome (so the worker
// builds its engine and rewrite as those settings ask): every case must
// end with the kind, message, output and pool state it has in process.
func TestHostileProcess(t *testing.T) {
	if !engines.ProcessIsolationAvailable() {
		t.Skip("isolation: process needs Linux")
	}
	for _, hc := range hostileCases {
		for _, engine := range engineNames() {
			t.Run(hc.Name+"/"+engine, func(t *testing.T) { runHostileIn(t, engine, hostileProcess, hc) })
		}
	}
}

// TestHostileFresh runs the suite's call cases under isolation: fresh
// (a new instance for every call), on both engines: each must end with
// its kind and message, the output untouched, and the host serving on.
func TestHostileFresh(t *testing.T) {
	for _, hc := range hostileCases {
		// A case whose earlier calls leave state behind for the hostile
		// one (corrupt_heap, corrupt_state) succeeds under fresh, as it
		// must: no instance carries state.
		if hc.Phase != atCall || hc.Before > 0 {
			continue
		}
		for _, engine := range engineNames() {
			t.Run(hc.Name+"/"+engine, func(t *testing.T) { runHostileIn(t, engine, hostileFresh, hc) })
		}
	}
}

// How a hostile case runs: as the case says, every call on a fresh
// instance, or under isolation: process with every limit set.
const (
	hostileAsIs = iota
	hostileFresh
	hostileProcess
)

// everyLimit sets each limit the case leaves unset to a value no case
// reaches first: the engine and rewrite still take the setting into
// account (max_stack is a wasmtime engine of its own, fuel the metered
// rewrite on wasmtime).
func everyLimit(cb *config.Callback) {
	if cb.Limits.Fuel == 0 {
		cb.Limits.Fuel = 1 << 40
	}
	if cb.Limits.MaxStack == 0 {
		cb.Limits.MaxStack = 1 << 20
	}
	if cb.Limits.MaxCPU == 0 {
		cb.Limits.MaxCPU = time.Hour
	}
	if cb.MaxInstances == 0 {
		cb.MaxInstances = 2
	}
}

// assertOneKind holds a failure to one kind: errors.Is matches want and
// no other kind.
func assertOneKind(t *testing.T, err error, want abi.Kind) {
	t.Helper()
	var matched []string
	for _, k := range abi.Kinds() {
		if errors.Is(err, k) {
			matched = append(matched, k.Ident())
		}
	}
	assert.Equal(t, []string{want.Ident()}, matched, "errors.Is matches exactly one kind: %v", err)
}

// guestLog records the bytes of guest log lines per callback.
type guestLog struct {
	mu    sync.Mutex
	bytes map[string]int
}

func (g *guestLog) Enabled(context.Context, slog.Level) bool { return true }
func (g *guestLog) Handle(_ context.Context, r slog.Record) error {
	name := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "callback" {
			name = a.Value.String()
		}
		return true
	})
	text, _ := host.GuestLogText(r)
	g.mu.Lock()
	g.bytes[name] += len(text)
	g.mu.Unlock()
	return nil
}
func (g *guestLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &guestLogAttrs{g: g, attrs: attrs}
}
func (g *guestLog) WithGroup(string) slog.Handler { return g }

type guestLogAttrs struct {
	g     *guestLog
	attrs []slog.Attr
}

func (a *guestLogAttrs) Enabled(context.Context, slog.Level) bool { return true }
func (a *guestLogAttrs) Handle(ctx context.Context, r slog.Record) error {
	r.AddAttrs(a.attrs...)
	return a.g.Handle(ctx, r)
}
func (a *guestLogAttrs) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &guestLogAttrs{g: a.g, attrs: append(slices.Clone(a.attrs), attrs...)}
}
func (a *guestLogAttrs) WithGroup(string) slog.Handler { return a }

func hostileWasm(t testing.TB, hc hostileCase) []byte {
	t.Helper()
	b, err := hc.Wasm(filepath.Join("testdata", "hostile"))
	require.NoError(t, err, hc.Module)
	return b
}

func hostileCallback(hc hostileCase, engine string) config.Callback {
	return hc.Callback(engine)
}

func runHostile(t *testing.T, engine string, hc hostileCase) {
	runHostileIn(t, engine, hostileAsIs, hc)
}

// runHostileIn runs one case as mode says: as the case is; under
// isolation: fresh (TestHostileFresh); or, and the healthy callback beside
// it, under isolation: process with every limit set (TestHostileProcess).
func runHostileIn(t *testing.T, engine string, mode int, hc hostileCase) {
	process := mode == hostileProcess
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	logs := &guestLog{bytes: map[string]int{}}
	opts := []host.Option{host.WithLogger(slog.New(logs))}
	isolate := func(*config.Callback) {}
	switch mode {
	case hostileProcess:
		opts = append(opts, host.WithWorker(workerPath(t, false)))
		isolate = func(cb *config.Callback) { cb.Isolation = config.IsolationProcess; everyLimit(cb) }
	case hostileFresh:
		isolate = func(cb *config.Callback) { cb.Isolation = config.IsolationFresh }
	}
	h, err := host.New(ctx, nil, opts...)
	require.NoError(t, err)
	closed := false
	defer func() {
		if !closed {
			_ = h.Close(ctx)
		}
	}()
	healthy := config.DefaultCallback()
	healthy.Name, healthy.Export, healthy.Signature, healthy.Engine = "healthy", "scale", testkitSigs["scale"], engine
	isolate(&healthy)
	require.NoError(t, h.LoadModule(ctx, healthy, testkitWasm(t)))

	wasm := hostileWasm(t, hc)
	cb := hostileCallback(hc, engine)
	wantMsg := hc.Msg
	if process && cb.Isolation == config.IsolationFresh {
		// A case about fresh isolation (every entry of a new instance
		// under one deadline) has no such entries under process, which
		// pools: the kind must hold, the wording of where it struck not.
		wantMsg = ""
	}
	isolate(&cb)
	want := hc.Expected(engine)
	res := hostileResult{}

	var loadErr error
	if hc.Phase == atLoad {
		start := time.Now()
		loadErr = h.LoadModule(ctx, cb, wasm)
		res.elapsed = time.Since(start)
		if want == ok {
			require.NoError(t, loadErr, "this engine loads the module")
		}
	}
	if hc.Phase == atLoad && want != ok {
		err := loadErr
		require.Error(t, err, "the module must be refused at load")
		var le *host.LoadError
		require.ErrorAs(t, err, &le, "a load failure is a *host.LoadError: %v", err)
		res.kind, res.head = le.Kind(), messageHead(err)
		assert.Equal(t, want.Ident(), le.Kind().Ident(), "kind; error: %v", err)
		assertOneKind(t, err, want)
		assert.Equal(t, hc.Name, le.Callback)
		assert.Contains(t, err.Error(), fmt.Sprintf("callback %q", hc.Name))
		if hc.Msg != "" {
			assert.Contains(t, err.Error(), hc.Msg)
		}
		_, loaded := h.Callback(hc.Name)
		assert.False(t, loaded, "a refused callback is not registered")
	} else if hc.Phase == atCall {
		require.NoError(t, h.LoadModule(ctx, cb, wasm))
		x := []float32{0, 1, 2, 3}
		for i := 0; i < hc.Before; i++ {
			outs, err := h.Invoke(ctx, hc.Name, abi.From(slices.Clone(x)))
			require.NoError(t, err, "call %d before the hostile one", i+1)
			require.Equal(t, x, abi.MustView[float32](outs[0]))
		}
		if hc.Grow {
			x = make([]float32, 4096)
		}
		before, _ := h.PoolStats(hc.Name)
		input := abi.From(slices.Clone(x))
		out := abi.From(make([]float32, len(x)))
		for i := range out.Data {
			out.Data[i] = 0x7e
		}
		outBefore := bytes.Clone(out.Data)
		start := time.Now()
		_, err := h.Do(ctx, &host.Request{Callback: hc.Name, Inputs: []host.Tensor{input}, Outputs: []host.Tensor{out}})
		res.elapsed = time.Since(start)
		assert.Equal(t, x, abi.MustView[float32](input), "the caller's input must never change")
		after, _ := h.PoolStats(hc.Name)
		if want == ok {
			require.NoError(t, err)
			wantOut := slices.Clone(x)
			if hc.Want != nil {
				wantOut = hc.Want(x)
			}
			assert.Equal(t, wantOut, abi.MustView[float32](out))
			if mode == hostileFresh || cb.Isolation == config.IsolationFresh {
				assert.Equal(t, 0, after.Live, "a fresh instance never outlives its call")
			} else {
				assert.Equal(t, before.Discarded, after.Discarded, "a successful call keeps its instance")
			}
		} else {
			require.Error(t, err)
			var ce *host.CallbackError
			require.ErrorAs(t, err, &ce, "a call failure is a *host.CallbackError: %v", err)
			res.kind, res.head = ce.Kind(), messageHead(err)
			assert.Equal(t, want.Ident(), ce.Kind().Ident(), "kind; error: %v", err)
			assertOneKind(t, err, want)
			assert.Equal(t, hc.Name, ce.Callback)
			assert.Contains(t, err.Error(), fmt.Sprintf("callback %q", hc.Name))
			if wantMsg != "" {
				assert.Contains(t, err.Error(), wantMsg)
			}
			assert.Equal(t, outBefore, out.Data, "a failed call must leave the output buffer untouched")
			assert.LessOrEqual(t, len(ce.GuestMessage), int(cb.Limits.MaxError)+64, "guest message above max_error")
			// The ABI keeps an instance only after a valid non-zero status.
			kept := ce.Kind() == host.GuestError && ce.Status.Valid() && ce.Status != abi.StatusOK
			if mode == hostileFresh || cb.Isolation == config.IsolationFresh {
				assert.Equal(t, 0, after.Live, "a fresh instance never outlives its call")
			} else if kept {
				assert.Equal(t, before.Discarded, after.Discarded, "an instance that returned a status is kept")
				assert.Equal(t, 1, after.Live)
			} else {
				assert.Equal(t, before.Discarded+1, after.Discarded, "a broken instance is discarded")
				assert.Equal(t, 0, after.Live, "no instance of %s is left alive", hc.Name)
			}
		}
	}
	slack := hostileSlack
	if process && hc.Phase == atLoad {
		// A load under isolation: process also starts a worker (exec,
		// lock-down, the module's compile in it), which a loaded machine
		// under the race detector stretches to seconds. Still a
		// containment bound: a start that hangs runs into the 5-minute
		// start bound.
		slack += workerStartSlack
	}
	assert.Less(t, res.elapsed, cb.Limits.Timeout+slack, "the hostile %s must end within its timeout plus %v", map[phase]string{atCall: "call", atLoad: "load"}[hc.Phase], slack)

	// The host keeps serving.
	outs, err := h.Invoke(ctx, "healthy", abi.From([]float32{1, 2}), abi.Scalar[float32](3))
	require.NoError(t, err)
	assert.Equal(t, []float32{3, 6}, abi.MustView[float32](outs[0]))

	require.NoError(t, h.Close(ctx))
	closed = true
	logs.mu.Lock()
	logged := logs.bytes[hc.Name]
	logs.mu.Unlock()
	assert.LessOrEqual(t, logged, int(cb.Limits.MaxLog)+4096, "guest log output above max_log")

	if !t.Failed() && mode == hostileAsIs {
		hostileMu.Lock()
		if hostileResults[hc.Name] == nil {
			hostileResults[hc.Name] = map[string]hostileResult{}
		}
		hostileResults[hc.Name][engine] = res
		hostileMu.Unlock()
	}
}

// hostileTable renders the results as the SECURITY.md table, then writes it
// (-security-doc) or checks the committed one.
func hostileTable(t *testing.T) {
	tableEngines := []string{config.EngineWazero, config.EngineWasmtime}
	complete := true
	hostileMu.Lock()
	for _, hc := range hostileCases {
		for _, e := range engineNames() {
			if _, done := hostileResults[hc.Name][e]; !done {
				complete = false
			}
		}
	}
	hostileMu.Unlock()
	if !complete {
		t.Log("hostile table: not every case ran (or passed) on every engine; docs/SECURITY.md not checked")
		return
	}
	// One message per kind, whatever the engine: where both engines
	// report the same kind, the message reads the same up to any engine
	// detail in parentheses, and up to the guest offset it names, which
	// depends on what the guest wrote (random_huge writes random bytes:
	// the first that differs from the frame moves by chance).
	offset := regexp.MustCompile(`guest offset \d+`)
	for _, hc := range hostileCases {
		r := hostileResults[hc.Name]
		if a, b := r[config.EngineWazero], r[config.EngineWasmtime]; len(r) == 2 && a.kind == b.kind {
			assert.Equal(t, offset.ReplaceAllString(a.head, "guest offset N"), offset.ReplaceAllString(b.head, "guest offset N"),
				"%s: the engineNames word the same %s differently", hc.Name, a.kind.Ident())
		}
	}
	cell := func(k host.Kind) string {
		if k == ok {
			return "ok"
		}
		return k.Ident()
	}
	ms := func(d time.Duration) string {
		if d < time.Millisecond {
			return "<1ms"
		}
		return d.Round(time.Millisecond).String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Generated by `go test ./host -run TestHostile -args -security-doc` (%s); every callback runs with a %v timeout and %s max_memory (8 MiB where noted), and must end within its timeout plus %v.\n\n",
		machine(), hostileTimeout, "1 MiB", hostileSlack)
	b.WriteString("| Case | What the guest does | Expected | wazero | wasmtime | Time to fail (wazero / wasmtime) |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	var notes []string
	for _, hc := range hostileCases {
		expected := cell(hc.Kind)
		if hc.Phase == atLoad {
			expected += " at load"
		}
		cells := make([]string, 2)
		times := make([]string, 2)
		for i, e := range tableEngines {
			r, ran := hostileResults[hc.Name][e]
			if !ran {
				cells[i], times[i] = "not run", "—"
				continue
			}
			cells[i] = cell(r.kind)
			if _, d := hc.Differs[e]; d {
				cells[i] += fmt.Sprintf(" [%d]", len(notes)+1)
			}
			times[i] = ms(r.elapsed)
		}
		if hc.Differs != nil {
			notes = append(notes, hc.Why)
		}
		what := hc.What
		if hc.Module == "wasi" {
			what += " (WASI granted)"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s / %s |\n", hc.Name, what, expected, cells[0], cells[1], times[0], times[1])
	}
	if len(notes) > 0 {
		b.WriteString("\nWhere the engineNames differ:\n\n")
		for i, n := range notes {
			fmt.Fprintf(&b, "%d. %s.\n", i+1, n)
		}
	}
	table := b.String()

	if *securityDoc {
		require.NoError(t, writeDocRegion("hostile cases", table))
		t.Logf("rewrote the hostile-case table of %s", securityDocPath)
		return
	}
	committed, err := readDocRegion("hostile cases")
	require.NoError(t, err, "run: go test ./host -run TestHostile -args -security-doc")
	// Compare everything but measured times (and the wasmtime column when
	// this build has no wasmtime).
	mask := func(rows [][]string) [][]string {
		out := make([][]string, len(rows))
		for i, r := range rows {
			r = slices.Clone(r)
			if len(r) == 6 {
				r[5] = "*"
				if !engines.WasmtimeAvailable() {
					r[4] = "*"
				}
			}
			out[i] = r
		}
		return out
	}
	if !assert.Equal(t, mask(tableRows(table)), mask(tableRows(committed)),
		"docs/SECURITY.md's hostile-case table is stale: run go test ./host -run TestHostile -args -security-doc") {
		t.Log(table)
	}
}

func withTimeout(d time.Duration) func(*config.Callback) {
	return func(cb *config.Callback) { cb.Limits.Timeout = d }
}

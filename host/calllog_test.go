package host_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
)

// records keeps every log record.
type records struct {
	mu  sync.Mutex
	all []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.all = append(r.all, rec.Clone())
	r.mu.Unlock()
	return nil
}
func (r *records) WithAttrs(as []slog.Attr) slog.Handler { return &withAttrs{r, as} }
func (r *records) WithGroup(string) slog.Handler         { return r }

// withAttrs adds a logger's bound attributes to its records.
type withAttrs struct {
	r  *records
	as []slog.Attr
}

func (w *withAttrs) Enabled(context.Context, slog.Level) bool { return true }
func (w *withAttrs) Handle(ctx context.Context, rec slog.Record) error {
	rec = rec.Clone()
	rec.AddAttrs(w.as...)
	return w.r.Handle(ctx, rec)
}
func (w *withAttrs) WithAttrs(as []slog.Attr) slog.Handler {
	return &withAttrs{w.r, append(append([]slog.Attr(nil), w.as...), as...)}
}
func (w *withAttrs) WithGroup(string) slog.Handler { return w }

func (r *records) with(msg string) []map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]string
	for _, rec := range r.all {
		if rec.Message != msg {
			continue
		}
		m := map[string]string{"level": rec.Level.String()}
		rec.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
		out = append(out, m)
	}
	return out
}

func loggingHost(t *testing.T, rec *records, tweak func(*config.Callback)) *host.Host {
	t.Helper()
	ctx := context.Background()
	h, err := host.New(ctx, nil, host.WithLogger(slog.New(rec)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close(ctx) })
	for _, name := range []string{"scale", "overrun", "tap"} {
		cb := config.DefaultCallback()
		cb.Name, cb.Export, cb.Signature = name, name, testkitSigs[name]
		if tweak != nil {
			tweak(&cb)
		}
		require.NoError(t, h.LoadModule(ctx, cb, testkitWasm(t)))
	}
	return h
}

// TestGuestLinesAreMarkedNotTrusted: a guest's log line is a record whose
// message the host sets ("guest log"), with the guest's text, its source
// and the callback as attributes; host.GuestLogText reads it back.
func TestGuestLinesAreMarkedNotTrusted(t *testing.T) {
	rec := &records{}
	h := loggingHost(t, rec, nil)
	_, err := h.Invoke(context.Background(), "tap", abi.From([]float32{1}))
	require.NoError(t, err)
	lines := rec.with("guest log")
	require.Len(t, lines, 1)
	assert.Equal(t, "scaling", lines[0]["text"])
	assert.Equal(t, "guest", lines[0]["source"])
	assert.Equal(t, "tap", lines[0]["callback"])
	rec.mu.Lock()
	var text string
	var ok bool
	for _, r := range rec.all {
		if t, isGuest := host.GuestLogText(r); isGuest {
			text, ok = t, true
		}
	}
	rec.mu.Unlock()
	assert.True(t, ok)
	assert.Equal(t, "scaling", text)
	assert.Empty(t, rec.with("scaling"), "the guest's text is never a record's message")
}

// TestFailuresAreLoggedRateLimited: failed calls are logged at warn with
// their kind and path, at most once a second per callback; the lines in
// between are counted and reported by the next line.
func TestFailuresAreLoggedRateLimited(t *testing.T) {
	rec := &records{}
	h := loggingHost(t, rec, nil)
	ctx := context.Background()
	began := time.Now()
	const calls = 50
	for i := 0; i < calls; i++ {
		_, err := h.Invoke(ctx, "overrun", abi.From([]float32{1, 2}))
		require.ErrorIs(t, err, host.ABIViolation)
	}
	elapsed := time.Since(began)
	lines := rec.with("callbox: call failed")
	require.NotEmpty(t, lines)
	assert.LessOrEqual(t, len(lines), 1+int(elapsed/time.Second), "at most one line a second")
	assert.Equal(t, "WARN", lines[0]["level"])
	assert.Equal(t, "ABIViolation", lines[0]["kind"])
	assert.Equal(t, "call", lines[0]["path"])
	assert.Equal(t, "overrun", lines[0]["callback"])
	assert.Contains(t, lines[0]["error"], `callback "overrun"`)
	assert.Equal(t, "0", lines[0]["suppressed"])
	assert.NotEmpty(t, rec.with("callbox: instance discarded after a failed call"), "discards are logged (debug)")
}

// TestLongWaitsAreLogged: a call that waited longer than the callback's
// timeout for an instance is logged at warn with the wait, beside its
// failure as Overloaded.
func TestLongWaitsAreLogged(t *testing.T) {
	rec := &records{}
	h := loggingHost(t, rec, func(cb *config.Callback) {
		cb.MaxInstances, cb.Limits.Timeout, cb.Limits.MaxWait = 1, 20*time.Millisecond, 100*time.Millisecond
	})
	ctx := context.Background()
	sess, err := h.NewSession(ctx, "scale")
	require.NoError(t, err)
	defer sess.Release(ctx)
	_, err = h.Invoke(ctx, "scale", abi.From([]float32{1}), abi.Scalar[float32](2))
	require.ErrorIs(t, err, host.Overloaded)
	waits := rec.with("callbox: call waited long for an instance")
	require.Len(t, waits, 1)
	d, err := time.ParseDuration(waits[0]["wait"])
	require.NoError(t, err)
	assert.GreaterOrEqual(t, d, 100*time.Millisecond)
	assert.Equal(t, "1", waits[0]["max_instances"])
	failed := rec.with("callbox: call failed")
	require.Len(t, failed, 1)
	assert.Equal(t, "Overloaded", failed[0]["kind"])
}

// A guest that set an error message and then trapped: the trap keeps its
// kind and carries the guest's message. One that set a message and then
// returned OK: the call succeeds, and the dropped message is logged.
func TestGuestMessageAroundTheOutcome(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		rec := &records{}
		h, err := host.New(ctx, nil, host.WithLogger(slog.New(rec)))
		require.NoError(t, err)
		t.Cleanup(func() { _ = h.Close(ctx) })
		wasm := hostileWasm(t, hostileCase{Module: "imports"})
		for _, name := range []string{"error_then_trap", "error_then_ok"} {
			require.NoError(t, h.LoadModule(ctx, hostileCallback(hostileCase{Name: name, Module: "imports"}, engine), wasm))
		}
		x := abi.From([]float32{1, 2})
		_, err = h.Invoke(ctx, "error_then_trap", x)
		var ce *host.CallbackError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, host.MemoryOutOfBounds, ce.Kind())
		assert.NotEmpty(t, ce.GuestMessage, "the message the guest set before trapping")

		outs, err := h.Invoke(ctx, "error_then_ok", x)
		require.NoError(t, err)
		assert.Equal(t, []float32{1, 2}, abi.MustView[float32](outs[0]))
		dropped := rec.with("guest set an error message but returned OK; dropped")
		require.Len(t, dropped, 1)
		assert.Equal(t, ce.GuestMessage, dropped[0]["message"], "the same message, dropped")
	})
}

// An unknown callback's error lists what is loaded, or says none is.
func TestUnknownCallbackListsTheLoaded(t *testing.T) {
	ctx := context.Background()
	h, err := host.New(ctx, nil, host.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close(ctx) })
	_, err = h.Invoke(ctx, "scael", abi.From([]float32{1}))
	require.ErrorIs(t, err, host.ErrUnknownCallback)
	assert.Contains(t, err.Error(), `callback "scael" (none is loaded)`)
	h2 := loggingHost(t, &records{}, nil)
	_, err = h2.Invoke(ctx, "scael", abi.From([]float32{1}))
	require.ErrorIs(t, err, host.ErrUnknownCallback)
	assert.Contains(t, err.Error(), `callback "scael" (loaded: overrun, scale, tap)`)
}

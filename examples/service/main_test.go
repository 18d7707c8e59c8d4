package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/config/configfile"
	"github.com/seed4b3e0ccb/callbox/guests/prebuilt"
	"github.com/seed4b3e0ccb/callbox/host"
)

// scrape reads http://addr/metrics as Prometheus would.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	require.NoError(t, err, "%s", body)
	return families
}

// value is the sample of family name whose labels include want (counter or
// gauge value; a histogram's count); ok false when there is none.
func value(families map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f, ok := families[name]
	if !ok {
		return 0, false
	}
	sum, found := 0.0, false
next:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum, found
}

// TestPrometheusScrape: after known calls, made every way the host offers,
// a scrape over loopback HTTP shows each counted once, with its path and
// result, and the durations, bytes, fuel and instances beside them.
func TestPrometheusScrape(t *testing.T) {
	ctx := context.Background()
	srv, err := Start(ctx, "127.0.0.1:0", "")
	require.NoError(t, err)
	defer func() { require.NoError(t, srv.Close(ctx)) }()

	const rounds = 3
	for i := 0; i < rounds; i++ {
		require.NoError(t, srv.Workload(ctx))
	}
	// Two failures: a refused call and an unknown-size mismatch.
	_, err = srv.Host.Invoke(ctx, "scale", abi.From([]float32{1}))
	require.ErrorIs(t, err, host.InvalidArgument)

	m := scrape(t, srv.Addr)
	calls := func(cb, path, result string) float64 {
		v, _ := value(m, "callbox_calls_total", map[string]string{"callbox_callback": cb, "callbox_path": path, "callbox_result": result})
		return v
	}
	for _, c := range []struct {
		cb, path string
		n        float64
	}{
		{"scale", "call", rounds},
		{"scale", "chain", rounds},
		{"tap_print", "chain", rounds},
		{"tap_print", "tap", rounds},
		{"scale", "batch", 4 * rounds},
		{"scale", "session", rounds},
		{"scale", "step", rounds},
	} {
		assert.Equal(t, c.n, calls(c.cb, c.path, "ok"), "%s calls on path %s", c.cb, c.path)
	}
	assert.Equal(t, 1.0, calls("scale", "call", "InvalidArgument"), "the refused call, with its kind")

	okScale := 7.0 * rounds // call, chain, 4 batch elements, session; and step, below
	n, ok := value(m, "callbox_call_duration_seconds", map[string]string{"callbox_callback": "scale", "callbox_result": "ok"})
	require.True(t, ok, "call durations are exported")
	assert.Equal(t, okScale+rounds, n, "one duration per timed scale call")
	n, _ = value(m, "callbox_call_guest_duration_seconds", map[string]string{"callbox_callback": "scale"})
	assert.Equal(t, okScale+rounds, n)
	in, _ := value(m, "callbox_call_io_bytes_total", map[string]string{"callbox_callback": "scale", "callbox_io_direction": "in"})
	// call, chain, session: 16 + 4 bytes each; the batch: 4 elements of 16 + 4;
	// the stepped call copies its own inputs (the host counts no bytes for it).
	assert.Equal(t, float64(rounds*(3*20+4*20)), in)
	fuel, ok := value(m, "callbox_call_fuel_total", map[string]string{"callbox_callback": "scale"})
	assert.True(t, ok && fuel > 0, "a callback with a fuel budget counts its fuel: %v", fuel)
	live, _ := value(m, "callbox_instances", map[string]string{"callbox_callback": "scale", "callbox_instance_state": "idle"})
	assert.GreaterOrEqual(t, live, 1.0, "the pool's idle instances")
	created, _ := value(m, "callbox_instances_created_total", map[string]string{"callbox_callback": "scale"})
	assert.GreaterOrEqual(t, created, 1.0)
	waits, _ := value(m, "callbox_call_wait_duration_seconds", map[string]string{"callbox_callback": "scale"})
	assert.Equal(t, okScale, waits, "every call's wait for an instance: not the session's, whose instance is held, nor the refused one")
	refused, _ := value(m, "callbox_call_duration_seconds", map[string]string{"callbox_callback": "scale", "callbox_result": "InvalidArgument"})
	assert.Equal(t, 1.0, refused, "a refused call has a duration too")
}

// TestSpansJoinTraces: a call made inside a trace gets a child span with
// the callback, its result and its phases; a failed one carries its kind
// as the span's status; a call outside a trace emits no span.
func TestSpansJoinTraces(t *testing.T) {
	ctx := context.Background()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(ctx) }()
	h, err := host.New(ctx, nil, host.WithTracerProvider(tp))
	require.NoError(t, err)
	defer h.Close(ctx)
	require.NoError(t, loadExamples(ctx, h))

	x, two := abi.From([]float32{1, 2}), abi.Scalar[float32](2)
	_, err = h.Invoke(ctx, "scale", x, two)
	require.NoError(t, err)
	assert.Empty(t, rec.Ended(), "no span outside a trace")

	tctx, parent := tp.Tracer("test").Start(ctx, "request")
	_, err = h.Invoke(tctx, "scale", x, two)
	require.NoError(t, err)
	_, err = h.Invoke(tctx, "scale", x)
	require.Error(t, err)
	parent.End()

	var calls []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "callbox.call" {
			calls = append(calls, s)
		}
	}
	require.Len(t, calls, 2)
	for _, s := range calls {
		assert.Equal(t, parent.SpanContext().SpanID(), s.Parent().SpanID(), "a child of the caller's span")
	}
	attrs := func(s sdktrace.ReadOnlySpan) map[string]string {
		out := map[string]string{}
		for _, kv := range s.Attributes() {
			out[string(kv.Key)] = kv.Value.Emit()
		}
		return out
	}
	ok, failed := attrs(calls[0]), attrs(calls[1])
	assert.Equal(t, "scale", ok["callbox.callback"])
	assert.Equal(t, "ok", ok["callbox.result"])
	assert.Equal(t, "InvalidArgument", failed["callbox.result"])
	assert.Equal(t, "Error", calls[1].Status().Code.String())
	assert.Contains(t, calls[1].Status().Description, `callback "scale"`)
	assert.Contains(t, ok, "callbox.call.guest_s")
}

// TestSIGHUPReloadsTheFile: the service started from a config file reloads
// it, and the environment's overrides, on each SIGHUP (delivered here on
// the channel main wires to signal.Notify): a changed limit and a changed
// override take effect; a broken file is refused, naming the key, while
// the old configuration keeps serving; the metrics count calls across
// reloads in the same series.
func TestSIGHUPReloadsTheFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, m := range []struct{ lang, name string }{{"rust", "scale"}, {"assemblyscript", "tap_print"}} {
		wasm, err := prebuilt.Module(m.lang, m.name)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, m.name+".wasm"), wasm, 0o644))
	}
	path := filepath.Join(dir, "callbox.yaml")
	write := func(timeout string) {
		cfg := "defaults:\n  fuel: 50000000\ncallbacks:\n  scale:\n    module: scale.wasm\n    batching: parallel\n    timeout: " +
			timeout + "\n  tap_print:\n    module: tap_print.wasm\n"
		require.NoError(t, os.WriteFile(path, []byte(cfg), 0o644))
	}
	write("1s")
	srv, err := Start(ctx, "127.0.0.1:0", path)
	require.NoError(t, err)
	defer func() { require.NoError(t, srv.Close(ctx)) }()
	srv.Deadline = 5 * time.Second
	require.NoError(t, srv.Workload(ctx))

	sigs := make(chan os.Signal, 1)
	outcomes := make(chan error, 1)
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go srv.ReloadOn(rctx, sigs, func(err error) { outcomes <- err })

	write("3s")
	t.Setenv("CALLBOX_CALLBACKS_SCALE_MAX_WAIT", "7s")
	sigs <- syscall.SIGHUP
	require.NoError(t, <-outcomes)
	info, ok := srv.Host.Callback("scale")
	require.True(t, ok)
	assert.Equal(t, 3*time.Second, info.Limits.Timeout, "the file's new value")
	assert.Equal(t, 7*time.Second, info.Limits.MaxWait, "the environment, read again")
	require.NoError(t, srv.Workload(ctx))

	write("5") // no unit: refused
	sigs <- syscall.SIGHUP
	err = <-outcomes
	require.Error(t, err)
	assert.Contains(t, err.Error(), "callbacks.scale.timeout")
	info, _ = srv.Host.Callback("scale")
	assert.Equal(t, 3*time.Second, info.Limits.Timeout, "the old configuration keeps serving")
	require.NoError(t, srv.Workload(ctx))

	n, _ := value(scrape(t, srv.Addr), "callbox_calls_total",
		map[string]string{"callbox_callback": "scale", "callbox_path": "call", "callbox_result": "ok"})
	assert.Equal(t, 3.0, n, "one series across reloads")
}

// TestShippedConfigLoads: callbox.yaml beside the service is a valid
// config (its modules are built by make guests; Load checks every key).
func TestShippedConfigLoads(t *testing.T) {
	cfg, err := configfile.Load("callbox.yaml")
	require.NoError(t, err)
	cb, ok := cfg.Callback("scale")
	require.True(t, ok)
	assert.Equal(t, config.BatchingParallel, cb.Batching)
	assert.Equal(t, time.Second, cb.Limits.MaxWait)
}

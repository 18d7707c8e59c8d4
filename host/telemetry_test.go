package host_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/embedded"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

// A hand-written OpenTelemetry meter and tracer that keep what the host
// records (the library takes no SDK, so its tests take none either): each
// measurement by instrument name with its attributes, each span's
// attributes and status.

type measurement struct {
	value float64
	attrs attribute.Set
}

type fakeMeter struct {
	metricnoop.Meter
	refuse       bool // refuse the counters: a provider's error
	mu           sync.Mutex
	unregistered bool
	got          map[string][]measurement
	callback     metric.Callback
	names        map[any]string
}

func newFakeMeter() *fakeMeter {
	return &fakeMeter{got: map[string][]measurement{}, names: map[any]string{}}
}

func (m *fakeMeter) add(name string, v float64, attrs attribute.Set) {
	m.mu.Lock()
	m.got[name] = append(m.got[name], measurement{v, attrs})
	m.mu.Unlock()
}

// with returns the measurements of name whose attributes include kv.
func (m *fakeMeter) with(name string, kv ...attribute.KeyValue) []float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []float64
	for _, ms := range m.got[name] {
		match := true
		for _, want := range kv {
			if v, ok := ms.attrs.Value(want.Key); !ok || v != want.Value {
				match = false
			}
		}
		if match {
			out = append(out, ms.value)
		}
	}
	return out
}

type fakeMeterProvider struct {
	metricnoop.MeterProvider
	m *fakeMeter
}

func (p fakeMeterProvider) Meter(string, ...metric.MeterOption) metric.Meter { return p.m }

type fakeCounter struct {
	metricnoop.Int64Counter
	m    *fakeMeter
	name string
}

func (c fakeCounter) Add(_ context.Context, v int64, opts ...metric.AddOption) {
	c.m.add(c.name, float64(v), metric.NewAddConfig(opts).Attributes())
}

type fakeHistogram struct {
	metricnoop.Float64Histogram
	m    *fakeMeter
	name string
}

func (h fakeHistogram) Record(_ context.Context, v float64, opts ...metric.RecordOption) {
	h.m.add(h.name, v, metric.NewRecordConfig(opts).Attributes())
}

type fakeIntHistogram struct {
	metricnoop.Int64Histogram
	m    *fakeMeter
	name string
}

func (h fakeIntHistogram) Record(_ context.Context, v int64, opts ...metric.RecordOption) {
	h.m.add(h.name, float64(v), metric.NewRecordConfig(opts).Attributes())
}

type fakeGauge struct {
	metricnoop.Int64ObservableGauge
	name string
}

type fakeUpDown struct {
	metricnoop.Int64ObservableUpDownCounter
	name string
}

type fakeObsCounter struct {
	metricnoop.Int64ObservableCounter
	name string
}

func (m *fakeMeter) Int64Counter(name string, _ ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	if m.refuse {
		return metricnoop.Int64Counter{}, fmt.Errorf("refused %s", name)
	}
	return fakeCounter{m: m, name: name}, nil
}

func (m *fakeMeter) Float64Histogram(name string, _ ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	return fakeHistogram{m: m, name: name}, nil
}

func (m *fakeMeter) Int64Histogram(name string, _ ...metric.Int64HistogramOption) (metric.Int64Histogram, error) {
	return fakeIntHistogram{m: m, name: name}, nil
}

func (m *fakeMeter) Int64ObservableGauge(name string, _ ...metric.Int64ObservableGaugeOption) (metric.Int64ObservableGauge, error) {
	return fakeGauge{name: name}, nil
}

func (m *fakeMeter) Int64ObservableUpDownCounter(name string, _ ...metric.Int64ObservableUpDownCounterOption) (metric.Int64ObservableUpDownCounter, error) {
	return fakeUpDown{name: name}, nil
}

func (m *fakeMeter) Int64ObservableCounter(name string, _ ...metric.Int64ObservableCounterOption) (metric.Int64ObservableCounter, error) {
	return fakeObsCounter{name: name}, nil
}

func (m *fakeMeter) RegisterCallback(f metric.Callback, _ ...metric.Observable) (metric.Registration, error) {
	m.mu.Lock()
	m.callback = f
	m.mu.Unlock()
	return fakeRegistration{m: m}, nil
}

type fakeRegistration struct {
	embedded.Registration
	m *fakeMeter
}

func (r fakeRegistration) Unregister() error {
	r.m.mu.Lock()
	r.m.unregistered = true
	r.m.mu.Unlock()
	return nil
}

// collect runs the registered observer callback, as a reader would.
func (m *fakeMeter) collect(t *testing.T) {
	m.mu.Lock()
	f := m.callback
	m.mu.Unlock()
	require.NotNil(t, f, "the host registered its instance observer")
	require.NoError(t, f(context.Background(), fakeObserver{m: m}))
}

type fakeObserver struct {
	embedded.Observer
	m *fakeMeter
}

func (fakeObserver) ObserveFloat64(metric.Float64Observable, float64, ...metric.ObserveOption) {}

func (o fakeObserver) ObserveInt64(obs metric.Int64Observable, v int64, opts ...metric.ObserveOption) {
	name := ""
	switch x := obs.(type) {
	case fakeUpDown:
		name = x.name
	case fakeObsCounter:
		name = x.name
	case fakeGauge:
		name = x.name
	}
	o.m.add(name, float64(v), metric.NewObserveConfig(opts).Attributes())
}

type fakeSpan struct {
	tracenoop.Span
	mu     sync.Mutex
	attrs  map[attribute.Key]attribute.Value
	status codes.Code
	ended  bool
}

func (s *fakeSpan) IsRecording() bool { return true }
func (s *fakeSpan) SetAttributes(kv ...attribute.KeyValue) {
	s.mu.Lock()
	for _, a := range kv {
		s.attrs[a.Key] = a.Value
	}
	s.mu.Unlock()
}
func (s *fakeSpan) SetStatus(c codes.Code, _ string) { s.status = c }
func (s *fakeSpan) End(...trace.SpanEndOption)       { s.ended = true }

type fakeTracer struct {
	tracenoop.Tracer
	mu    sync.Mutex
	spans []*fakeSpan
}

func (tr *fakeTracer) Start(ctx context.Context, _ string, _ ...trace.SpanStartOption) (context.Context, trace.Span) {
	s := &fakeSpan{attrs: map[attribute.Key]attribute.Value{}}
	tr.mu.Lock()
	tr.spans = append(tr.spans, s)
	tr.mu.Unlock()
	return trace.ContextWithSpan(ctx, s), s
}

type fakeTracerProvider struct {
	tracenoop.TracerProvider
	tr *fakeTracer
}

func (p fakeTracerProvider) Tracer(string, ...trace.TracerOption) trace.Tracer { return p.tr }

// tracedContext is a context whose caller is being traced.
func tracedContext() context.Context {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled,
	})
	return trace.ContextWithSpanContext(context.Background(), sc)
}

// The host's metrics and spans: each call counted once with its path and
// result, its bytes, fuel and durations recorded, the instances observed,
// and a traced call's span carrying its chain, step and outcome.
func TestTelemetryRecordsEachCall(t *testing.T) {
	meter, tracer := newFakeMeter(), &fakeTracer{}
	ctx := context.Background()
	h, err := host.New(ctx, nil, host.WithLogger(slog.New(slog.DiscardHandler)),
		host.WithMeterProvider(fakeMeterProvider{m: meter}), host.WithTracerProvider(fakeTracerProvider{tr: tracer}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close(ctx) })
	wasm := testkitWasm(t)
	for _, name := range []string{"scale", "spin", "busy"} {
		cb := config.DefaultCallback()
		cb.Name, cb.Export, cb.Signature, cb.Engine = name, name, testkitSigs[name], config.EngineWazero
		cb.Limits.Timeout, cb.Limits.Fuel = 50*time.Millisecond, 1<<40
		require.NoError(t, h.LoadModule(ctx, cb, wasm))
	}
	cbAttr := host.AttrCallback.String("scale")

	_, err = h.Invoke(ctx, "scale", abi.From([]float32{1, 2, 3}), abi.Scalar[float32](2))
	require.NoError(t, err)
	assert.Equal(t, []float64{1}, meter.with("callbox.calls", cbAttr, host.AttrPath.String("call"), host.AttrResult.String("ok")))
	assert.Equal(t, []float64{16}, meter.with("callbox.call.io", cbAttr, host.AttrDirection.String("in")), "12 + 4 bytes in")
	assert.Equal(t, []float64{12}, meter.with("callbox.call.io", cbAttr, host.AttrDirection.String("out")))
	assert.Len(t, meter.with("callbox.call.duration", cbAttr, host.AttrResult.String("ok")), 1)
	assert.Len(t, meter.with("callbox.call.wait.duration", cbAttr), 1)
	assert.Len(t, meter.with("callbox.call.guest.duration", cbAttr), 1)
	fuel := meter.with("callbox.call.fuel", cbAttr)
	require.Len(t, fuel, 1)
	assert.Positive(t, fuel[0])

	// A call refused before it waited for an instance: counted, timed as a
	// whole, but with no wait and no guest time.
	_, err = h.Invoke(ctx, "busy", abi.From([]float32{1}))
	require.ErrorIs(t, err, host.InvalidArgument)
	busy := host.AttrCallback.String("busy")
	assert.Equal(t, []float64{1}, meter.with("callbox.calls", busy, host.AttrResult.String("InvalidArgument")))
	assert.Empty(t, meter.with("callbox.call.wait.duration", busy))
	assert.Empty(t, meter.with("callbox.call.guest.duration", busy))

	_, err = h.Invoke(ctx, "spin", abi.From([]float32{1}))
	require.ErrorIs(t, err, host.Timeout)
	assert.Equal(t, []float64{1}, meter.with("callbox.calls", host.AttrCallback.String("spin"), host.AttrResult.String("Timeout")))
	assert.Empty(t, meter.with("callbox.call.io", host.AttrCallback.String("spin"), host.AttrDirection.String("out")), "a failed call copies nothing out")
	assert.Len(t, meter.with("callbox.call.duration", host.AttrCallback.String("spin"), host.AttrResult.String("Timeout")), 1)

	// The instances, as a reader collects them: scale's one idle, spin's
	// discarded after its timeout.
	meter.collect(t)
	assert.Contains(t, meter.with("callbox.instances", cbAttr, host.AttrState.String("idle")), float64(1))
	assert.Contains(t, meter.with("callbox.instances", cbAttr, host.AttrState.String("busy")), float64(0))
	assert.Contains(t, meter.with("callbox.instances.discarded", host.AttrCallback.String("spin")), float64(1))
	assert.NotEmpty(t, meter.with("callbox.instances.created", cbAttr))
	// spin's next call creates an instance (the load-time one was
	// discarded), and its creation is timed.
	_, err = h.Invoke(ctx, "spin", abi.From([]float32{1}))
	require.ErrorIs(t, err, host.Timeout)
	assert.Len(t, meter.with("callbox.instance.create.duration", host.AttrCallback.String("spin")), 1)

	// A call outside a trace starts no span; a traced chain step gets one
	// with its chain, step and outcome.
	assert.Empty(t, tracer.spans)
	ch := h.NewChain("traced")
	_, err = ch.Invoke(tracedContext(), "scale", abi.From([]float32{1}), abi.Scalar[float32](2))
	require.NoError(t, err)
	assert.Equal(t, []float64{1}, meter.with("callbox.calls", cbAttr, host.AttrPath.String("chain")))
	_, err = ch.Invoke(tracedContext(), "spin", abi.From([]float32{1}))
	require.ErrorIs(t, err, host.Timeout)
	require.Len(t, tracer.spans, 2)
	ok, failed := tracer.spans[0], tracer.spans[1]
	assert.True(t, ok.ended && failed.ended)
	assert.Equal(t, "traced", ok.attrs[host.AttrChain].AsString())
	assert.Equal(t, int64(1), ok.attrs[host.AttrSeq].AsInt64())
	assert.Equal(t, "ok", ok.attrs[host.AttrResult].AsString())
	assert.Equal(t, codes.Unset, ok.status)
	assert.Equal(t, "Timeout", failed.attrs[host.AttrResult].AsString())
	assert.Equal(t, codes.Error, failed.status)
	assert.Equal(t, int64(2), failed.attrs[host.AttrSeq].AsInt64())
}

// A meter provider that refuses instruments: the host says so once, with
// the first refusal, and serves calls; its observer is unregistered when
// the host closes.
func TestTelemetryRefusedInstruments(t *testing.T) {
	meter := newFakeMeter()
	meter.refuse = true
	rec := &records{}
	ctx := context.Background()
	h, err := host.New(ctx, nil, host.WithLogger(slog.New(rec)), host.WithMeterProvider(fakeMeterProvider{m: meter}))
	require.NoError(t, err)
	warned := rec.with("callbox: the meter provider refused an instrument; it records nothing")
	require.Len(t, warned, 1)
	assert.Equal(t, "refused callbox.calls", warned[0]["error"], "the first refusal")
	cb := config.DefaultCallback()
	cb.Name, cb.Export, cb.Signature, cb.Engine = "scale", "scale", testkitSigs["scale"], config.EngineWazero
	require.NoError(t, h.LoadModule(ctx, cb, testkitWasm(t)))
	_, err = h.Invoke(ctx, "scale", abi.From([]float32{1}), abi.Scalar[float32](2))
	require.NoError(t, err)
	require.NoError(t, h.Close(ctx))
	meter.mu.Lock()
	defer meter.mu.Unlock()
	assert.True(t, meter.unregistered, "Close unregisters the instance observer")
}

// What a call did not do is not recorded as zero: a host opened
// WithoutCallTiming records counts and bytes but no durations, a call
// with no inputs no input bytes; and a
// traced call outside a chain gets no chain attributes, even on failure.
func TestTelemetryRecordsNoZeros(t *testing.T) {
	meter, tracer := newFakeMeter(), &fakeTracer{}
	ctx := context.Background()
	h, err := host.New(ctx, nil, host.WithLogger(slog.New(slog.DiscardHandler)), host.WithoutCallTiming(),
		host.WithMeterProvider(fakeMeterProvider{m: meter}), host.WithTracerProvider(fakeTracerProvider{tr: tracer}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close(ctx) })
	for _, name := range []string{"calls", "spin"} {
		cb := config.DefaultCallback()
		cb.Name, cb.Export, cb.Signature, cb.Engine = name, name, testkitSigs[name], config.EngineWazero
		cb.Limits.Timeout = 50 * time.Millisecond
		require.NoError(t, h.LoadModule(ctx, cb, testkitWasm(t)))
	}
	_, err = h.Invoke(ctx, "calls")
	require.NoError(t, err)
	calls := host.AttrCallback.String("calls")
	assert.Equal(t, []float64{1}, meter.with("callbox.calls", calls))
	assert.Empty(t, meter.with("callbox.call.io", calls, host.AttrDirection.String("in")), "no inputs, no input bytes")
	assert.Equal(t, []float64{4}, meter.with("callbox.call.io", calls, host.AttrDirection.String("out")))
	for _, d := range []string{"callbox.call.duration", "callbox.call.wait.duration", "callbox.call.guest.duration"} {
		assert.Empty(t, meter.with(d, calls), "%s without call timing", d)
	}
	_, err = h.Invoke(tracedContext(), "spin", abi.From([]float32{1}))
	require.ErrorIs(t, err, host.Timeout)
	require.Len(t, tracer.spans, 1)
	_, hasChain := tracer.spans[0].attrs[host.AttrChain]
	assert.False(t, hasChain, "an unordered call's span names no chain")
	assert.Equal(t, "Timeout", tracer.spans[0].attrs[host.AttrResult].AsString())
}

// What an operator watches besides calls: the guest's memory after each
// call, the pool's bound, a failure's error.type (OpenTelemetry's
// convention: only on failures), fuel on both engines when the callback
// has a budget and on neither when it has none, and, under isolation:
// process, every worker started and every death with its cause.
func TestTelemetryOperatorView(t *testing.T) {
	meter := newFakeMeter()
	ctx := context.Background()
	opts := []host.Option{host.WithLogger(slog.New(slog.DiscardHandler)), host.WithMeterProvider(fakeMeterProvider{m: meter})}
	process := engines.ProcessIsolationAvailable()
	if process {
		opts = append(opts, host.WithWorker(workerPath(t, false)))
	}
	h, err := host.New(ctx, nil, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close(ctx) })
	load := func(name, export, engine string, tweak func(*config.Callback)) {
		cb := config.DefaultCallback()
		cb.Name, cb.Export, cb.Signature, cb.Engine = name, export, testkitSigs[export], engine
		cb.Limits.Timeout, cb.MaxInstances = 100*time.Millisecond, 3
		if tweak != nil {
			tweak(&cb)
		}
		require.NoError(t, h.LoadModule(ctx, cb, testkitWasm(t)))
	}
	for _, e := range engineNames() {
		load("plain_"+e, "scale", e, nil)
		load("fueled_"+e, "scale", e, func(cb *config.Callback) { cb.Limits.Fuel = 1 << 40 })
		_, err := h.Invoke(ctx, "plain_"+e, abi.From([]float32{1}), abi.Scalar[float32](2))
		require.NoError(t, err)
		_, err = h.Invoke(ctx, "fueled_"+e, abi.From([]float32{1}), abi.Scalar[float32](2))
		require.NoError(t, err)
		assert.Empty(t, meter.with("callbox.call.fuel", host.AttrCallback.String("plain_"+e)), "no budget, no fuel, on %s", e)
		assert.Len(t, meter.with("callbox.call.fuel", host.AttrCallback.String("fueled_"+e)), 1, "a budget: fuel, on %s", e)
		mem := meter.with("callbox.call.memory", host.AttrCallback.String("plain_"+e), host.AttrResult.String("ok"))
		require.Len(t, mem, 1)
		assert.Positive(t, mem[0])
		assert.Zero(t, int64(mem[0])%(64<<10), "whole pages")
	}
	load("spin", "spin", config.EngineWazero, nil)
	_, err = h.Invoke(ctx, "spin", abi.From([]float32{1}))
	require.ErrorIs(t, err, host.Timeout)
	spin := host.AttrCallback.String("spin")
	assert.Equal(t, []float64{1}, meter.with("callbox.calls", spin, host.AttrErrorType.String("Timeout")))
	for _, m := range meter.got["callbox.calls"] {
		r, _ := m.attrs.Value(host.AttrResult)
		_, hasType := m.attrs.Value(host.AttrErrorType)
		assert.Equal(t, r.AsString() != "ok", hasType, "error.type only on failures: %v", m.attrs)
	}
	meter.collect(t)
	assert.Contains(t, meter.with("callbox.instances.max", spin), float64(3), "the pool's bound")

	if !process {
		return
	}
	for _, e := range engineNames() {
		name := "walled_" + e
		load(name, "scale", e, func(cb *config.Callback) {
			// The call after the kill waits for a new worker, within its
			// timeout: room for that on a loaded machine.
			cb.Isolation, cb.Limits.Timeout = config.IsolationProcess, 20*time.Second
		})
		cbAttr := host.AttrCallback.String(name)
		assert.Equal(t, []float64{1}, meter.with("callbox.worker.starts", cbAttr), "the worker started at load")
		w := workerOf(t, h, name)
		require.NoError(t, syscall.Kill(w.PID, syscall.SIGKILL))
		require.Eventually(t, func() bool { return processEnded(w.PID) }, 10*time.Second, time.Millisecond)
		_, err := h.Invoke(ctx, name, abi.From([]float32{1}), abi.Scalar[float32](2))
		require.NoError(t, err, "the next call runs on a new worker")
		assert.Equal(t, []float64{1}, meter.with("callbox.worker.deaths", cbAttr, host.AttrCause.String("SIGKILL")))
		assert.Equal(t, []float64{1, 1}, meter.with("callbox.worker.starts", cbAttr), "and a new one started")
	}
}

package host

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// Telemetry: the host reports through the OpenTelemetry Go API and chooses
// no exporter. An application passes its providers (WithMeterProvider,
// WithTracerProvider); by default the host uses the global ones, which do
// nothing until the application installs an SDK, so an uninstrumented
// program pays a few atomic loads per call.
//
// Metrics (instrumentation scope ScopeName), each call counted once,
// whichever way it was made:
//
//	callbox.calls                     counter    {call}  callback, engine, path, result[, error.type]
//	callbox.call.duration             histogram  s       callback, engine, result[, error.type]
//	callbox.call.guest.duration       histogram  s       callback, engine, result[, error.type]
//	callbox.call.wait.duration        histogram  s       callback, engine, result[, error.type]
//	callbox.call.memory               histogram  By      callback, engine, result[, error.type]
//	callbox.instance.create.duration  histogram  s       callback, engine
//	callbox.call.io                   counter    By      callback, engine, direction (in, out)
//	callbox.call.fuel                 counter    {fuel}  callback, engine
//	callbox.instances                 gauge      {instance} callback, engine, state (idle, busy)
//	callbox.instances.max             gauge      {instance} callback, engine
//	callbox.instances.created         counter    {instance} callback, engine
//	callbox.instances.discarded       counter    {instance} callback, engine
//	callbox.worker.starts             counter    {worker} callback, engine
//	callbox.worker.deaths             counter    {worker} callback, engine, cause
//
// result is "ok" or the failure's kind (Kind.Ident: "Timeout", ...); a
// failure also carries error.type, OpenTelemetry's attribute for the class
// of an error, set to the same kind (absent on success, as the convention
// says); path is how the call was made: call (Invoke and its variants),
// chain, tap, batch (one per element), session, step (Callback.Start, as
// the GPU path and the XLA handlers do). callbox.call.memory is the guest's
// linear memory after the call (Stats.PeakMemory: memory only grows).
// callbox.instances.max is the pool's bound (max_instances). Fuel is
// counted for callbacks with a fuel budget, on both engines alike (both
// meter it then), and for no other. The worker counters exist for
// callbacks under isolation: process: each worker started (at load, and
// every restart) and each death, by cause (a signal's name such as
// "SIGKILL" or "SIGSYS", "exit_2", "killed_unresponsive" when the host
// killed it because a call would not end, "killed_start",
// "killed_protocol", "start_failed"). Durations need the call's timing: a
// host opened WithoutCallTiming (the C API's and the XLA handlers')
// records counts, bytes, memory and fuel, not durations.
//
// Traces: a call made with a context that carries a span (the caller is
// being traced) gets a child span "callbox.call" with the callback, its
// chain and sequence number, the phases' durations and, on failure, the
// kind and message as the span's status. A call outside a trace starts
// none: callbox joins traces, it does not start them, so that a service
// making millions of tiny calls does not emit a root span for each.

// ScopeName is the instrumentation scope of the host's meter and tracer.
const ScopeName = "github.com/seed4b3e0ccb/callbox/host"

// Attribute keys of the host's metrics and spans.
const (
	AttrCallback  = attribute.Key("callbox.callback")
	AttrEngine    = attribute.Key("callbox.engine")
	AttrResult    = attribute.Key("callbox.result")
	AttrPath      = attribute.Key("callbox.path")
	AttrDirection = attribute.Key("callbox.io.direction")
	AttrState     = attribute.Key("callbox.instance.state")
	AttrChain     = attribute.Key("callbox.chain")
	AttrSeq       = attribute.Key("callbox.chain.seq")
	// AttrErrorType is OpenTelemetry's error.type: a failure's kind.
	AttrErrorType = attribute.Key("error.type")
	AttrCause     = attribute.Key("callbox.worker.cause")
)

// WithMeterProvider sets the OpenTelemetry meter provider the host's
// metrics go to (default: otel.GetMeterProvider(), the global one).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(h *Host) { h.meterProvider = mp }
}

// WithTracerProvider sets the OpenTelemetry tracer provider of the host's
// spans (default: otel.GetTracerProvider(), the global one).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(h *Host) { h.tracerProvider = tp }
}

// callPath is how a call was made (the path attribute).
type callPath uint8

const (
	pathCall callPath = iota
	pathChain
	pathTap
	pathBatch
	pathSession
	pathStep
	numPaths
)

var pathNames = [numPaths]string{"call", "chain", "tap", "batch", "session", "step"}

// histogramBounds are the duration buckets, in seconds: a microsecond call
// to a ten-second one.
var histogramBounds = []float64{1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// memoryBounds are the guest memory buckets, in bytes: powers of four
// from one page (64 KiB) to 4 GiB, all a 32-bit guest can have.
var memoryBounds = []float64{1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28, 1 << 30, 1 << 32}

// telemetry is the host's instruments.
type telemetry struct {
	tracer                               trace.Tracer
	calls, io, fuel                      metric.Int64Counter
	workerStarts, workerDeaths           metric.Int64Counter
	duration, guest, wait, instantiate   metric.Float64Histogram
	memory                               metric.Int64Histogram
	instances, bound, created, discarded metric.Int64Observable
	registration                         metric.Registration
	meterErr                             error
}

// newTelemetry makes the host's instruments. A provider that refuses one
// (it should not) leaves a no-op in its place; the first error is kept for
// the logger.
func newTelemetry(h *Host) *telemetry {
	mp, tp := h.meterProvider, h.tracerProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	t := &telemetry{tracer: tp.Tracer(ScopeName)}
	m := mp.Meter(ScopeName)
	keep := func(err error) {
		if err != nil && t.meterErr == nil {
			t.meterErr = err
		}
	}
	var err error
	t.calls, err = m.Int64Counter("callbox.calls", metric.WithUnit("{call}"),
		metric.WithDescription("Calls of a callback, by how they were made and how they ended (ok or the failure's kind)."))
	keep(err)
	t.io, err = m.Int64Counter("callbox.call.io", metric.WithUnit("By"),
		metric.WithDescription("Tensor bytes copied into (in) and out of (out) guest memory."))
	keep(err)
	t.fuel, err = m.Int64Counter("callbox.call.fuel", metric.WithUnit("{fuel}"),
		metric.WithDescription("Fuel the callbacks consumed, where the engine meters it."))
	keep(err)
	hist := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(histogramBounds...))
		keep(err)
		return h
	}
	t.duration = hist("callbox.call.duration", "Whole calls, waiting for an instance included.")
	t.guest = hist("callbox.call.guest.duration", "Time inside the callback's export.")
	t.wait = hist("callbox.call.wait.duration", "Time a call waited for an instance, creating one included.")
	t.instantiate = hist("callbox.instance.create.duration", "Time to create an instance.")
	t.memory, err = m.Int64Histogram("callbox.call.memory", metric.WithUnit("By"),
		metric.WithDescription("The guest's linear memory after a call: its peak, since memory only grows."),
		metric.WithExplicitBucketBoundaries(memoryBounds...))
	keep(err)
	t.workerStarts, err = m.Int64Counter("callbox.worker.starts", metric.WithUnit("{worker}"),
		metric.WithDescription("Worker processes started for a callback under isolation: process, at load and at every restart."))
	keep(err)
	t.workerDeaths, err = m.Int64Counter("callbox.worker.deaths", metric.WithUnit("{worker}"),
		metric.WithDescription("Worker processes of a callback under isolation: process that died, by cause."))
	keep(err)
	inst, err := m.Int64ObservableUpDownCounter("callbox.instances", metric.WithUnit("{instance}"),
		metric.WithDescription("Instances alive, idle or busy."))
	keep(err)
	bound, err := m.Int64ObservableGauge("callbox.instances.max", metric.WithUnit("{instance}"),
		metric.WithDescription("The most instances a callback may have alive at once (max_instances)."))
	keep(err)
	created, err := m.Int64ObservableCounter("callbox.instances.created", metric.WithUnit("{instance}"),
		metric.WithDescription("Instances created since the callback was loaded."))
	keep(err)
	discarded, err := m.Int64ObservableCounter("callbox.instances.discarded", metric.WithUnit("{instance}"),
		metric.WithDescription("Instances closed after a call instead of reused: failed calls, and every call of a fresh callback."))
	keep(err)
	t.instances, t.bound, t.created, t.discarded = inst, bound, created, discarded
	t.registration, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, c := range h.loaded() {
			ct := c.tel
			st := c.pool.stats()
			o.ObserveInt64(inst, int64(st.Idle), ct.idle...)
			o.ObserveInt64(inst, int64(st.Live-st.Idle), ct.busy...)
			o.ObserveInt64(bound, int64(st.Max), ct.baseObs...)
			o.ObserveInt64(created, int64(st.Created), ct.baseObs...)
			o.ObserveInt64(discarded, int64(st.Discarded), ct.baseObs...)
		}
		return nil
	}, inst, bound, created, discarded)
	keep(err)
	return t
}

// close unregisters the instance observer.
func (t *telemetry) close() {
	if t.registration != nil {
		_ = t.registration.Unregister()
	}
}

// callbackTelemetry is one callback's attribute sets, made once at load,
// each already in the variadic slice an instrument takes, so that
// recording a call allocates nothing.
type callbackTelemetry struct {
	base       []metric.AddOption    // callback, engine
	baseRec    []metric.RecordOption // the same, for histograms
	idle, busy []metric.ObserveOption
	baseObs    []metric.ObserveOption
	in, out    []metric.AddOption      // base + direction
	byResult   [][]metric.RecordOption // base + result, by Kind (0: ok)
	calls      [numPaths][][]metric.AddOption
	byResultN  [][]metric.RecordOption // as byResult, for the int64 memory histogram
	span       []attribute.KeyValue    // callback, engine, id
}

func resultName(k abi.Kind) string {
	if k == abi.KindNone {
		return "ok"
	}
	return k.Ident()
}

func newCallbackTelemetry(name, engine, id string) *callbackTelemetry {
	cb, en := AttrCallback.String(name), AttrEngine.String(engine)
	set := func(kv ...attribute.KeyValue) metric.MeasurementOption {
		return metric.WithAttributeSet(attribute.NewSet(append([]attribute.KeyValue{cb, en}, kv...)...))
	}
	add := func(kv ...attribute.KeyValue) []metric.AddOption { return []metric.AddOption{set(kv...)} }
	rec := func(kv ...attribute.KeyValue) []metric.RecordOption { return []metric.RecordOption{set(kv...)} }
	obs := func(kv ...attribute.KeyValue) []metric.ObserveOption { return []metric.ObserveOption{set(kv...)} }
	ct := &callbackTelemetry{
		base: add(), baseRec: rec(), baseObs: obs(),
		idle: obs(AttrState.String("idle")), busy: obs(AttrState.String("busy")),
		in: add(AttrDirection.String("in")), out: add(AttrDirection.String("out")),
		span: []attribute.KeyValue{cb, en, attribute.String("callbox.callback.id", id)},
	}
	n := len(abi.Kinds()) + 1
	ct.byResult = make([][]metric.RecordOption, n)
	for k := range n {
		ct.byResult[k] = rec(resultAttrs(abi.Kind(k))...)
	}
	ct.byResultN = ct.byResult
	for p := range numPaths {
		ct.calls[p] = make([][]metric.AddOption, n)
		for k := range n {
			ct.calls[p][k] = add(append(resultAttrs(abi.Kind(k)), AttrPath.String(pathNames[p]))...)
		}
	}
	return ct
}

// resultAttrs are a call's result attributes: result, and on a failure
// error.type (OpenTelemetry's convention: present only when it failed).
func resultAttrs(k abi.Kind) []attribute.KeyValue {
	if k == abi.KindNone {
		return []attribute.KeyValue{AttrResult.String("ok")}
	}
	return []attribute.KeyValue{AttrResult.String(k.Ident()), AttrErrorType.String(k.Ident())}
}

// workerEvents counts a process-isolated callback's worker starts and
// deaths (sandbox.WorkerEvents). Its attribute sets are its own: the
// first worker starts at load, before the callback's telemetry exists.
type workerEvents struct {
	tel      *telemetry
	callback attribute.KeyValue
	engine   attribute.KeyValue
	base     []metric.AddOption
	mu       sync.Mutex
	causes   map[string][]metric.AddOption // by cause, made on first use
}

func newWorkerEvents(tel *telemetry, callback, engine string) *workerEvents {
	w := &workerEvents{tel: tel, callback: AttrCallback.String(callback), engine: AttrEngine.String(engine), causes: map[string][]metric.AddOption{}}
	w.base = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(w.callback, w.engine))}
	return w
}

func (w *workerEvents) WorkerStarted() {
	w.tel.workerStarts.Add(context.Background(), 1, w.base...)
}

func (w *workerEvents) WorkerDied(cause string) {
	w.mu.Lock()
	opts, ok := w.causes[cause]
	if !ok {
		opts = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(w.callback, w.engine, AttrCause.String(cause)))}
		w.causes[cause] = opts
	}
	w.mu.Unlock()
	w.tel.workerDeaths.Add(context.Background(), 1, opts...)
}

// startSpan starts the call's span when the caller is being traced; the
// returned span is nil otherwise.
func (c *Callback) startSpan(ctx context.Context) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, nil
	}
	ctx, span := c.h.tel.tracer.Start(ctx, "callbox.call", trace.WithSpanKind(trace.SpanKindInternal))
	if !span.IsRecording() {
		span.End()
		return ctx, nil
	}
	span.SetAttributes(c.tel.span...)
	return ctx, span
}

// record counts one finished call on every instrument, and ends its span.
func (c *Callback) record(ctx context.Context, path callPath, st *Stats, err *CallbackError, span trace.Span) {
	t, ct := c.h.tel, c.tel
	r := abi.KindNone
	if err != nil {
		r = err.kind
	}
	if int(r) >= len(ct.byResult) {
		r = abi.OtherTrap // a kind this build does not know: never index past the table
	}
	t.calls.Add(ctx, 1, ct.calls[path][r]...)
	if st.BytesIn > 0 {
		t.io.Add(ctx, int64(st.BytesIn), ct.in...)
	}
	if st.BytesOut > 0 {
		t.io.Add(ctx, int64(st.BytesOut), ct.out...)
	}
	if st.FuelKnown && st.Fuel > 0 {
		t.fuel.Add(ctx, int64(st.Fuel), ct.base...)
	}
	if st.PeakMemory > 0 {
		t.memory.Record(ctx, int64(st.PeakMemory), ct.byResultN[r]...)
	}
	if st.Wall > 0 {
		res := ct.byResult[r]
		t.duration.Record(ctx, st.Wall.Seconds(), res...)
		if st.Wait > 0 { // the call reached the acquire phase
			t.wait.Record(ctx, st.Wait.Seconds(), res...)
		}
		if st.Guest > 0 {
			t.guest.Record(ctx, st.Guest.Seconds(), res...)
		}
	}
	if span != nil {
		endSpan(span, st, err)
	}
	c.logCall(ctx, path, st, err)
}

// recordInstantiate records one instance's creation time.
func (c *Callback) recordInstantiate(ctx context.Context, d time.Duration) {
	c.h.tel.instantiate.Record(ctx, d.Seconds(), c.tel.baseRec...)
}

func endSpan(span trace.Span, st *Stats, err *CallbackError) {
	span.SetAttributes(
		attribute.Bool("callbox.instance.new", st.NewInstance),
		attribute.Int64("callbox.call.bytes_in", int64(st.BytesIn)),
		attribute.Int64("callbox.call.bytes_out", int64(st.BytesOut)),
		attribute.Float64("callbox.call.wait_s", st.Wait.Seconds()),
		attribute.Float64("callbox.call.guest_s", st.Guest.Seconds()),
	)
	if st.FuelKnown {
		span.SetAttributes(attribute.Int64("callbox.call.fuel", int64(st.Fuel)))
	}
	if err != nil {
		span.SetAttributes(AttrResult.String(err.kind.Ident()), AttrErrorType.String(err.kind.Ident()))
		if err.Chain != "" {
			span.SetAttributes(AttrChain.String(err.Chain), AttrSeq.Int64(int64(err.Seq)))
		}
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(AttrResult.String("ok"))
	}
	span.End()
}

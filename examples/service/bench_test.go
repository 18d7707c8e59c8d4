package main

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/host"
)

// BenchmarkTelemetryTinyCall is what instrumentation costs on the tiny
// call (scale on 1 KiB, InvokeInto): with a no-op meter provider, with the
// global providers no SDK was installed behind (the default: what an
// uninstrumented program pays), with the OpenTelemetry SDK's meter provider
// and a reader, and with that and a recording tracer on a traced context
// (a span per call). Compare the rows of one run.
func BenchmarkTelemetryTinyCall(b *testing.B) {
	ctx := context.Background()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(ctx) }()
	traced, parent := tp.Tracer("bench").Start(ctx, "request")
	defer parent.End()
	for _, c := range []struct {
		name string
		opts func() []host.Option
		ctx  context.Context
	}{
		{"noop", func() []host.Option { return []host.Option{host.WithMeterProvider(noop.NewMeterProvider())} }, ctx},
		{"global", func() []host.Option { return nil }, ctx},
		{"sdk-metrics", func() []host.Option {
			return []host.Option{host.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())))}
		}, ctx},
		{"sdk-metrics+span", func() []host.Option {
			return []host.Option{host.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))),
				host.WithTracerProvider(tp)}
		}, traced},
	} {
		b.Run(c.name, func(b *testing.B) {
			h, err := host.New(ctx, nil, c.opts()...)
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close(ctx)
			if err := loadExamples(ctx, h); err != nil {
				b.Fatal(err)
			}
			scale, err := h.Lookup("scale")
			if err != nil {
				b.Fatal(err)
			}
			x := abi.From(make([]float32, 256))
			ins := []abi.Tensor{x, abi.Scalar[float32](2)}
			outs := []abi.Tensor{abi.From(make([]float32, 256))}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := scale.Do(c.ctx, &host.Request{Inputs: ins, Outputs: outs}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			rec.Reset()
		})
	}
}

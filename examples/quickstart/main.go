// Command quickstart is the Go API end to end: load callbacks written in
// Rust, AssemblyScript and C (the prebuilt example modules), call them on
// tensors, run them as an ordered chain, and watch a runaway callback come
// back as a typed error while the host keeps serving.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/guests/prebuilt"
	"github.com/seed4b3e0ccb/callbox/host"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, w io.Writer) error {
	// Guest log lines (tap_print's summary) go to slog, tagged with the
	// callback's name and id.
	logger := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
	h, err := host.New(ctx, nil, host.WithLogger(logger))
	if err != nil {
		return err
	}
	defer h.Close(ctx)

	// Programmatic loading; a config file (configfile.Load + host.New(ctx,
	// cfg)) does the same. Signatures come from the modules themselves.
	for _, m := range []struct{ name, lang string }{
		{"scale", "rust"}, {"softmax", "assemblyscript"}, {"tap_print", "assemblyscript"}, {"matmul", "c-freestanding"},
	} {
		wasm, err := prebuilt.Module(m.lang, m.name)
		if err != nil {
			return err
		}
		cb := config.DefaultCallback()
		cb.Name = m.name
		cb.Limits.Timeout = 100 * time.Millisecond
		if err := h.LoadModule(ctx, cb, wasm); err != nil {
			return err
		}
		info, _ := h.Callback(m.name)
		fmt.Fprintf(w, "loaded %-9s %-40s (%s)\n", m.name, info.Signature, m.lang)
	}

	// One call.
	x := abi.From([]float32{1, 2, 3, 4}, 2, 2)
	out, err := h.Invoke(ctx, "matmul", x, x)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "matmul: %v -> %s %v\n", abi.MustView[float32](x), out[0].Type(), abi.MustView[float32](out[0]))

	// An ordered chain: scale, then softmax, with a tap in between.
	ch := h.NewChain("pipeline")
	scaled := ch.Submit(ctx, "scale", abi.From([]float32{1, 2, 3, 4}), abi.Scalar[float32](0.5))
	y, err := scaled.Wait(ctx)
	if err != nil {
		return err
	}
	ch.Tap(ctx, "tap_print", y[0])
	probs, err := ch.Invoke(ctx, "softmax", abi.Tensor{DType: abi.F32, Shape: abi.Shape{1, 4}, Data: y[0].Data})
	if err != nil {
		return err
	}
	if err := ch.Barrier(ctx); err != nil {
		return err
	}
	fmt.Fprintf(w, "softmax(scale(x, 0.5)) = %.4f\n", abi.MustView[float32](probs[0]))

	// A runaway callback: a typed error naming it, within its timeout.
	hostile, err := prebuilt.Module("wat", "hostile")
	if err != nil {
		return err
	}
	cb := config.DefaultCallback()
	cb.Name, cb.Signature = "spin", "(x: f32[n]) -> f32[n]"
	cb.Limits.Timeout = 50 * time.Millisecond
	if err := h.LoadModule(ctx, cb, hostile); err != nil {
		return err
	}
	_, err = h.Invoke(ctx, "spin", abi.From([]float32{1}))
	var ce *host.CallbackError
	if !errors.As(err, &ce) || !errors.Is(err, host.Timeout) {
		return fmt.Errorf("expected a timeout, got %v", err)
	}
	fmt.Fprintf(w, "spin: %v (kind %s)\n", err, ce.Kind().Ident())

	// The host keeps serving.
	out, err = h.Invoke(ctx, "scale", abi.From([]float32{1, 2}), abi.Scalar[float32](3))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "scale after the timeout: %v\n", abi.MustView[float32](out[0]))
	return nil
}

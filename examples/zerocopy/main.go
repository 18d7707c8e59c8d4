// Command zerocopy scales a 32 MiB tensor twice: through Invoke, which
// copies the input into the guest and the output out, and through a
// Session, where the tensor is built directly in guest memory and the
// result read in place.
//
//	go run ./examples/zerocopy
package main

import (
	"context"
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

const n = 8 << 20 // f32 elements: 32 MiB

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, w io.Writer) error {
	h, err := host.New(ctx, nil, host.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return err
	}
	defer h.Close(ctx)
	wasm, err := prebuilt.Module("rust", "scale")
	if err != nil {
		return err
	}
	cb := config.DefaultCallback()
	cb.Name = "scale"
	cb.Limits.MaxMemory = 256 << 20
	if err := h.LoadModule(ctx, cb, wasm); err != nil {
		return err
	}

	// Copying: the host copies x into the guest and y back out.
	x := abi.From(make([]float32, n))
	for i := range abi.MustView[float32](x) {
		abi.MustView[float32](x)[i] = float32(i % 7)
	}
	req := host.Request{Callback: "scale", Inputs: []abi.Tensor{x, abi.Scalar[float32](2)}}
	st, err := h.Do(ctx, &req)
	if err != nil {
		return err
	}
	y := req.Outputs
	fmt.Fprintf(w, "Invoke:  y[6]=%v  copied %d MiB in, %d MiB out, %v\n",
		abi.MustView[float32](y[0])[6], st.BytesIn>>20, st.BytesOut>>20, st.Wall.Round(time.Microsecond))

	// Zero-copy: build x in guest memory; y is a view of guest memory.
	s, err := h.NewSession(ctx, "scale")
	if err != nil {
		return err
	}
	defer s.Release(ctx)
	gx, err := s.Alloc(ctx, abi.F32, n)
	if err != nil {
		return err
	}
	copy(abi.MustView[float32](gx), abi.MustView[float32](x)) // or fill it in place
	gy, st, err := s.Invoke(ctx, gx, abi.Scalar[float32](2))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Session: y[6]=%v  copied %d MiB in, %d MiB out, %v\n",
		abi.MustView[float32](gy[0])[6], st.BytesIn>>20, st.BytesOut>>20, st.Wall.Round(time.Microsecond))
	return nil
}

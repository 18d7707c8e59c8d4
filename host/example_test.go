package host_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/guests/prebuilt"
	"github.com/seed4b3e0ccb/callbox/host"
)

// exampleHost loads the prebuilt Rust scale example and the hostile WAT
// module's spin callback, as a config file would.
func exampleHost(ctx context.Context) *host.Host {
	h, err := host.New(ctx, nil, host.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		panic(err)
	}
	scale, _ := prebuilt.Module("rust", "scale")
	cb := config.DefaultCallback()
	cb.Name = "scale"
	if err := h.LoadModule(ctx, cb, scale); err != nil {
		panic(err)
	}
	hostile, _ := prebuilt.Module("wat", "hostile")
	cb = config.DefaultCallback()
	cb.Name, cb.Signature = "spin", "(x: f32[n]) -> f32[n]"
	cb.Limits.Timeout = 50 * time.Millisecond
	if err := h.LoadModule(ctx, cb, hostile); err != nil {
		panic(err)
	}
	return h
}

func ExampleHost_Invoke() {
	ctx := context.Background()
	h := exampleHost(ctx)
	defer h.Close(ctx)

	x := abi.From([]float32{1, 2, 3})
	out, err := h.Invoke(ctx, "scale", x, abi.Scalar[float32](10))
	if err != nil {
		panic(err)
	}
	fmt.Println(out[0].Type(), abi.MustView[float32](out[0]))
	// Output: f32[3] [10 20 30]
}

func ExampleHost_Invoke_timeout() {
	ctx := context.Background()
	h := exampleHost(ctx)
	defer h.Close(ctx)

	_, err := h.Invoke(ctx, "spin", abi.From([]float32{1}))
	fmt.Println(err)
	fmt.Println(errors.Is(err, host.Timeout))

	// The host keeps serving.
	out, _ := h.Invoke(ctx, "scale", abi.From([]float32{1}), abi.Scalar[float32](2))
	fmt.Println(abi.MustView[float32](out[0]))
	// Output:
	// callback "spin" failed: timeout after 50ms (at func[2] @0xcb)
	// true
	// [2]
}

func ExampleHost_Invoke_signatureMismatch() {
	ctx := context.Background()
	h := exampleHost(ctx)
	defer h.Close(ctx)

	_, err := h.Invoke(ctx, "scale", abi.From([]float32{1, 2}), abi.From([]float32{3, 4}))
	fmt.Println(err)
	// Output: callback "scale" refused the call before running it: argument 1 (factor): expected f32[], got f32[2] (rank 1, want 0)
}

func ExampleChain() {
	ctx := context.Background()
	h := exampleHost(ctx)
	defer h.Close(ctx)

	ch := h.NewChain("pipeline")
	x := abi.From([]float32{1, 2})
	first := ch.Submit(ctx, "scale", x, abi.Scalar[float32](2))
	ch.Submit(ctx, "spin", x) // fails: timeout
	third := ch.Submit(ctx, "scale", x, abi.Scalar[float32](3))

	out, _ := first.Wait(ctx)
	fmt.Println(abi.MustView[float32](out[0]))
	_, err := third.Wait(ctx)
	fmt.Println(errors.Is(err, host.ErrChainFailed), errors.Is(err, host.Timeout))
	fmt.Println(ch.Barrier(ctx))
	// Output:
	// [2 4]
	// true true
	// callback "spin" (chain "pipeline" #2) failed: timeout after 50ms (at func[2] @0xcb)
}

func ExampleHost_Callback() {
	ctx := context.Background()
	h := exampleHost(ctx)
	defer h.Close(ctx)

	info, _ := h.Callback("scale")
	fmt.Println(info.Signature)
	fmt.Println(info.ID[:4])
	// Output:
	// (x: f32[n], factor: f32[]) -> f32[n]
	// cb1-
}

func ExampleHost_NewSession() {
	ctx := context.Background()
	h := exampleHost(ctx)
	defer h.Close(ctx)

	s, err := h.NewSession(ctx, "scale")
	if err != nil {
		panic(err)
	}
	defer s.Release(ctx)
	// The input is allocated in guest memory: no copy in.
	x, _ := s.Alloc(ctx, abi.F32, 4)
	copy(abi.MustView[float32](x), []float32{1, 2, 3, 4})
	out, st, err := s.Invoke(ctx, x, abi.Scalar[float32](0.5))
	if err != nil {
		panic(err)
	}
	// The output is a view of guest memory: no copy out.
	fmt.Println(abi.MustView[float32](out[0]), st.BytesOut)
	// Output: [0.5 1 1.5 2] 0
}

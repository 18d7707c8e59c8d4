package cuda_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/cuda"
	"github.com/seed4b3e0ccb/callbox/cuda/cudatest"
	"github.com/seed4b3e0ccb/callbox/host"
)

// A callback called on device tensors. On a GPU machine the device is
// &cuda.LazyRuntime{} and the stream the program's; here it is the fake.
func ExampleGPU_Call() {
	ctx := context.Background()
	dev := cudatest.NewFake()
	gpu := cuda.New(dev, cuda.Options{})
	defer gpu.Close()
	// The GPU path is created first: the host tells it before closing an
	// instance whose memory it pinned.
	h, err := host.New(ctx, nil, host.WithLogger(slog.New(slog.DiscardHandler)), gpu.Hooks())
	if err != nil {
		panic(err)
	}
	defer h.Close(ctx)
	cbc := config.DefaultCallback()
	cbc.Name, cbc.Module = "scale", "../guests/build/rust/scale.wasm"
	if _, err := os.Stat(cbc.Module); err != nil {
		cbc.Module = "../guests/prebuilt/rust-scale.wasm"
	}
	if err := h.Load(ctx, cbc); err != nil {
		panic(err)
	}
	cb, _ := h.Lookup("scale")

	s := dev.NewStream()
	x, f, y := dev.Malloc(16), dev.Malloc(4), dev.Malloc(16)
	dev.Write(x, abi.From([]float32{1, 2, 3, 4}).Data)
	dev.Write(f, abi.Scalar[float32](10).Data)
	st, err := gpu.Call(ctx, cb, s,
		[]cuda.Buffer{{Ptr: x, DType: abi.F32, Shape: abi.Shape{4}}, {Ptr: f, DType: abi.F32}},
		[]cuda.Buffer{{Ptr: y, DType: abi.F32, Shape: abi.Shape{4}}})
	if err != nil {
		panic(err)
	}
	out := abi.Tensor{DType: abi.F32, Shape: abi.Shape{4}, Data: dev.Read(y, 16)}
	fmt.Println(abi.MustView[float32](out), st.Path, st.Pinned)
	// Output: [10 20 30 40] pinned true
}

package cuda_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/cuda"
	"github.com/seed4b3e0ccb/callbox/cuda/cudatest"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

// testkit callbacks the GPU tests use: name -> export, signature.
var testkit = map[string][2]string{
	"scale":          {"scale", "(x: f32[n], factor: f32[]) -> f32[n]"},
	"scale_fresh":    {"scale", "(x: f32[n], factor: f32[]) -> f32[n]"},
	"tap":            {"tap", "(x: f32[n]) -> $x"},
	"half_then_trap": {"half_then_trap", "(x: f32[n]) -> f32[n]"},
	"spin":           {"spin", "(x: f32[n]) -> f32[n]"},
	"bad_status":     {"bad_status", "(x: f32[n]) -> f32[n]"},
}

func engineNames() []string {
	if engines.WasmtimeAvailable() {
		return []string{config.EngineWazero, config.EngineWasmtime}
	}
	return []string{config.EngineWazero}
}

func forEngines(t *testing.T, fn func(t *testing.T, engine string)) {
	for _, e := range engineNames() {
		t.Run(e, func(t *testing.T) { fn(t, e) })
	}
}

// rig is a host whose instances the GPU path pins, over a fake device.
type rig struct {
	h   *host.Host
	gpu *cuda.GPU
	dev *cudatest.Fake
	s   cuda.Stream
}

func newRig(t testing.TB, engine string, opts cuda.Options) *rig {
	t.Helper()
	dev := cudatest.NewFake()
	r := newRigWith(t, engine, dev, opts)
	r.dev, r.s = dev, dev.NewStream()
	return r
}

// newRigOn is a rig over another device (no Fake helpers).
func newRigOn(t testing.TB, engine string, dev cuda.Device) *rig {
	return newRigWith(t, engine, dev, cuda.Options{})
}

func newRigWith(t testing.TB, engine string, dev cuda.Device, opts cuda.Options) *rig {
	t.Helper()
	ctx := context.Background()
	opts.Logger = slog.New(slog.DiscardHandler)
	gpu := cuda.New(dev, opts)
	h, err := host.New(ctx, nil, host.WithLogger(slog.New(slog.DiscardHandler)), gpu.Hooks())
	require.NoError(t, err)
	src, err := os.ReadFile("../guests/wat/testkit.wat")
	require.NoError(t, err)
	wasm, err := wat.Compile(string(src))
	require.NoError(t, err)
	for name, es := range testkit {
		cb := config.DefaultCallback()
		cb.Name, cb.Export, cb.Signature, cb.Engine = name, es[0], es[1], engine
		cb.Limits.Timeout = 2 * time.Second
		if name == "spin" {
			cb.Limits.Timeout = 50 * time.Millisecond
		}
		if name == "scale_fresh" {
			cb.Isolation = config.IsolationFresh
		}
		require.NoError(t, h.LoadModule(ctx, cb, wasm), name)
	}
	r := &rig{h: h, gpu: gpu}
	t.Cleanup(func() {
		_ = h.Close(context.Background())
		_ = gpu.Close()
	})
	return r
}

func (r *rig) cb(t testing.TB, name string) *host.Callback {
	t.Helper()
	cb, err := r.h.Lookup(name)
	require.NoError(t, err)
	return cb
}

// upload puts host values into a new device buffer the way a program
// would: produced on the stream, not yet complete when the call starts.
func (r *rig) upload(t testing.TB, s cuda.Stream, v []float32, shape ...int64) cuda.Buffer {
	t.Helper()
	data := f32bytes(v)
	p := r.dev.Malloc(uint64(len(data)))
	require.NoError(t, r.dev.Produce(s, p, data))
	if shape == nil {
		shape = []int64{int64(len(v))}
	}
	return cuda.Buffer{Ptr: p, DType: abi.F32, Shape: shape}
}

// output is a device buffer for n f32 values, filled with fill.
func (r *rig) output(n int, fill float32) cuda.Buffer {
	v := make([]float32, n)
	for i := range v {
		v[i] = fill
	}
	p := r.dev.Malloc(uint64(4 * n))
	r.dev.Write(p, f32bytes(v))
	return cuda.Buffer{Ptr: p, DType: abi.F32, Shape: abi.Shape{int64(n)}}
}

// read is a device buffer's f32 values as the device holds them now.
func (r *rig) read(b cuda.Buffer) []float32 {
	n, _ := b.Shape.ByteLen(b.DType)
	return f32s(r.dev.Read(b.Ptr, n))
}

func f32bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))...)
}

func f32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = *(*float32)(unsafe.Pointer(&b[4*i]))
	}
	return out
}

func ramp(n int, mul float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i) * mul
	}
	return v
}

func scaled(v []float32, f float32) []float32 {
	out := make([]float32, len(v))
	for i := range v {
		out[i] = v[i] * f
	}
	return out
}

func filled(n int, x float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = x
	}
	return v
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

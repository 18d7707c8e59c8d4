//go:build cgo

package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/cuda"
	"github.com/seed4b3e0ccb/callbox/cuda/cudatest"
	"github.com/seed4b3e0ccb/callbox/ffi/internal/xlaharness"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
)

// The GPU path through the library's entries (the CUDA XLA handler and
// callbox_cuda_call_dlpack), on the fake device of package cuda: the
// entries serve the default host, which the rig makes a host whose GPU
// path copies on the fake device.

const (
	xf32   = int32(abi.F32)
	xtoken = int32(17)
)

type rig struct {
	h   *host.Host
	bh  *bridgeHost
	gpu *cuda.GPU
	dev *cudatest.Fake
	s   cuda.Stream
}

// newRig makes a host with testkit callbacks, whose GPU path copies on a
// fake device, the default host. Tests that use it are not parallel: the
// entries serve the one default host.
func newRig(t *testing.T) *rig {
	t.Helper()
	ctx := context.Background()
	dev := cudatest.NewFake()
	gpu := cuda.New(dev, cuda.Options{Logger: slog.New(slog.DiscardHandler)})
	h, err := host.New(ctx, nil, host.WithLogger(slog.New(slog.DiscardHandler)), gpu.Hooks())
	require.NoError(t, err)
	src, err := os.ReadFile("../guests/wat/testkit.wat")
	require.NoError(t, err)
	wasm, err := wat.Compile(string(src))
	require.NoError(t, err)
	for name, sig := range map[string]string{
		"scale":          "(x: f32[n], factor: f32[]) -> f32[n]",
		"tap":            "(x: f32[n]) -> $x",
		"half_then_trap": "(x: f32[n]) -> f32[n]",
		"spin":           "(x: f32[n]) -> f32[n]",
	} {
		cb := config.DefaultCallback()
		cb.Name, cb.Export, cb.Signature = name, name, sig
		if name == "spin" {
			cb.Limits.Timeout = 50 * time.Millisecond
		}
		require.NoError(t, h.LoadModule(ctx, cb, wasm))
	}
	bh, err := newBridgeHost(h)
	require.NoError(t, err)
	bh.gpu = gpu
	require.NoError(t, setDefault(register(bh)))
	t.Cleanup(func() {
		_ = setDefault(0)
		_, _ = bh.close(context.Background())
	})
	return &rig{h: h, bh: bh, gpu: gpu, dev: dev, s: dev.NewStream()}
}

func bytesOf(v []float32) []byte {
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))...)
}

func f32sOf(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = *(*float32)(unsafe.Pointer(&b[4*i]))
	}
	return out
}

// dev puts v on the device as the program's previous kernel would (queued
// on the stream).
func (r *rig) dev32(t *testing.T, s cuda.Stream, v ...float32) uintptr {
	p := r.dev.Malloc(uint64(4 * len(v)))
	require.NoError(t, r.dev.Produce(s, p, bytesOf(v)))
	return uintptr(p)
}

func (r *rig) out32(n int, fill float32) uintptr {
	v := make([]float32, n)
	for i := range v {
		v[i] = fill
	}
	p := r.dev.Malloc(uint64(4 * n))
	r.dev.Write(p, bytesOf(v))
	return uintptr(p)
}

func (r *rig) read(p uintptr, n int) []float32 {
	return f32sOf(r.dev.Read(cuda.DevicePtr(p), uint64(4*n)))
}

func cbAttr(name string) []xlaharness.Attr { return []xlaharness.Attr{{Name: "callback", Str: name}} }

// TestMetadataHandshake: both handlers declare the API version their
// declarations are written against (xlaAPIVersion) to a framework at that
// version or later, 0.1 to a 0.1 framework (jaxlib 0.7, which refuses a
// newer handler and passes no api table in the handshake: its frame's size
// tells), and no traits.
func TestMetadataHandshake(t *testing.T) {
	for _, h := range []unsafe.Pointer{cpuHandlerAddr(), cudaHandlerAddr()} {
		for _, c := range []struct {
			framework int32
			table     bool
			want      string
		}{{1, true, "0.1"}, {1, false, "0.1"}, {2, true, xlaAPIVersion}, {2, false, xlaAPIVersion}, {3, true, xlaAPIVersion}} {
			major, minor, traits, ok := xlaharness.Metadata(h, c.framework, c.table)
			assert.True(t, ok)
			assert.Equal(t, c.want, fmt.Sprintf("%d.%d", major, minor), "framework 0.%d, api table %v", c.framework, c.table)
			assert.Zero(t, traits, "not CUDA-graph compatible")
		}
	}
}

// TestHandlerScale: a jitted program's call: inputs produced on XLA's
// stream, the stream from Stream_Get, a token threaded through (never
// touched), the result in XLA's output buffer.
func TestHandlerScale(t *testing.T) {
	r := newRig(t)
	x := []float32{1, 2, 3, 4, 5}
	in, f := r.dev32(t, r.s, x...), r.dev32(t, r.s, 3)
	out := r.out32(5, -1)
	tokIn, tokOut := r.dev.Malloc(4), r.dev.Malloc(4)
	r.dev.Write(tokIn, []byte("TOK1"))
	r.dev.Write(tokOut, []byte("TOK2"))
	gets := xlaharness.StreamGets()
	res := xlaharness.Call(cudaHandlerAddr(), xlaharness.Frame{
		Args:   []xlaharness.Buf{{DType: xf32, Data: in, Dims: []int64{5}}, {DType: xtoken, Data: uintptr(tokIn)}, {DType: xf32, Data: f}},
		Rets:   []xlaharness.Buf{{DType: xtoken, Data: uintptr(tokOut)}, {DType: xf32, Data: out, Dims: []int64{5}}},
		Attrs:  cbAttr("scale"),
		Stream: uintptr(r.s),
	})
	require.True(t, res.OK, "%+v", res)
	assert.Equal(t, []float32{3, 6, 9, 12, 15}, r.read(out, 5))
	assert.Equal(t, []byte("TOK1"), r.dev.Read(tokIn, 4), "tokens are never read or written")
	assert.Equal(t, []byte("TOK2"), r.dev.Read(tokOut, 4))
	assert.Equal(t, gets+1, xlaharness.StreamGets())
	assert.Zero(t, r.dev.Pending(r.s))
	assert.Equal(t, uint64(1), r.gpu.Totals().PinnedCalls)
	assert.Zero(t, xlaharness.LiveErrors())
}

// TestHandlerPassThroughInPlace: with input_output_aliases the result
// buffer is the input's: nothing is copied back.
func TestHandlerPassThroughInPlace(t *testing.T) {
	r := newRig(t)
	in := r.dev32(t, r.s, 7, 8, 9)
	before := r.dev.Stats()
	res := xlaharness.Call(cudaHandlerAddr(), xlaharness.Frame{
		Args: []xlaharness.Buf{{DType: xf32, Data: in, Dims: []int64{3}}}, Rets: []xlaharness.Buf{{DType: xf32, Data: in, Dims: []int64{3}}},
		Attrs: cbAttr("tap"), Stream: uintptr(r.s),
	})
	require.True(t, res.OK, "%+v", res)
	after := r.dev.Stats()
	assert.Equal(t, before.H2DBytes, after.H2DBytes)
	assert.Equal(t, before.D2DBytes, after.D2DBytes)
	assert.Equal(t, []float32{7, 8, 9}, r.read(in, 3))
}

func TestHandlerNonExecuteStages(t *testing.T) {
	r := newRig(t)
	for _, stage := range []int{0, 1, 2} {
		res := xlaharness.Call(cudaHandlerAddr(), xlaharness.Frame{Stage: stage, SetStage: true, Stream: uintptr(r.s), Attrs: cbAttr("nope")})
		assert.True(t, res.OK, "stage %d does nothing", stage)
	}
	assert.Zero(t, r.dev.Stats().Copies)
}

// TestHandlerErrors: every refusal and failure is an XLA error with the
// right code and a message naming what is wrong; the output buffer is
// never touched.
func TestHandlerErrors(t *testing.T) {
	r := newRig(t)
	good := func() xlaharness.Frame {
		return xlaharness.Frame{
			Args:   []xlaharness.Buf{{DType: xf32, Data: r.dev32(t, r.s, 1, 2, 3, 4), Dims: []int64{4}}},
			Rets:   []xlaharness.Buf{{DType: xf32, Data: r.out32(4, 5), Dims: []int64{4}}},
			Attrs:  cbAttr("half_then_trap"),
			Stream: uintptr(r.s),
		}
	}
	for _, tc := range []struct {
		name  string
		tweak func(*xlaharness.Frame)
		code  abi.Code
		want  string
	}{
		{"trap after the copy in", func(*xlaharness.Frame) {}, abi.CodeInternal, `callback "half_then_trap" failed`},
		{"timeout", func(f *xlaharness.Frame) { f.Attrs = cbAttr("spin") }, abi.CodeDeadlineExceeded, "timeout"},
		{"guest status", func(f *xlaharness.Frame) {
			f.Attrs = cbAttr("scale")
			f.Args = append(f.Args, xlaharness.Buf{DType: xf32, Data: r.dev32(t, r.s, -1)})
		}, abi.CodeInvalidArgument, "negative factor"},
		{"unknown callback", func(f *xlaharness.Frame) { f.Attrs = cbAttr("scael") }, abi.CodeNotFound, `callbox UnknownCallback: callback "scael" (loaded: half_then_trap, scale, spin, tap): unknown callback`},
		{"no callback attribute", func(f *xlaharness.Frame) { f.Attrs = nil }, abi.CodeInvalidArgument, "missing attribute callback"},
		{"callback attribute not a string", func(f *xlaharness.Frame) {
			f.Attrs = []xlaharness.Attr{{Name: "callback", Int: 1, IsInt: true}}
		}, abi.CodeInvalidArgument, "attribute callback has type 3, want a string"},
		{"chain attribute not a string", func(f *xlaharness.Frame) {
			f.Attrs = append(f.Attrs, xlaharness.Attr{Name: "chain", Int: 1, IsInt: true})
		}, abi.CodeInvalidArgument, "attribute chain has type 3, want a string"},
		{"empty chain", func(f *xlaharness.Frame) {
			f.Attrs = append(f.Attrs, xlaharness.Attr{Name: "chain", Str: ""})
		}, abi.CodeInvalidArgument, "attribute chain: empty name"},
		{"unknown attribute", func(f *xlaharness.Frame) {
			f.Attrs = append(f.Attrs, xlaharness.Attr{Name: "chian", Str: "prog"})
		}, abi.CodeInvalidArgument, "unknown attribute chian"},
		{"shape mismatch", func(f *xlaharness.Frame) { f.Rets[0].Dims = []int64{5} }, abi.CodeInvalidArgument, "output 0: buffer is f32[5], result is f32[4]"},
		{"unsupported dtype", func(f *xlaharness.Frame) { f.Args[0].DType = 19 }, abi.CodeInvalidArgument, "argument 0: XLA dtype 19 is not one callbox supports"},
		{"rank too large", func(f *xlaharness.Frame) { f.Args[0].Dims = make([]int64, 40) }, abi.CodeInvalidArgument, "argument 0: rank 40 exceeds the ABI maximum 32"},
		{"negative dimension", func(f *xlaharness.Frame) { f.Args[0].Dims = []int64{-4} }, abi.CodeInvalidArgument, "argument 0: dimension 0 is negative (-4)"},
		{"rank without dims", func(f *xlaharness.Frame) { f.Args[0].Dims = nil; f.Args[0].Rank = 2 }, abi.CodeInvalidArgument, "argument 0: shape is NULL with rank 2"},
		{"not a buffer", func(f *xlaharness.Frame) { f.Args[0].Type = 2 }, abi.CodeInvalidArgument, "argument 0: type 2 is not a buffer"},
		{"host pointer", func(f *xlaharness.Frame) {
			f.Args[0].Data = uintptr(unsafe.Pointer(&make([]byte, 16)[0]))
		}, abi.CodeInvalidArgument, "not device memory"},
		{"api table without Stream_Get", func(f *xlaharness.Frame) { f.APISize = 80 }, abi.CodeFailedPrecondition, "has no Stream_Get"},
		{"stream unavailable (CPU)", func(f *xlaharness.Frame) { f.StreamFails = true }, abi.CodeUnimplemented, "no stream on this platform"},
		{"null stream", func(f *xlaharness.Frame) { f.Stream = 0 }, abi.CodeFailedPrecondition, "gave no CUDA stream"},
		{"frame too small", func(f *xlaharness.Frame) { f.FrameSize = 100 }, abi.CodeInvalidArgument, "call frame of 100 bytes, want at least 168"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := good()
			tc.tweak(&f)
			out := f.Rets[0].Data
			res := xlaharness.Call(cudaHandlerAddr(), f)
			require.False(t, res.OK)
			assert.Equal(t, int(tc.code), res.Code, "%s", res.Msg)
			assert.Contains(t, res.Msg, tc.want)
			require.NoError(t, r.dev.SyncStream(r.s))
			assert.Equal(t, []float32{5, 5, 5, 5}, r.read(out, 4), "the output buffer is untouched")
			assert.Zero(t, xlaharness.LiveErrors())
		})
	}
	// No API table: nothing to report through, nothing done.
	f := good()
	f.NullAPI = true
	assert.True(t, xlaharness.Call(cudaHandlerAddr(), f).OK)

	require.NoError(t, setDefault(0))
	t.Setenv("CALLBOX_CONFIG", "")
	res := xlaharness.Call(cudaHandlerAddr(), good())
	assert.Equal(t, int(abi.CodeFailedPrecondition), res.Code)
	assert.Contains(t, res.Msg, "callbox FailedPrecondition: callback \"half_then_trap\": no callbox host: set CALLBOX_CONFIG")
}

// TestHandlerChain: calls with a chain attribute are ordered on that chain;
// after a failure the chain's later calls fail without running.
func TestHandlerChain(t *testing.T) {
	r := newRig(t)
	call := func(cb string, out uintptr) xlaharness.Result {
		return xlaharness.Call(cudaHandlerAddr(), xlaharness.Frame{
			Args:   []xlaharness.Buf{{DType: xf32, Data: r.dev32(t, r.s, 1, 2), Dims: []int64{2}}},
			Rets:   []xlaharness.Buf{{DType: xf32, Data: out, Dims: []int64{2}}},
			Attrs:  []xlaharness.Attr{{Name: "chain", Str: "prog"}, {Name: "callback", Str: cb}},
			Stream: uintptr(r.s),
		})
	}
	o1 := r.out32(2, 0)
	require.True(t, call("tap", o1).OK)
	assert.Equal(t, []float32{1, 2}, r.read(o1, 2))
	res := call("half_then_trap", r.out32(2, 0))
	assert.Equal(t, int(abi.CodeInternal), res.Code)
	assert.Contains(t, res.Msg, `(chain "prog" #2)`)
	o3 := r.out32(2, 9)
	res = call("tap", o3)
	require.False(t, res.OK)
	assert.Contains(t, res.Msg, "not run: chain failed at #2")
	assert.Equal(t, []float32{9, 9}, r.read(o3, 2))
	require.Error(t, r.h.Chain("prog").Reset())
	require.True(t, call("tap", o3).OK)
	assert.Equal(t, []float32{1, 2}, r.read(o3, 2))
}

// TestHandlerConcurrentStreams: XLA runs several programs at once, each on
// its own stream.
func TestHandlerConcurrentStreams(t *testing.T) {
	r := newRig(t)
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := r.dev.NewStream()
			for i := 0; i < 10; i++ {
				x := []float32{float32(w), float32(i), 1}
				out := r.out32(3, 0)
				res := xlaharness.Call(cudaHandlerAddr(), xlaharness.Frame{
					Args:   []xlaharness.Buf{{DType: xf32, Data: r.dev32(t, s, x...), Dims: []int64{3}}, {DType: xf32, Data: r.dev32(t, s, 2)}},
					Rets:   []xlaharness.Buf{{DType: xf32, Data: out, Dims: []int64{3}}},
					Attrs:  cbAttr("scale"),
					Stream: uintptr(s),
				})
				if !assert.True(t, res.OK, "%+v", res) {
					return
				}
				assert.Equal(t, []float32{2 * float32(w), 2 * float32(i), 2}, r.read(out, 3), fmt.Sprintf("worker %d call %d", w, i))
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, uint64(60), r.gpu.Totals().Calls)
}

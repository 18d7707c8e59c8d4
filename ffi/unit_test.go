//go:build cgo

package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/config/configfile"
	"github.com/seed4b3e0ccb/callbox/ffi/internal/dlpack"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
)

// The header's kind numbers are abi.Kind's, and its version and rank
// match the library's.
func TestHeaderMatchesABI(t *testing.T) {
	text, err := os.ReadFile("include/callbox.h")
	require.NoError(t, err)
	defs := map[string]int{}
	for _, m := range regexp.MustCompile(`#define (CALLBOX_\w+) (\d+)`).FindAllStringSubmatch(string(text), -1) {
		n, _ := strconv.Atoi(m[2])
		defs[m[1]] = n
	}
	snake := regexp.MustCompile(`([a-z])([A-Z])`)
	for _, k := range abi.Kinds() {
		name := "CALLBOX_KIND_" + snake.ReplaceAllString(k.Ident(), "${1}_${2}")
		name = regexp.MustCompile(`ABIViolation`).ReplaceAllString(name, "ABI_VIOLATION")
		name = upper(name)
		v, ok := defs[name]
		if assert.True(t, ok, "callbox.h lacks %s", name) {
			assert.Equal(t, int(k), v, name)
		}
	}
	assert.Equal(t, abi.MaxRank, defs["CALLBOX_MAX_RANK"])
	assert.Equal(t, 1, defs["CALLBOX_VERSION_MAJOR"])
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}

// fromDL views one C tensor through fromDLs, as callbox_call does.
func fromDL(role string, t *dlpack.Tensor) (abi.Tensor, error) {
	out, err := fromDLs(role, t, 1, nil)
	if err != nil {
		return abi.Tensor{}, err
	}
	return out[0], nil
}

func TestFromDL(t *testing.T) {
	data := make([]float32, 7) // one spare element for the byte_offset case
	shape := []int64{2, 3}
	tensor := func() dlpack.Tensor {
		return dlpack.Tensor{Data: unsafe.Pointer(&data[0]), Device: dlpack.Device{Type: dlpack.CPU}, NDim: 2, DType: dlpack.FromABI(abi.F32), Shape: &shape[0]}
	}
	in := tensor()
	got, err := fromDL("input", &in)
	require.NoError(t, err)
	assert.Equal(t, abi.F32, got.DType)
	assert.Equal(t, abi.Shape{2, 3}, got.Shape)
	assert.Len(t, got.Data, 24)
	assert.Equal(t, unsafe.Pointer(&data[0]), unsafe.Pointer(&got.Data[0]), "no copy")

	cases := []struct {
		name  string
		tweak func(*dlpack.Tensor)
		msg   string
	}{
		{"gpu", func(d *dlpack.Tensor) { d.Device.Type = 2 }, "input 0: device type 2 is CUDA memory: call GPU tensors with callbox_cuda_call_dlpack, which takes the CUDA stream they are ordered on (it calls the default host, callbox_set_default_host)"},
		{"vulkan", func(d *dlpack.Tensor) { d.Device.Type = 7 }, "input 0: device type 7 is not host memory (want 1, CPU)"},
		{"dtype", func(d *dlpack.Tensor) { d.DType.Bits = 24 }, "input 0: unknown dtype {code 2, bits 24, lanes 1}"},
		{"rank", func(d *dlpack.Tensor) { d.NDim = 33 }, "input 0: rank 33 exceeds the ABI maximum 32"},
		{"negative rank", func(d *dlpack.Tensor) { d.NDim = -3 }, "input 0: rank -3 is negative"},
		{"null shape", func(d *dlpack.Tensor) { d.Shape = nil }, "input 0: shape is NULL with rank 2"},
		{"null data", func(d *dlpack.Tensor) { d.Data = nil }, "input 0: data is NULL for f32[2,3] (24 bytes)"},
		{"strides", func(d *dlpack.Tensor) { s := []int64{1, 2}; d.Strides = &s[0] }, "input 0: strides [1 2] are not row-major for shape [2 3] (want NULL or [3 1]; make the tensor contiguous first)"},
	}
	for _, c := range cases {
		in := tensor()
		c.tweak(&in)
		_, err := fromDL("input", &in)
		require.Error(t, err, c.name)
		assert.Equal(t, c.msg, err.Error(), c.name)
		assert.Equal(t, abi.InvalidArgument, abi.KindOf(err), c.name)
	}

	neg := []int64{2, -1}
	in = tensor()
	in.Shape = &neg[0]
	_, err = fromDL("output", &in)
	assert.EqualError(t, err, "output 0: dimension 1 is negative (-1)")

	huge := []int64{1 << 40, 1 << 40}
	in = tensor()
	in.Shape = &huge[0]
	_, err = fromDL("input", &in)
	assert.ErrorContains(t, err, "overflows")

	empty := []int64{0, 5}
	in = tensor()
	in.Shape, in.Data = &empty[0], nil
	got, err = fromDL("input", &in)
	require.NoError(t, err)
	assert.Empty(t, got.Data)

	rowMajor, off := []int64{3, 1}, tensor()
	off.Strides, off.ByteOffset = &rowMajor[0], 4
	got, err = fromDL("input", &off)
	require.NoError(t, err)
	assert.Equal(t, unsafe.Pointer(&data[1]), unsafe.Pointer(&got.Data[0]), "byte_offset")
}

func TestDescribe(t *testing.T) {
	ce := describe(&bridgeError{kind: abi.InvalidArgument, callback: "x", msg: "unknown callback"})
	assert.Equal(t, errInfo{kind: abi.InvalidArgument, code: abi.CodeInvalidArgument, callback: "x", message: "unknown callback",
		text: `InvalidArgument: callback "x": unknown callback`}, ce)

	p := describe(panicError("callbox_call", "boom"))
	assert.Equal(t, abi.HostPanic, p.kind)
	assert.Equal(t, abi.CodeInternal, p.code)
	assert.Contains(t, p.message, "boom")

	plain := describe(errors.New("something"))
	assert.Equal(t, abi.InvalidArgument, plain.kind, "an error without a kind is a refused call")

	cfgErr := describe(&config.Error{File: "a.yaml", Key: "callbacks.x.timeout", Err: errors.New("bad")})
	assert.Equal(t, abi.InvalidArgument, cfgErr.kind)
	assert.Contains(t, cfgErr.text, "a.yaml")
}

// The bridge from many goroutines at once, with a close in the middle:
// every call either succeeds with the right output or fails cleanly.
func TestBridgeConcurrentCallsAndClose(t *testing.T) {
	dir := t.TempDir()
	cfg, err := configfile.Load(writeConfig(t, dir, false))
	require.NoError(t, err)
	bh, err := openHost(context.Background(), cfg)
	require.NoError(t, err)
	register(bh)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				x := abi.From([]float32{float32(g), float32(i)})
				y := abi.From(make([]float32, 2))
				err := bh.open()
				if err == nil {
					err = bh.do(context.Background(), "", "copy_f32", []abi.Tensor{x}, []abi.Tensor{y}, false, 0)
				}
				if err != nil {
					assert.True(t, errors.Is(err, host.ErrClosed) || bh.closed.Load(), err.Error())
					continue
				}
				assert.Equal(t, []float32{float32(g), float32(i)}, abi.MustView[float32](y))
			}
		}(g)
	}
	first, err := bh.close(context.Background())
	assert.True(t, first)
	assert.NoError(t, err)
	wg.Wait()
	first, _ = bh.close(context.Background())
	assert.False(t, first, "a second close is a no-op")
	assert.ErrorContains(t, bh.open(), "is closed")
}

// Reloads while many goroutines call through the bridge, by name and by
// content id, ordered and not: no call fails, every output is right; a
// callback whose timeout changed is replaced (the host loads it anew), the
// others kept; the bridge's catalog follows the host's.
func TestBridgeReloadUnderLoad(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, false)
	cfg, err := configfile.Load(path)
	require.NoError(t, err)
	bh, err := openHost(context.Background(), cfg)
	require.NoError(t, err)
	register(bh)
	defer bh.close(context.Background())
	id := bh.cat.Load().byKey["copy_f32"].id
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var calls sync.Map
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			key, chain := "copy_f32", ""
			if g%2 == 1 {
				key = id
			}
			if g%3 == 2 {
				chain = "c" + strconv.Itoa(g)
			}
			n := 0
			for i := 0; ; i++ {
				select {
				case <-stop:
					calls.Store(g, n)
					return
				default:
				}
				x := abi.From([]float32{float32(g), float32(i)})
				y := abi.From(make([]float32, 2))
				err := bh.do(context.Background(), chain, key, []abi.Tensor{x}, []abi.Tensor{y}, false, 0)
				if !assert.NoError(t, err, "goroutine %d call %d", g, i) {
					continue
				}
				assert.Equal(t, []float32{float32(g), float32(i)}, abi.MustView[float32](y))
				n++
			}
		}(g)
	}
	var replaced int
	for r := 0; r < 20; r++ {
		next := *cfg
		next.Callbacks = append([]config.Callback(nil), cfg.Callbacks...)
		for i := range next.Callbacks {
			if next.Callbacks[i].Name == "copy_f32" {
				next.Callbacks[i].Limits.Timeout = time.Duration(251+r) * time.Millisecond
			}
		}
		res, err := bh.reload(context.Background(), &next, func(*catalog) {})
		require.NoError(t, err)
		assert.Equal(t, []string{"copy_f32"}, res.Replaced)
		assert.Len(t, res.Kept, len(cfg.Callbacks)-1)
		replaced += len(res.Replaced)
		ci, err := bh.resolve("copy_f32")
		require.NoError(t, err)
		assert.Equal(t, time.Duration(251+r)*time.Millisecond, ci.cb.Info().Limits.Timeout)
	}
	close(stop)
	wg.Wait()
	total := 0
	calls.Range(func(_, v any) bool { total += v.(int); return true })
	assert.Positive(t, total)
	assert.Equal(t, 20, replaced)
	assert.Len(t, bh.retired, 20, "every replaced catalog kept until close")
}

// TestBridgeErrorsAnswerErrorsIs: the bridge's own errors answer
// errors.Is for their kind, every kind, as the host's do.
func TestBridgeErrorsAnswerErrorsIs(t *testing.T) {
	check := func(err error, want abi.Kind) {
		t.Helper()
		require.Equal(t, want, abi.KindOf(err))
		for _, k := range abi.Kinds() {
			assert.Equal(t, k == want, errors.Is(err, k), "errors.Is(%q, %v)", err, k)
		}
	}
	for _, k := range abi.Kinds() {
		check(&bridgeError{kind: k, msg: "m"}, k)
	}
	check(badArg(arg("inputs"), "NULL"), abi.InvalidArgument)
}

// TestBridgeResolvesContentIDsAsTheHost: a content id shared by callbacks
// under the same settings resolves (to the host's pick); one shared under
// different limits is refused with the host's error naming them, never
// resolved to whichever the bridge listed last.
func TestBridgeResolvesContentIDsAsTheHost(t *testing.T) {
	ctx := context.Background()
	src, err := os.ReadFile("../guests/wat/testkit.wat")
	require.NoError(t, err)
	wasm, err := wat.Compile(string(src))
	require.NoError(t, err)
	h, err := host.New(ctx, nil, host.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	defer h.Close(ctx)
	load := func(name, export string, timeout time.Duration) {
		cb := config.DefaultCallback()
		cb.Name, cb.Export, cb.Signature = name, export, "(x: f32[n]) -> $x"
		cb.Limits.Timeout = timeout
		require.NoError(t, h.LoadModule(ctx, cb, wasm))
	}
	load("tap", "tap", time.Second)
	load("tap_twin", "tap", time.Second)
	load("spin_a", "spin", 100*time.Millisecond)
	load("spin_b", "spin", 3*time.Second)
	bh, err := newBridgeHost(h)
	require.NoError(t, err)
	tap, _ := h.Callback("tap")
	ci, err := bh.resolve(tap.ID)
	require.NoError(t, err)
	assert.Contains(t, []string{"tap", "tap_twin"}, ci.name)
	spin, _ := h.Callback("spin_a")
	_, err = bh.resolve(spin.ID)
	require.ErrorIs(t, err, host.ErrAmbiguousID)
	assert.Equal(t, abi.InvalidArgument, abi.KindOf(err))
	assert.Contains(t, err.Error(), "spin_a, spin_b")
	ci, err = bh.resolve("spin_b")
	require.NoError(t, err)
	assert.Equal(t, "spin_b", ci.name)
}

// A chain step refused after an earlier step failed carries the failed
// step's whole error, worded by the library as that step's own error was
// (callbox_error.failed_text), so no binding rebuilds it; any other error
// carries none.
func TestDescribeFailedText(t *testing.T) {
	ctx := context.Background()
	cfg, err := configfile.Load(writeConfig(t, t.TempDir(), false))
	require.NoError(t, err)
	h, err := host.New(ctx, cfg, host.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	defer h.Close(ctx)
	ch := h.Chain("d")
	_, failed := ch.Invoke(ctx, "fail", abi.From([]float32{1}))
	require.Error(t, failed)
	_, refused := ch.Invoke(ctx, "copy_f32", abi.From([]float32{1}))
	require.Error(t, refused)
	assert.Equal(t, abi.GuestError.Ident()+": "+failed.Error(), describe(refused).failedText)
	assert.Equal(t, describe(failed).text, describe(refused).failedText, "the failed step's text, as its own error gave it")
	assert.Empty(t, describe(failed).failedText)
}

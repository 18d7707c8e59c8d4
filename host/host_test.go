package host_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

// testkit signatures, by export.
var testkitSigs = map[string]string{
	"scale":          "(x: f32[n], factor: f32[]) -> f32[n]",
	"calls":          "() -> s32[]",
	"tap":            "(x: f32[n]) -> $x",
	"spin":           "(x: f32[n]) -> f32[n]",
	"bad_status":     "(x: f32[n]) -> f32[n]",
	"overrun":        "(x: f32[n]) -> f32[n]",
	"redirect":       "(x: f32[n]) -> f32[n]",
	"half_then_trap": "(x: f32[n]) -> f32[n]",
	"bad_error_ptr":  "(x: f32[n]) -> f32[n]",
	"grow":           "(x: f32[n]) -> f32[n]",
	"busy":           "(n: s32[]) -> s32[]",
}

func testkitWasm(t testing.TB) []byte {
	t.Helper()
	src, err := os.ReadFile("../guests/wat/testkit.wat")
	require.NoError(t, err)
	b, err := wat.Compile(string(src))
	require.NoError(t, err)
	return b
}

func engineNames() []string {
	if engines.WasmtimeAvailable() {
		return []string{config.EngineWazero, config.EngineWasmtime}
	}
	return []string{config.EngineWazero}
}

// newHost loads every testkit export as a callback on the given engine.
func newHost(t testing.TB, engine string, tweak func(*config.Callback)) *host.Host {
	t.Helper()
	return newHostCtx(t, context.Background(), engine, tweak)
}

// newHostCtx is newHost with the context host.New is given.
func newHostCtx(t testing.TB, ctx context.Context, engine string, tweak func(*config.Callback)) *host.Host {
	t.Helper()
	return newHostLogged(t, ctx, engine, tweak, slog.New(slog.DiscardHandler))
}

// newHostLogged is newHostCtx logging to logger.
func newHostLogged(t testing.TB, ctx context.Context, engine string, tweak func(*config.Callback), logger *slog.Logger) *host.Host {
	t.Helper()
	opts := []host.Option{host.WithLogger(logger)}
	engine, process := strings.CutSuffix(engine, processSuffix)
	if process {
		opts = append(opts, host.WithWorker(workerPath(t, false)))
	}
	h, err := host.New(ctx, nil, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	wasm := testkitWasm(t)
	for name, sig := range testkitSigs {
		cb := config.DefaultCallback()
		cb.Name, cb.Export, cb.Signature, cb.Engine = name, name, sig, engine
		if process {
			cb.Isolation = config.IsolationProcess
		}
		cb.Limits.Timeout = 2 * time.Second
		cb.Limits.MaxMemory = 1 << 20
		if tweak != nil {
			tweak(&cb)
		}
		require.NoError(t, h.LoadModule(ctx, cb, wasm), name)
	}
	return h
}

func forEngines(t *testing.T, fn func(t *testing.T, engine string)) {
	for _, e := range engineNames() {
		t.Run(e, func(t *testing.T) { fn(t, e) })
	}
}

// processSuffix marks an engine name newHost loads under isolation:
// process ("wazero+process").
const processSuffix = "+" + config.IsolationProcess

// forEnginesAndProcess is forEngines, then each engine again under
// isolation: process: the tests of a semantics process isolation must
// keep (sessions, chains, taps, batches) run through it too.
func forEnginesAndProcess(t *testing.T, fn func(t *testing.T, engine string)) {
	forEngines(t, fn)
	if !engines.ProcessIsolationAvailable() {
		return
	}
	for _, e := range engineNames() {
		t.Run(e+processSuffix, func(t *testing.T) { fn(t, e+processSuffix) })
	}
}

func TestInvokeScale(t *testing.T) {
	forEnginesAndProcess(t, func(t *testing.T, engine string) {
		h := newHost(t, engine, nil)
		x := abi.From([]float32{1, 2, 3, 4.5})
		outs, st, err := invokeStats(context.Background(), h, "scale", x, abi.Scalar[float32](2))
		require.NoError(t, err)
		require.Len(t, outs, 1)
		assert.Equal(t, []float32{2, 4, 6, 9}, abi.MustView[float32](outs[0]))
		assert.Equal(t, abi.Shape{4}, outs[0].Shape)
		assert.Equal(t, uint64(20), st.BytesIn)
		assert.Equal(t, uint64(16), st.BytesOut)
		assert.Greater(t, st.PeakMemory, uint64(0))
		assert.Greater(t, st.Wall, time.Duration(0))
	})
}

func TestEmptyAndScalarTensors(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		h := newHost(t, engine, nil)
		outs, err := h.Invoke(context.Background(), "scale", abi.From([]float32{}), abi.Scalar[float32](3))
		require.NoError(t, err)
		assert.Equal(t, abi.Shape{0}, outs[0].Shape)
		assert.Empty(t, outs[0].Data)
	})
}

func TestSignatureMismatchNamesArgument(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		h := newHost(t, engine, nil)
		_, err := h.Invoke(context.Background(), "scale", abi.From([]float32{1, 2}), abi.From([]float32{1, 2}))
		require.ErrorIs(t, err, host.InvalidArgument)
		assert.Contains(t, err.Error(), `argument 1 (factor): expected f32[], got f32[2]`)

		_, err = h.Invoke(context.Background(), "scale", abi.From([]int32{1, 2}), abi.Scalar[float32](1))
		assert.Contains(t, err.Error(), `argument 0 (x): expected f32[n], got s32[2]`)

		_, err = h.Invoke(context.Background(), "scale", abi.From([]float32{1}))
		assert.Contains(t, err.Error(), "got 1 inputs")
	})
}

func TestGuestErrorKeepsInstance(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		h := newHost(t, engine, func(cb *config.Callback) { cb.MaxInstances = 1 })
		ctx := context.Background()
		x := abi.From([]float32{1})
		_, err := h.Invoke(ctx, "scale", x, abi.Scalar[float32](1))
		require.NoError(t, err)
		_, err = h.Invoke(ctx, "scale", x, abi.Scalar[float32](-1))
		var ce *host.CallbackError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, host.GuestError, ce.Kind())
		assert.Equal(t, abi.StatusInvalidArgument, ce.Status)
		assert.Equal(t, "negative factor", ce.GuestMessage)
		assert.Equal(t, "scale", ce.Callback)
		assert.Equal(t, `callback "scale" failed: guest returned INVALID_ARGUMENT: negative factor`, err.Error())
		// The instance that returned an error status is kept: its counter
		// still counts the first call.
		_, err = h.Invoke(ctx, "scale", x, abi.Scalar[float32](1))
		require.NoError(t, err)
	})
}

func TestTimeoutThenServe(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		h := newHost(t, engine, func(cb *config.Callback) { cb.Limits.Timeout = 50 * time.Millisecond })
		start := time.Now()
		_, err := h.Invoke(context.Background(), "spin", abi.From([]float32{1}))
		elapsed := time.Since(start)
		require.ErrorIs(t, err, host.Timeout)
		var ce *host.CallbackError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, "timeout after 50ms", ce.Message)
		// where the guest was: testkit's spin, function 10 (no name section)
		assert.Contains(t, err.Error(), `callback "spin" failed: timeout after 50ms (at func[10] @0x`)
		// A generous bound for a loaded machine (the timeout's accuracy is
		// make bench's measurement); not before the timeout.
		assert.Less(t, elapsed, 10*time.Second)
		assert.GreaterOrEqual(t, elapsed, 50*time.Millisecond)

		outs, err := h.Invoke(context.Background(), "scale", abi.From([]float32{2}), abi.Scalar[float32](2))
		require.NoError(t, err)
		assert.Equal(t, []float32{4}, abi.MustView[float32](outs[0]))
	})
}

func TestABIViolations(t *testing.T) {
	cases := map[string]string{
		"bad_status":    "status 77 is not an ABI v1 status",
		"overrun":       "guest wrote past the end of its 8-byte buffer: the first changed byte is at end+0",
		"redirect":      "the data pointer of output 0's descriptor",
		"bad_error_ptr": "callbox.error message at guest offset 4294967288",
	}
	forEngines(t, func(t *testing.T, engine string) {
		h := newHost(t, engine, nil)
		for name, want := range cases {
			_, err := h.Invoke(context.Background(), name, abi.From([]float32{1, 2}))
			require.ErrorIs(t, err, host.ABIViolation, name)
			assert.Contains(t, err.Error(), want, name)
			assert.Contains(t, err.Error(), `callback "`+name+`"`)
		}
		// The host keeps serving.
		_, err := h.Invoke(context.Background(), "scale", abi.From([]float32{2}), abi.Scalar[float32](2))
		require.NoError(t, err)
	})
}

func TestFailedCallLeavesOutputsUntouched(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		h := newHost(t, engine, nil)
		out := abi.From([]float32{7, 7, 7, 7})
		before := bytes.Clone(out.Data)
		_, err := h.Do(context.Background(), &host.Request{Callback: "half_then_trap", Inputs: []host.Tensor{abi.From([]float32{1, 2, 3, 4})}, Outputs: []host.Tensor{out}})
		require.ErrorIs(t, err, host.Unreachable)
		assert.Equal(t, before, out.Data)
	})
}

func TestInvokeIntoWritesCallerBuffers(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		h := newHost(t, engine, nil)
		out := abi.From(make([]float32, 3))
		_, err := h.Do(context.Background(), &host.Request{Callback: "scale", Inputs: []host.Tensor{abi.From([]float32{1, 2, 3}), abi.Scalar[float32](10)}, Outputs: []host.Tensor{out}})
		require.NoError(t, err)
		assert.Equal(t, []float32{10, 20, 30}, abi.MustView[float32](out))

		wrong := abi.From(make([]float32, 2))
		_, err = h.Do(context.Background(), &host.Request{Callback: "scale", Inputs: []host.Tensor{abi.From([]float32{1, 2, 3}), abi.Scalar[float32](10)}, Outputs: []host.Tensor{wrong}})
		require.ErrorIs(t, err, host.InvalidArgument)
		assert.Contains(t, err.Error(), "output 0: buffer is f32[2], result is f32[3]")
	})
}

// TestMemoryLimit: a guest that grows a page at a time until refused ends
// at exactly max_memory (config makes it whole pages), not one page more:
// the error alone would read the same if an engine enforced twice the
// limit, so the peak is asserted as a number, on both engines.
func TestMemoryLimit(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		for _, limit := range []uint64{1 << 20, 3<<20 + 64<<10} {
			h := newHost(t, engine, func(cb *config.Callback) { cb.Limits.MaxMemory = limit })
			_, st, err := invokeStats(context.Background(), h, "grow", abi.From([]float32{1}))
			require.ErrorIs(t, err, host.MemoryLimit)
			assert.Contains(t, err.Error(), "memory limit of "+config.FormatSize(limit)+" reached")
			assert.Equal(t, limit, st.PeakMemory, "limit %d: the guest's memory when it was refused", limit)
		}
	})
}

func TestPassThroughIsNotCopied(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		h := newHost(t, engine, nil)
		x := abi.From([]float32{1, 2, 3})
		outs, st, err := invokeStats(context.Background(), h, "tap", x)
		require.NoError(t, err)
		assert.Equal(t, unsafe.SliceData(x.Data), unsafe.SliceData(outs[0].Data))
		assert.Equal(t, uint64(0), st.BytesOut)
	})
}

func TestScratchReusedAcrossCalls(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		h := newHost(t, engine, func(cb *config.Callback) { cb.MaxInstances = 1 })
		ctx := context.Background()
		x := abi.From(make([]float32, 1024))
		_, first, err := invokeStats(ctx, h, "scale", x, abi.Scalar[float32](1))
		require.NoError(t, err)
		for i := 0; i < 10_000; i++ {
			_, st, err := invokeStats(ctx, h, "scale", x, abi.Scalar[float32](1))
			require.NoError(t, err)
			require.Equal(t, first.PeakMemory, st.PeakMemory, "call %d grew guest memory", i)
			require.False(t, st.NewInstance)
		}
	})
}

func TestCallbackID(t *testing.T) {
	h1 := newHost(t, config.EngineWazero, nil)
	h2 := newHost(t, engineNames()[len(engineNames())-1], nil)
	a, ok := h1.Callback("scale")
	require.True(t, ok)
	b, _ := h2.Callback("scale")
	assert.Equal(t, a.ID, b.ID, "the id depends on content, not on the process or engine")
	c, _ := h1.Callback("spin")
	assert.NotEqual(t, a.ID, c.ID)
	assert.Regexp(t, `^cb1-[0-9a-f]{64}$`, a.ID)
}

func TestGuestLogsCarryCallback(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
	h, err := host.New(context.Background(), nil, host.WithLogger(logger))
	require.NoError(t, err)
	defer h.Close(context.Background())
	cb := config.DefaultCallback()
	cb.Name, cb.Signature = "tap", testkitSigs["tap"]
	require.NoError(t, h.LoadModule(context.Background(), cb, testkitWasm(t)))
	_, err = h.Invoke(context.Background(), "tap", abi.From([]float32{1}))
	require.NoError(t, err)
	info, _ := h.Callback("tap")
	mu.Lock()
	defer mu.Unlock()
	assert.Contains(t, buf.String(), `"msg":"guest log"`)
	assert.Contains(t, buf.String(), `"source":"guest","text":"scaling"`)
	assert.Contains(t, buf.String(), `"callback":"tap"`)
	assert.Contains(t, buf.String(), `"callback_id":"`+info.ID+`"`)
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestConcurrentCalls(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		h := newHost(t, engine, func(cb *config.Callback) { cb.Limits.Timeout = 100 * time.Millisecond })
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for g := 0; g < 16; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < 20; i++ {
					if g%8 == 7 && i%10 == 0 {
						_, err := h.Invoke(context.Background(), "bad_status", abi.From([]float32{1}))
						if !errors.Is(err, host.ABIViolation) {
							errs <- err
						}
						continue
					}
					x := abi.From([]float32{float32(g), float32(i)})
					outs, err := h.Invoke(context.Background(), "scale", x, abi.Scalar[float32](2))
					if err != nil {
						errs <- err
						continue
					}
					if v := abi.MustView[float32](outs[0]); v[0] != float32(2*g) || v[1] != float32(2*i) {
						errs <- errors.New("wrong result")
					}
				}
			}(g)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

func TestUnknownCallbackAndClosedHost(t *testing.T) {
	h := newHost(t, config.EngineWazero, nil)
	_, err := h.Invoke(context.Background(), "nope")
	assert.ErrorIs(t, err, host.ErrUnknownCallback)
	require.NoError(t, h.Close(context.Background()))
	_, err = h.Invoke(context.Background(), "scale", abi.From([]float32{1}), abi.Scalar[float32](1))
	assert.ErrorIs(t, err, host.ErrClosed)
}

// TestFrameAboveMaxMemorySaysWhatItNeeds: a call whose frame cannot fit
// under max_memory fails as MemoryLimit naming the frame's size and the
// max_memory it needs (it was "callbox_alloc(...) returned 0").
func TestFrameAboveMaxMemorySaysWhatItNeeds(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		h := newHost(t, engine, nil) // max_memory 1 MiB
		x := abi.From(make([]float32, 256<<10))
		_, err := h.Invoke(context.Background(), "scale", x, abi.Scalar[float32](2))
		require.Error(t, err)
		assert.True(t, errors.Is(err, host.MemoryLimit), "%v", err)
		assert.Regexp(t, `the call needs \d+(KiB|MiB|B) of guest memory for its frame \(inputs and outputs\) on top of the \d+(KiB|MiB) the guest uses, beyond max_memory 1MiB: set max_memory to at least [2-9]MiB`, err.Error())
		// The host keeps serving.
		outs, err := h.Invoke(context.Background(), "scale", abi.From([]float32{1}), abi.Scalar[float32](2))
		require.NoError(t, err)
		assert.Equal(t, []float32{2}, abi.MustView[float32](outs[0]))
	})
}

// A host opened WithoutCallTiming leaves Guest and Wall zero and still
// enforces the timeout (its deadline starts from the call's one clock read).
func TestWithoutCallTiming(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		h, err := host.New(ctx, nil, host.WithLogger(slog.New(slog.DiscardHandler)), host.WithoutCallTiming())
		require.NoError(t, err)
		defer h.Close(ctx)
		wasm := testkitWasm(t)
		for _, name := range []string{"scale", "spin"} {
			cb := config.DefaultCallback()
			cb.Name, cb.Export, cb.Signature, cb.Engine = name, name, testkitSigs[name], engine
			cb.Limits.Timeout = 50 * time.Millisecond
			require.NoError(t, h.LoadModule(ctx, cb, wasm))
		}
		outs, st, err := invokeStats(ctx, h, "scale", abi.From([]float32{1, 2}), abi.Scalar[float32](3))
		require.NoError(t, err)
		assert.Equal(t, []float32{3, 6}, abi.MustView[float32](outs[0]))
		assert.Zero(t, st.Wall)
		assert.Zero(t, st.Guest)
		assert.Equal(t, uint64(12), st.BytesIn, "the other stats are kept")
		_, err = h.Invoke(ctx, "spin", abi.From([]float32{1}))
		var ce *host.CallbackError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, host.Timeout, ce.Kind())
	})
}

// One pooled instance serves calls whose frames grow and shrink: its
// scratch region is replaced as it grows (testkit's allocator has no
// callbox_free, so nothing is released), and the instance is never
// discarded.
func TestPooledInstanceServesGrowingFrames(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		h := newHost(t, engine, func(cb *config.Callback) { cb.MaxInstances, cb.Limits.MaxMemory = 1, 16<<20 })
		ctx := context.Background()
		for _, n := range []int{1, 1000, 100_000, 10, 300_000, 3} {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(i % 1000)
			}
			outs, err := h.Invoke(ctx, "scale", abi.From(x), abi.Scalar[float32](3))
			require.NoError(t, err, "n=%d", n)
			got := abi.MustView[float32](outs[0])
			require.Len(t, got, n)
			assert.Equal(t, 3*x[n-1], got[n-1], "n=%d", n)
		}
		st, _ := h.PoolStats("scale")
		assert.Equal(t, uint64(0), st.Discarded, "the one instance served every call")
		assert.Equal(t, 1, st.Live)
	})
}

// A call's timings: the guest's time is part of the call's wall time,
// and a busy guest's is most of it.
func TestCallTimingsAddUp(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		h := newHost(t, engine, nil)
		// busy(n): 100 million rounds of an LCG, a tenth of a second or
		// more of guest work beside microseconds of the host's.
		_, st, err := invokeStats(context.Background(), h, "busy", abi.Scalar[int32](100_000_000))
		require.NoError(t, err)
		assert.Positive(t, st.Guest)
		assert.LessOrEqual(t, st.Guest, st.Wall, "the guest's time within the call's")
		assert.Greater(t, st.Guest, st.Wall/2, "a busy guest is most of its call: guest %v of %v", st.Guest, st.Wall)
	})
}

// max_output counts the results a call writes, not its pass-throughs: a
// call whose results exceed it is refused before it runs; a pass-through
// of an input larger than it is not.
func TestMaxOutputCountsWrittenResults(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		h := newHost(t, engine, func(cb *config.Callback) { cb.Limits.MaxOutput = 1 << 10 })
		ctx := context.Background()
		big := abi.From(make([]float32, 1024)) // 4 KiB
		_, err := h.Invoke(ctx, "scale", big, abi.Scalar[float32](2))
		require.ErrorIs(t, err, host.InvalidArgument)
		assert.Contains(t, err.Error(), "results need 4KiB, above max_output 1KiB")
		for i := range abi.MustView[float32](big) {
			abi.MustView[float32](big)[i] = float32(i)
		}
		outs, err := h.Invoke(ctx, "tap", big)
		require.NoError(t, err, "a pass-through writes no result of its own")
		assert.Equal(t, abi.MustView[float32](big), abi.MustView[float32](outs[0]), "the pass-through is its input")
		_, err = h.Invoke(ctx, "scale", abi.From(make([]float32, 256)), abi.Scalar[float32](2))
		require.NoError(t, err, "1 KiB of results is within max_output 1KiB")
	})
}

// A pass-through result delivered into a caller's buffer is copied there,
// unless that buffer is the input itself.
func TestPassThroughIntoABuffer(t *testing.T) {
	h := newHost(t, config.EngineWazero, nil)
	ctx := context.Background()
	x := abi.From([]float32{1, 2, 3})
	out := abi.From([]float32{0, 0, 0})
	_, err := h.Do(ctx, &host.Request{Callback: "tap", Inputs: []host.Tensor{x}, Outputs: []host.Tensor{out}})
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2, 3}, abi.MustView[float32](out))
	_, err = h.Do(ctx, &host.Request{Callback: "tap", Inputs: []host.Tensor{x}, Outputs: []host.Tensor{x}})
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2, 3}, abi.MustView[float32](x))
}

// A callback's Info reports its WASI setting as configured.
func TestInfoReportsWASI(t *testing.T) {
	for _, wasi := range []string{config.WASINone, config.WASIMinimal} {
		h := newHost(t, config.EngineWazero, func(cb *config.Callback) { cb.WASI = wasi })
		info, ok := h.Callback("scale")
		require.True(t, ok)
		assert.Equal(t, wasi == config.WASIMinimal, info.WASI, "wasi: %s", wasi)
	}
}

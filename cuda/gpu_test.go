package cuda_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/cuda"
	"github.com/seed4b3e0ccb/callbox/cuda/cudatest"
	"github.com/seed4b3e0ccb/callbox/host"
)

// TestPinnedPath: a pooled instance with stable memory is pinned on its
// first GPU call and never again; every copy goes straight between the
// device and pinned guest memory; the host unpins it when it closes it.
func TestPinnedPath(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		r := newRig(t, engine, cuda.Options{})
		cb := r.cb(t, "scale")
		x := ramp(1024, 0.5)
		for round := 1; round <= 3; round++ {
			in := r.upload(t, r.s, x)
			f := r.upload(t, r.s, []float32{float32(round)}, []int64{}...)
			f.Shape = abi.Shape{}
			out := r.output(1024, -1)
			st, err := r.gpu.Call(ctx, cb, r.s, []cuda.Buffer{in, f}, []cuda.Buffer{out})
			require.NoError(t, err)
			assert.Equal(t, scaled(x, float32(round)), r.read(out))
			assert.Equal(t, cuda.PathPinned, st.Path)
			assert.Equal(t, round == 1, st.Pinned, "only the instance's first GPU call pins (round %d)", round)
			assert.Equal(t, uint64(4096+4), st.D2HBytes)
			assert.Equal(t, uint64(4096), st.H2DBytes)
			assert.Zero(t, r.dev.Pending(r.s), "the call returns after its copies completed")
		}
		fs := r.dev.Stats()
		assert.Equal(t, 9, fs.PinnedCopies, "every host side was registered guest memory")
		assert.Zero(t, fs.PageableCopies)
		tot := r.gpu.Totals()
		assert.Equal(t, uint64(1), tot.Pins)
		assert.Equal(t, uint64(3), tot.PinnedCalls)
		assert.Equal(t, 1, tot.PinnedInstances)
		assert.Equal(t, fs.Registered, tot.PinnedBytes)
		assert.NotZero(t, tot.PinnedBytes)

		require.NoError(t, r.h.Close(ctx))
		assert.Empty(t, r.dev.Registrations(), "closing the host unpins its instances")
		assert.Equal(t, uint64(1), r.gpu.Totals().Unpins)
		assert.Zero(t, r.gpu.Totals().PinnedBytes)
		assert.Empty(t, r.dev.Violations())
	})
}

// TestPinnedGrowth: memory the instance grows by is registered on its own,
// next to what was pinned before, never the whole reservation again.
func TestPinnedGrowth(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		r := newRig(t, engine, cuda.Options{})
		cb := r.cb(t, "tap")
		call := func(n int) cuda.Stats {
			in := r.upload(t, r.s, ramp(n, 1))
			st, err := r.gpu.Call(ctx, cb, r.s, []cuda.Buffer{in}, []cuda.Buffer{in})
			require.NoError(t, err)
			assert.Equal(t, ramp(n, 1), r.read(in))
			return st
		}
		st := call(256)
		require.True(t, st.Pinned)
		regs := r.dev.Registrations()
		require.Len(t, regs, 1)
		var base uintptr
		var first uint64
		for b, n := range regs {
			base, first = b, n
		}
		st = call(1 << 20) // 4 MiB: the frame no longer fits; memory grows
		assert.True(t, st.Pinned, "the grown part is pinned")
		assert.Equal(t, cuda.PathPinned, st.Path)
		regs = r.dev.Registrations()
		require.Len(t, regs, 2)
		assert.Equal(t, first, regs[base], "the first registration stays as it was")
		_, next := regs[base+uintptr(first)]
		assert.True(t, next, "the grown part starts where the pinned extent ended")
		assert.Equal(t, uint64(2), r.gpu.Totals().Pins)
		st = call(1 << 20)
		assert.False(t, st.Pinned)
		require.NoError(t, r.h.Close(ctx))
		assert.Empty(t, r.dev.Registrations())
		assert.Equal(t, 2, r.dev.Stats().Unregisters, "each registration is undone")
	})
}

// TestStagedPathFreshIsolation: a fresh instance per call is never pinned
// (pinning costs more than the copy): its copies go through the GPU's
// pinned staging buffer, which is allocated once and reused.
func TestStagedPathFreshIsolation(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, "wazero", cuda.Options{})
	cb := r.cb(t, "scale_fresh")
	x := ramp(4096, 1)
	for round := 1; round <= 3; round++ {
		in := r.upload(t, r.s, x)
		f := r.upload(t, r.s, []float32{2})
		f.Shape = abi.Shape{}
		out := r.output(4096, 0)
		st, err := r.gpu.Call(ctx, cb, r.s, []cuda.Buffer{in, f}, []cuda.Buffer{out})
		require.NoError(t, err)
		assert.Equal(t, scaled(x, 2), r.read(out))
		assert.Equal(t, cuda.PathStaged, st.Path)
		assert.False(t, st.Pinned)
	}
	tot := r.gpu.Totals()
	assert.Zero(t, tot.Pins, "no guest memory pinned")
	assert.Equal(t, uint64(3), tot.StagedCalls)
	assert.Equal(t, 1, tot.StagingBuffers, "one staging buffer, reused")
	fs := r.dev.Stats()
	assert.Equal(t, 9, fs.PinnedCopies, "every copy's host side is the pinned staging buffer")
	assert.Equal(t, 1, fs.Registers)
	require.NoError(t, r.gpu.Close())
	assert.Empty(t, r.dev.Registrations(), "Close frees the staging buffers")
}

// TestModes: Staged and Pageable never pin guest memory; Pageable never
// registers anything; a staging pool too small for a call falls back to
// pageable copies.
func TestModes(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		opts cuda.Options
		n    int
		want cuda.CopyPath
	}{
		{cuda.Options{Mode: cuda.Staged}, 1024, cuda.PathStaged},
		{cuda.Options{Mode: cuda.Pageable}, 1024, cuda.PathPageable},
		{cuda.Options{Mode: cuda.Staged, StagingLimit: 1 << 20}, 1 << 19, cuda.PathPageable}, // 2 MiB > the 1 MiB pool
	} {
		t.Run(fmt.Sprintf("%s-%d", tc.opts.Mode, tc.n), func(t *testing.T) {
			r := newRig(t, "wazero", tc.opts)
			x := ramp(tc.n, 3)
			in := r.upload(t, r.s, x)
			f := r.upload(t, r.s, []float32{2.5})
			f.Shape = abi.Shape{}
			out := r.output(tc.n, 0)
			st, err := r.gpu.Call(ctx, r.cb(t, "scale"), r.s, []cuda.Buffer{in, f}, []cuda.Buffer{out})
			require.NoError(t, err)
			assert.Equal(t, scaled(x, 2.5), r.read(out))
			assert.Equal(t, tc.want, st.Path)
			assert.Zero(t, r.gpu.Totals().Pins)
			fs := r.dev.Stats()
			if tc.want == cuda.PathPageable {
				assert.Zero(t, fs.PinnedCopies)
				assert.Equal(t, 3, fs.PageableCopies)
				assert.Zero(t, fs.Registered)
			} else {
				assert.Equal(t, 3, fs.PinnedCopies)
			}
		})
	}
}

// TestPassThrough: a $x result whose output buffer is its input's copies
// nothing back; with a buffer of its own it is copied device to device,
// from the caller's input, not from guest memory.
func TestPassThrough(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		r := newRig(t, engine, cuda.Options{})
		cb := r.cb(t, "tap")
		x := ramp(8192, 2)
		in := r.upload(t, r.s, x)
		st, err := r.gpu.Call(ctx, cb, r.s, []cuda.Buffer{in}, []cuda.Buffer{in})
		require.NoError(t, err)
		assert.Equal(t, 1, st.PassThrough)
		assert.Equal(t, uint64(32768), st.D2HBytes, "the guest reads its input")
		assert.Zero(t, st.H2DBytes+st.D2DBytes, "nothing written back")
		assert.Equal(t, x, r.read(in))

		out := r.output(8192, 9)
		st, err = r.gpu.Call(ctx, cb, r.s, []cuda.Buffer{in}, []cuda.Buffer{out})
		require.NoError(t, err)
		assert.Zero(t, st.PassThrough)
		assert.Zero(t, st.H2DBytes)
		assert.Equal(t, uint64(32768), st.D2DBytes)
		assert.Equal(t, x, r.read(out))
	})
}

// TestHostileGuests: a guest that traps after its inputs were copied in,
// returns an error status, or runs past its timeout leaves the device
// output buffers exactly as they were; a broken instance is unpinned when
// it is discarded.
func TestHostileGuests(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		r := newRig(t, engine, cuda.Options{})
		for _, tc := range []struct {
			name string
			kind abi.Kind
		}{
			{"half_then_trap", abi.Unreachable},
			{"bad_status", abi.ABIViolation},
			{"spin", abi.Timeout},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := r.dev.Stats()
				in := r.upload(t, r.s, ramp(512, 1))
				out := r.output(512, 42)
				_, err := r.gpu.Call(ctx, r.cb(t, tc.name), r.s, []cuda.Buffer{in}, []cuda.Buffer{out})
				var ce *host.CallbackError
				require.ErrorAs(t, err, &ce)
				assert.True(t, errors.Is(err, tc.kind), "%v", err)
				assert.Equal(t, filled(512, 42), r.read(out), "the output buffer is untouched")
				after := r.dev.Stats()
				assert.Equal(t, before.D2HBytes+2048, after.D2HBytes, "the input reached the guest")
				assert.Equal(t, before.H2DBytes, after.H2DBytes, "nothing was copied back")
				assert.Zero(t, r.dev.Pending(r.s))
			})
		}
		tot := r.gpu.Totals()
		assert.Equal(t, uint64(3), tot.Pins, "each broken instance was pinned once")
		assert.Equal(t, uint64(3), tot.Unpins, "and unpinned when discarded")
		assert.Empty(t, r.dev.Registrations())
		assert.Empty(t, r.dev.Violations())
	})
}

// TestRefusals: buffers that do not fit are refused before anything is
// copied, naming the argument or result.
func TestRefusals(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, "wazero", cuda.Options{})
	cb := r.cb(t, "scale")
	in := r.upload(t, r.s, ramp(4, 1))
	f := r.upload(t, r.s, []float32{2})
	f.Shape = abi.Shape{}
	hostMem := make([]byte, 16)
	hostBuf := cuda.Buffer{Ptr: cuda.DevicePtr(uintptrOf(hostMem)), DType: abi.F32, Shape: abi.Shape{4}}
	for _, tc := range []struct {
		name     string
		ins, out []cuda.Buffer
		want     string
	}{
		{"shape", []cuda.Buffer{in, f}, []cuda.Buffer{r.output(5, 0)}, "output 0: buffer is f32[5], result is f32[4]"},
		{"count", []cuda.Buffer{in, f}, nil, "got 0 output buffers, signature (x: f32[n], factor: f32[]) -> f32[n] has 1 results"},
		{"dtype", []cuda.Buffer{{Ptr: in.Ptr, DType: abi.S32, Shape: abi.Shape{4}}, f}, []cuda.Buffer{r.output(4, 0)}, "argument 0"},
		{"host memory", []cuda.Buffer{hostBuf, f}, []cuda.Buffer{r.output(4, 0)}, "argument 0: 0x"},
		{"null output", []cuda.Buffer{in, f}, []cuda.Buffer{{DType: abi.F32, Shape: abi.Shape{4}}}, "result 0: null device pointer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := r.dev.Stats().Copies
			_, err := r.gpu.Call(ctx, cb, r.s, tc.ins, tc.out)
			require.Error(t, err)
			assert.True(t, errors.Is(err, abi.InvalidArgument), "%v", err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), `callback "scale"`)
			assert.Equal(t, before, r.dev.Stats().Copies, "nothing copied")
		})
	}
	_, err := r.gpu.Call(ctx, cb, r.s, []cuda.Buffer{hostBuf, f}, []cuda.Buffer{r.output(4, 0)})
	assert.Contains(t, err.Error(), "is pageable host memory, not device memory")
}

// TestDeviceFailures: a failing copy or sync fails the call as a host-side
// failure, leaves the outputs untouched, and the instance serves the next
// call.
func TestDeviceFailures(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, "wazero", cuda.Options{})
	cb := r.cb(t, "tap")
	boom := errors.New("injected device failure")
	for _, op := range []cudatest.FakeOp{cudatest.OpCopyD2H, cudatest.OpSyncStream, cudatest.OpCopyD2D} {
		t.Run(string(op), func(t *testing.T) {
			in := r.upload(t, r.s, ramp(64, 1))
			out := r.output(64, 5)
			r.dev.FailNext(op, boom)
			_, err := r.gpu.Call(ctx, cb, r.s, []cuda.Buffer{in}, []cuda.Buffer{out})
			require.ErrorIs(t, err, boom)
			assert.True(t, errors.Is(err, abi.HostPanic))
			assert.Contains(t, err.Error(), `callback "tap" failed on the GPU path`)
			assert.Equal(t, filled(64, 5), r.read(out))
			require.NoError(t, r.dev.SyncStream(r.s))
			_, err = r.gpu.Call(ctx, cb, r.s, []cuda.Buffer{in}, []cuda.Buffer{out})
			require.NoError(t, err)
			assert.Equal(t, ramp(64, 1), r.read(out))
		})
	}
	// A failed event falls back to syncing the stream: still correct.
	in := r.upload(t, r.s, ramp(64, 1))
	out := r.output(64, 5)
	r.dev.FailNext(cudatest.OpSyncEvent, boom)
	_, err := r.gpu.Call(ctx, cb, r.s, []cuda.Buffer{in}, []cuda.Buffer{out})
	require.NoError(t, err)
	assert.Equal(t, ramp(64, 1), r.read(out))
	assert.Zero(t, r.dev.Pending(r.s))
}

// TestConcurrentStreams: calls on several streams at once, pooled and
// fresh, each with its own data; every result is right and every stream
// is drained.
func TestConcurrentStreams(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		r := newRig(t, engine, cuda.Options{})
		var wg sync.WaitGroup
		for w := 0; w < 6; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := r.dev.NewStream()
				name := "scale"
				if w%3 == 2 {
					name = "scale_fresh"
				}
				cb := r.cb(t, name)
				for i := 0; i < 15; i++ {
					n := 256 * (1 + (w+i)%4)
					x := ramp(n, float32(w+1))
					in := r.upload(t, s, x)
					f := r.upload(t, s, []float32{float32(i)})
					f.Shape = abi.Shape{}
					out := r.output(n, -7)
					_, err := r.gpu.Call(ctx, cb, s, []cuda.Buffer{in, f}, []cuda.Buffer{out})
					if !assert.NoError(t, err) {
						return
					}
					assert.Equal(t, scaled(x, float32(i)), r.read(out), "worker %d call %d", w, i)
					assert.Zero(t, r.dev.Pending(s))
				}
			}()
		}
		wg.Wait()
		tot := r.gpu.Totals()
		assert.Equal(t, uint64(90), tot.Calls)
		assert.LessOrEqual(t, tot.PinnedInstances, 4, "at most max_instances pooled instances pinned")
		assert.Equal(t, uint64(30), tot.StagedCalls)
		require.NoError(t, r.h.Close(ctx))
		assert.Empty(t, r.dev.Violations())
	})
}

// TestCallChain: GPU calls on a chain run in order with other chain calls;
// a failure stops the chain; a refused call names the chain.
func TestCallChain(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, "wazero", cuda.Options{})
	ch := r.h.Chain("gpu")
	x := ramp(16, 1)
	in := r.upload(t, r.s, x)
	f := r.upload(t, r.s, []float32{3})
	f.Shape = abi.Shape{}
	out := r.output(16, 0)
	_, err := r.gpu.CallChain(ctx, ch, "scale", r.s, []cuda.Buffer{in, f}, []cuda.Buffer{out})
	require.NoError(t, err)
	assert.Equal(t, scaled(x, 3), r.read(out))

	_, err = r.gpu.CallChain(ctx, ch, "scale", r.s, []cuda.Buffer{in, f}, []cuda.Buffer{r.output(3, 0)})
	var ge *cuda.Error
	require.ErrorAs(t, err, &ge)
	assert.True(t, errors.Is(err, abi.InvalidArgument))
	assert.Equal(t, "gpu", ge.Chain)
	assert.Equal(t, uint64(2), ge.Seq)
	assert.Contains(t, err.Error(), `(chain "gpu" #2)`)

	out2 := r.output(16, 1)
	_, err = r.gpu.CallChain(ctx, ch, "scale", r.s, []cuda.Buffer{in, f}, []cuda.Buffer{out2})
	require.ErrorIs(t, err, host.ErrChainFailed)
	assert.Equal(t, filled(16, 1), r.read(out2), "a call after the failure does not run")
	require.Error(t, ch.Reset())

	trapOut := r.output(16, 8)
	_, err = r.gpu.CallChain(ctx, ch, "half_then_trap", r.s, []cuda.Buffer{in}, []cuda.Buffer{trapOut})
	var ce *host.CallbackError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, uint64(4), ce.Seq)
	assert.Equal(t, filled(16, 8), r.read(trapOut))
}

func TestNoRuntime(t *testing.T) {
	if _, err := cuda.OpenRuntime(); err == nil {
		t.Skip("this machine has a CUDA runtime")
	}
	ctx := context.Background()
	dev := &cuda.LazyRuntime{}
	r := newRig(t, "wazero", cuda.Options{})
	gpu := cuda.New(dev, cuda.Options{})
	_, err := gpu.Call(ctx, r.cb(t, "tap"), 0, []cuda.Buffer{{Ptr: 0x1000, DType: abi.F32, Shape: abi.Shape{4}}}, []cuda.Buffer{{Ptr: 0x1000, DType: abi.F32, Shape: abi.Shape{4}}})
	require.ErrorIs(t, err, cuda.ErrNoRuntime)
	assert.Contains(t, err.Error(), "libcudart.so.13")
	assert.Contains(t, err.Error(), "libcudart.so.12")
	_, err2 := dev.NewEvent()
	assert.Equal(t, errors.Unwrap(err).Error(), err2.Error(), "one load error, every time")
}

// TestPinFailureFallsBack: an instance whose memory cannot be pinned
// copies through the staging pool, and is not tried again.
func TestPinFailureFallsBack(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, "wazero", cuda.Options{})
	cb := r.cb(t, "tap")
	r.dev.FailNext(cudatest.OpRegister, errors.New("injected: range includes an inaccessible page"))
	for i := 0; i < 2; i++ {
		in := r.upload(t, r.s, ramp(100, 1))
		out := r.output(100, 0)
		st, err := r.gpu.Call(ctx, cb, r.s, []cuda.Buffer{in}, []cuda.Buffer{out})
		require.NoError(t, err)
		assert.Equal(t, cuda.PathStaged, st.Path)
		assert.Equal(t, ramp(100, 1), r.read(out))
	}
	tot := r.gpu.Totals()
	assert.Zero(t, tot.Pins)
	assert.Equal(t, 1, r.dev.Stats().Registers, "the staging buffer only; the instance was not tried again")
}

// TestUnsettledStagingIsNotReused: a staging buffer whose copies could not
// be waited for is never handed to another call.
func TestUnsettledStagingIsNotReused(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, "wazero", cuda.Options{})
	cb := r.cb(t, "scale_fresh")
	call := func() error {
		in := r.upload(t, r.s, ramp(64, 1))
		f := r.upload(t, r.s, []float32{1})
		f.Shape = abi.Shape{}
		_, err := r.gpu.Call(ctx, cb, r.s, []cuda.Buffer{in, f}, []cuda.Buffer{r.output(64, 0)})
		return err
	}
	r.dev.FailNext(cudatest.OpSyncStream, errors.New("injected: sticky device error"))
	require.Error(t, call())
	require.NoError(t, r.dev.SyncStream(r.s))
	require.NoError(t, call())
	assert.Equal(t, 2, r.dev.Stats().Registers, "a second staging buffer; the first is never reused")
	require.NoError(t, call())
	assert.Equal(t, 2, r.dev.Stats().Registers, "the healthy buffer is reused")
}

func TestParseMode(t *testing.T) {
	for s, want := range map[string]cuda.Mode{"": cuda.Auto, "auto": cuda.Auto, "Pinned": cuda.Auto, "staged": cuda.Staged, " pageable ": cuda.Pageable} {
		got, err := cuda.ParseMode(s)
		require.NoError(t, err)
		assert.Equal(t, want, got, s)
	}
	_, err := cuda.ParseMode("fast")
	assert.ErrorContains(t, err, `CALLBOX_CUDA_COPY="fast": want auto, staged or pageable`)
}

// forgetful wraps the fake with one of the GPU path's waits skipped, as a
// buggy path would: the tests below show the fake turns each bug into
// wrong data.
type forgetful struct {
	*cudatest.Fake
	noStreamSync, noEventSync bool
}

func (f *forgetful) SyncStream(s cuda.Stream) error {
	if f.noStreamSync {
		return nil
	}
	return f.Fake.SyncStream(s)
}

func (f *forgetful) SyncEvent(e cuda.Event) error {
	if f.noEventSync {
		return nil
	}
	return f.Fake.SyncEvent(e)
}

// TestMissingSyncInThePathIsCaught: with the input sync skipped the guest
// reads Poison, so the result is wrong. With the final wait skipped the
// call returns with its result copy still queued; the pooled instance then
// serves a call on another stream, and the first call's output receives
// the second call's result: the reuse before completion shows up as wrong
// data.
func TestMissingSyncInThePathIsCaught(t *testing.T) {
	ctx := context.Background()
	t.Run("no input sync", func(t *testing.T) {
		r := newRig(t, "wazero", cuda.Options{})
		gpu := cuda.New(&forgetful{Fake: r.dev, noStreamSync: true}, cuda.Options{Mode: cuda.Pageable})
		x := ramp(64, 1)
		in := r.upload(t, r.s, x)
		f := r.upload(t, r.s, []float32{2})
		f.Shape = abi.Shape{}
		out := r.output(64, 0)
		_, err := gpu.Call(ctx, r.cb(t, "scale"), r.s, []cuda.Buffer{in, f}, []cuda.Buffer{out})
		// The guest read Poison for its factor (0xDBDBDBDB is a negative
		// float), which the scale kernel refuses.
		require.Error(t, err)
		assert.Contains(t, err.Error(), "negative factor")
		require.NoError(t, r.dev.SyncStream(r.s))
		assert.Equal(t, filled(64, 0), r.read(out))
	})
	t.Run("no completion wait", func(t *testing.T) {
		r := newRig(t, "wazero", cuda.Options{})
		gpu := cuda.New(&forgetful{Fake: r.dev, noEventSync: true}, cuda.Options{Mode: cuda.Pageable})
		cb := r.cb(t, "scale")
		call := func(s cuda.Stream, factor float32) cuda.Buffer {
			in := r.upload(t, s, ramp(64, 1))
			f := r.upload(t, s, []float32{factor})
			f.Shape = abi.Shape{}
			out := r.output(64, 0)
			_, err := gpu.Call(ctx, cb, s, []cuda.Buffer{in, f}, []cuda.Buffer{out})
			require.NoError(t, err)
			return out
		}
		first := call(r.s, 2)
		assert.NotZero(t, r.dev.Pending(r.s), "the result copy is still queued after the call returned")
		second := call(r.dev.NewStream(), 3) // the same pooled instance, reused
		require.NoError(t, r.dev.SyncStream(r.s))
		assert.Equal(t, scaled(ramp(64, 1), 3), r.read(first), "the first call got the second call's result")
		_ = second
	})
}

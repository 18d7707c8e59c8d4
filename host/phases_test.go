package host_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
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
)

func TestLookupByNameAndID(t *testing.T) {
	h := newHost(t, "wazero", nil)
	byName, err := h.Lookup("scale")
	require.NoError(t, err)
	byID, err := h.Lookup(byName.ID())
	require.NoError(t, err)
	assert.Same(t, byName, byID, "a name and its content id resolve to the same callback")
	assert.Equal(t, "scale", byID.Name())
	assert.Equal(t, "(x: f32[n], factor: f32[]) -> f32[n]", byID.Signature().String())

	// Invoke accepts the id too.
	outs, err := h.Invoke(context.Background(), byName.ID(), abi.From([]float32{1, 2}), abi.Scalar[float32](3))
	require.NoError(t, err)
	assert.Equal(t, []float32{3, 6}, abi.MustView[float32](outs[0]))

	allocs := testing.AllocsPerRun(100, func() {
		if _, err := h.Lookup(byName.ID()); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Lookup("scale"); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs, "Lookup does not allocate")
}

func TestLookupUnknown(t *testing.T) {
	h := newHost(t, "wazero", nil)
	_, err := h.Lookup("scael")
	require.ErrorIs(t, err, host.ErrUnknownCallback)
	assert.Contains(t, err.Error(), `callback "scael"`)
	assert.Contains(t, err.Error(), "loaded: bad_error_ptr, bad_status, busy, calls", "an unknown name lists the loaded ones")

	stale := abi.CallbackIDPrefix + "00000000000000000000000000000000000000000000000000000000000000aa"
	_, err = h.Lookup(stale)
	require.ErrorIs(t, err, host.ErrUnknownCallback)
	assert.Contains(t, err.Error(), "no loaded callback has id "+stale)
	assert.Contains(t, err.Error(), "changed")

	_, err = h.Invoke(context.Background(), stale, abi.From([]float32{1}))
	require.ErrorIs(t, err, host.ErrUnknownCallback)
}

// TestPhasesByHand steps through a call as the FFI bridge and the GPU path
// do: plan from types alone, stage inputs straight into guest memory, run,
// read outputs in place.
func TestPhasesByHand(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		h := newHost(t, engine, nil)
		cb, err := h.Lookup("scale")
		require.NoError(t, err)
		plan, err := cb.Plan([]abi.TensorMeta{{DType: abi.F32, Shape: abi.Shape{3}}, {DType: abi.F32}})
		require.NoError(t, err)
		require.Len(t, plan.Outputs(), 1)
		assert.Equal(t, abi.F32, plan.Outputs()[0].DType)
		assert.Equal(t, abi.Shape{3}, plan.Outputs()[0].Shape)

		for round := 0; round < 3; round++ {
			call, err := cb.Start(ctx, plan)
			require.NoError(t, err)
			x, factor := call.Input(0), call.Input(1)
			require.Len(t, x, 12)
			require.Len(t, factor, 4)
			copy(x, abi.From([]float32{1, 2, 3}).Data)
			copy(factor, abi.Scalar[float32](float32(round+1)).Data)
			assert.Nil(t, call.Output(0), "no output before Run")
			require.NoError(t, call.Run(ctx))
			out := abi.Tensor{DType: abi.F32, Shape: abi.Shape{3}, Data: call.Output(0)}
			f := float32(round + 1)
			assert.Equal(t, []float32{f, 2 * f, 3 * f}, abi.MustView[float32](out))
			mem := call.Memory()
			assert.NotNil(t, mem.Base)
			assert.NotZero(t, mem.Size)
			assert.NotZero(t, mem.Instance)
			assert.True(t, mem.Stable, "both engines keep linear memory in place on linux")
			call.Close(ctx)
			call.Close(ctx) // idempotent
		}
		st, _ := h.PoolStats("scale")
		assert.Equal(t, 1, st.Live, "by-hand calls reuse the pooled instance")
		assert.Zero(t, st.Discarded)

		// A plan for types the signature refuses names the argument.
		_, err = cb.Plan([]abi.TensorMeta{{DType: abi.S32, Shape: abi.Shape{3}}, {DType: abi.F32}})
		var ce *host.CallbackError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, host.InvalidArgument, ce.Kind())
		assert.Contains(t, err.Error(), "refused the call before running it")
		_, err = cb.Plan([]abi.TensorMeta{{DType: abi.DType(99), Shape: abi.Shape{3}}, {DType: abi.F32}})
		require.ErrorAs(t, err, &ce)
		assert.Contains(t, err.Error(), "argument 0")
	})
}

// TestPhasesFailedRunDiscards: a trap during Run fails the call, hands out
// no output, and Close discards the instance.
func TestPhasesFailedRunDiscards(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		h := newHost(t, engine, nil)
		cb, err := h.Lookup("half_then_trap")
		require.NoError(t, err)
		plan, err := cb.Plan([]abi.TensorMeta{{DType: abi.F32, Shape: abi.Shape{4}}})
		require.NoError(t, err)
		call, err := cb.Start(ctx, plan)
		require.NoError(t, err)
		err = call.Run(ctx)
		require.Error(t, err)
		assert.Nil(t, call.Output(0))
		call.Close(ctx)
		st, _ := h.PoolStats("half_then_trap")
		assert.Equal(t, uint64(1), st.Discarded)
		assert.Equal(t, 0, st.Live)
	})
}

func TestStartAfterCloseFails(t *testing.T) {
	ctx := context.Background()
	h := newHost(t, "wazero", nil)
	cb, err := h.Lookup("scale")
	require.NoError(t, err)
	plan, err := cb.Plan([]abi.TensorMeta{{DType: abi.F32, Shape: abi.Shape{1}}, {DType: abi.F32}})
	require.NoError(t, err)
	require.NoError(t, h.Close(ctx))
	_, err = cb.Start(ctx, plan)
	require.ErrorIs(t, err, host.ErrClosed)
	_, err = cb.Do(ctx, &host.Request{Inputs: []abi.Tensor{abi.From([]float32{1}), abi.Scalar[float32](1)}, Outputs: []abi.Tensor{abi.From([]float32{0})}})
	require.ErrorIs(t, err, host.ErrClosed)
}

func TestChainRegistry(t *testing.T) {
	ctx := context.Background()
	h := newHost(t, "wazero", nil)
	a, b := h.Chain("xla"), h.Chain("xla")
	assert.Same(t, a, b, "a name finds the same chain everywhere in the process")
	assert.NotSame(t, a, h.Chain("other"))
	assert.NotSame(t, a, h.NewChain("xla"), "NewChain makes a private chain")

	// Calls from many goroutines on the registered chain are numbered in
	// one sequence.
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := []abi.Tensor{abi.From([]float32{0, 0})}
			_, err := h.Chain("xla").InvokeInto(ctx, "scale", []abi.Tensor{abi.From([]float32{1, 2}), abi.Scalar[float32](2)}, out)
			assert.NoError(t, err)
			assert.Equal(t, []float32{2, 4}, abi.MustView[float32](out[0]))
		}()
	}
	wg.Wait()
	require.NoError(t, a.Barrier(ctx))
}

// TestChainInvokeIntoFailureAndReset: a failed InvokeInto leaves the
// caller's outputs untouched and fails the chain; Reset clears it for the
// next program run.
func TestChainInvokeIntoFailureAndReset(t *testing.T) {
	ctx := context.Background()
	h := newHost(t, "wazero", nil)
	ch := h.Chain("run")
	out := []abi.Tensor{abi.From([]float32{7, 7, 7, 7})}
	_, err := ch.InvokeInto(ctx, "bad_status", []abi.Tensor{abi.From([]float32{1, 2, 3, 4})}, out)
	var ce *host.CallbackError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "run", ce.Chain)
	assert.Equal(t, uint64(1), ce.Seq)
	assert.Equal(t, []float32{7, 7, 7, 7}, abi.MustView[float32](out[0]), "a failed call writes nothing")

	_, err = ch.InvokeInto(ctx, "scale", []abi.Tensor{abi.From([]float32{1}), abi.Scalar[float32](2)}, []abi.Tensor{abi.From([]float32{0})})
	require.ErrorIs(t, err, host.ErrChainFailed)

	first := ch.Reset()
	require.Error(t, first)
	assert.True(t, errors.Is(first, ce.Kind()), "Reset returns the first failure")
	assert.NoError(t, ch.Reset(), "a healthy chain has nothing to reset")
	o := []abi.Tensor{abi.From([]float32{0})}
	_, err = ch.InvokeInto(ctx, "scale", []abi.Tensor{abi.From([]float32{1}), abi.Scalar[float32](2)}, o)
	require.NoError(t, err)
	assert.Equal(t, []float32{2}, abi.MustView[float32](o[0]))
}

// TestSessionRefusesOverlappingBlocks: a guest allocator that hands out the
// same block twice must fail the call as an ABI violation, never return
// the frame's bytes as the caller's tensor with status OK (issue 15).
func TestSessionRefusesOverlappingBlocks(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		hc := hostileCase{Name: "alloc_same", Module: "alloc_same", Export: "run"}
		h, err := host.New(ctx, nil, host.WithLogger(slog.New(slog.DiscardHandler)))
		require.NoError(t, err)
		defer h.Close(ctx)
		require.NoError(t, h.LoadModule(ctx, hostileCallback(hc, engine), hostileWasm(t, hc)))

		// The copying path allocates one scratch region and is fine.
		_, err = h.Invoke(ctx, "alloc_same", abi.From([]float32{1, 2, 3, 4}))
		require.NoError(t, err)

		s, err := h.NewSession(ctx, "alloc_same")
		require.NoError(t, err)
		defer s.Release(ctx)
		x, err := s.Alloc(ctx, abi.F32, 4)
		var ce *host.CallbackError
		require.ErrorAs(t, err, &ce, "the scratch region already lives at the only address this allocator gives")
		assert.Equal(t, host.ABIViolation, ce.Kind())
		assert.Contains(t, err.Error(), "overlaps the call frame")
		assert.Nil(t, x.Data)
	})
}

func TestSessionRefusesBlockOverlappingLater(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		hc := hostileCase{Name: "alloc_same", Module: "alloc_same", Export: "run"}
		h, err := host.New(ctx, nil, host.WithLogger(slog.New(slog.DiscardHandler)))
		require.NoError(t, err)
		defer h.Close(ctx)
		cb := hostileCallback(hc, engine)
		cb.Isolation = "fresh" // no scratch region before the session's first block
		require.NoError(t, h.LoadModule(ctx, cb, hostileWasm(t, hc)))
		s, err := h.NewSession(ctx, "alloc_same")
		require.NoError(t, err)
		defer s.Release(ctx)
		x, err := s.Alloc(ctx, abi.F32, 4)
		require.NoError(t, err)
		copy(abi.MustView[float32](x), []float32{1, 2, 3, 4})
		outs, _, err := s.Invoke(ctx, x)
		var ce *host.CallbackError
		require.ErrorAs(t, err, &ce, "the frame would land on the session's tensor; got outputs %v", outs)
		assert.Equal(t, host.ABIViolation, ce.Kind())
		assert.Contains(t, err.Error(), "overlaps the live block")
	})
}

func TestInstanceCloseObserver(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	closed := map[uint64]int{}
	h, err := host.New(ctx, nil, host.WithLogger(slog.New(slog.DiscardHandler)), host.WithInstanceClose(func(id uint64) {
		mu.Lock()
		closed[id]++
		mu.Unlock()
	}))
	require.NoError(t, err)
	for _, name := range []string{"scale", "half_then_trap"} {
		cb := hostileCallback(hostileCase{Name: name}, "wazero")
		cb.Signature = testkitSigs[name]
		require.NoError(t, h.LoadModule(ctx, cb, testkitWasm(t)))
	}
	c, err := h.Lookup("half_then_trap")
	require.NoError(t, err)
	plan, err := c.Plan([]abi.TensorMeta{{DType: abi.F32, Shape: abi.Shape{4}}})
	require.NoError(t, err)
	call, err := c.Start(ctx, plan)
	require.NoError(t, err)
	failed := call.Memory().Instance
	require.Error(t, call.Run(ctx))
	mu.Lock()
	assert.Zero(t, closed[failed], "not closed before Close")
	mu.Unlock()
	call.Close(ctx)
	mu.Lock()
	assert.Equal(t, 1, closed[failed], "a discarded instance is reported once")
	mu.Unlock()

	s, err := h.Lookup("scale")
	require.NoError(t, err)
	p2, err := s.Plan([]abi.TensorMeta{{DType: abi.F32, Shape: abi.Shape{1}}, {DType: abi.F32}})
	require.NoError(t, err)
	call, err = s.Start(ctx, p2)
	require.NoError(t, err)
	pooled := call.Memory().Instance
	require.NoError(t, call.Run(ctx))
	call.Close(ctx)
	require.NoError(t, h.Close(ctx))
	mu.Lock()
	assert.Equal(t, 1, closed[pooled], "a pooled instance is reported when the host closes")
	mu.Unlock()
}

// TestChainDoSteps: steps driven through the phases by hand are ordered on
// the chain with ordinary calls, and a failing step fails the chain.
func TestChainDoSteps(t *testing.T) {
	ctx := context.Background()
	h := newHost(t, "wazero", nil)
	ch := h.Chain("gpu")
	var got []float32
	step := func(factor float32) func(context.Context, *host.Callback) error {
		return func(ctx context.Context, cb *host.Callback) error {
			plan, err := cb.Plan([]abi.TensorMeta{{DType: abi.F32, Shape: abi.Shape{1}}, {DType: abi.F32}})
			if err != nil {
				return err
			}
			call, err := cb.Start(ctx, plan)
			if err != nil {
				return err
			}
			defer call.Close(ctx)
			copy(call.Input(0), abi.From([]float32{1}).Data)
			copy(call.Input(1), abi.Scalar(factor).Data)
			if err := call.Run(ctx); err != nil {
				return err
			}
			got = append(got, abi.MustView[float32](abi.Tensor{DType: abi.F32, Shape: abi.Shape{1}, Data: call.Output(0)})[0])
			return nil
		}
	}
	require.NoError(t, ch.Do(ctx, "scale", step(2)))
	require.NoError(t, ch.Do(ctx, "scale", step(3)))
	assert.Equal(t, []float32{2, 3}, got)

	err := ch.Do(ctx, "half_then_trap", func(ctx context.Context, cb *host.Callback) error {
		_, err := h.Invoke(ctx, cb.ID(), abi.From([]float32{1, 2, 3, 4}))
		return err
	})
	var ce *host.CallbackError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "gpu", ce.Chain)
	assert.Equal(t, uint64(3), ce.Seq)
	err = ch.Do(ctx, "scale", step(4))
	require.ErrorIs(t, err, host.ErrChainFailed)
	assert.Equal(t, []float32{2, 3}, got, "a step after the failure does not run")

	ch.Reset()
	err = ch.Do(ctx, "scale", func(context.Context, *host.Callback) error { return errors.New("device copy failed") })
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, host.HostPanic, ce.Kind())
	assert.Contains(t, err.Error(), "device copy failed")
}

func TestChainDoKeepsForeignKind(t *testing.T) {
	ctx := context.Background()
	h := newHost(t, "wazero", nil)
	ch := h.Chain("dev")
	err := ch.Do(ctx, "scale", func(context.Context, *host.Callback) error {
		return fmt.Errorf("device: %w", abi.Timeout)
	})
	var ce *host.CallbackError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, host.Timeout, ce.Kind(), "an error that has a kind keeps it")
	assert.Equal(t, host.Timeout, abi.KindOf(ch.Err()))
}

// TestChainRegistryCopiesName: a registered chain keeps its own copy of
// its name, so a caller may pass a string viewing memory it reuses (the C
// API passes C strings without copying them).
func TestChainRegistryCopiesName(t *testing.T) {
	h := newHost(t, "wazero", nil)
	buf := []byte("loop")
	ch := h.Chain(unsafe.String(&buf[0], len(buf)))
	copy(buf, "zzzz")
	assert.Equal(t, "loop", ch.Name())
	assert.Same(t, ch, h.Chain("loop"), "the registry is keyed by the copy")
	assert.NotSame(t, ch, h.Chain("zzzz"))
}

// TestPhasesStartFailureReleasesTheInstance: when Start gets an instance
// but cannot allocate the call frame (the guest's callbox_alloc traps),
// the instance is discarded there, not leaked: with max_instances 1 the
// next Start gets a new one and fails the same way, instead of waiting for
// a slot that never frees.
func TestPhasesStartFailureReleasesTheInstance(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		src, err := os.ReadFile(filepath.Join("testdata", "hostile", "alloc_trap.wat"))
		require.NoError(t, err)
		h, err := host.New(ctx, nil)
		require.NoError(t, err)
		defer h.Close(ctx)
		cb := config.DefaultCallback()
		cb.Name, cb.Export, cb.Engine, cb.MaxInstances = "alloc_trap", "run", engine, 1
		cb.Signature = "(x: f32[n]) -> f32[n]"
		require.NoError(t, h.LoadModule(ctx, cb, wat.Must(string(src))))
		c, err := h.Lookup("alloc_trap")
		require.NoError(t, err)
		plan, err := c.Plan([]abi.TensorMeta{{DType: abi.F32, Shape: abi.Shape{4}}})
		require.NoError(t, err)
		for i := 1; i <= 2; i++ {
			_, err = c.Start(ctx, plan)
			require.ErrorIs(t, err, host.Unreachable, "start %d", i)
			assert.Contains(t, err.Error(), "allocating the call frame")
			st, _ := h.PoolStats("alloc_trap")
			assert.Equal(t, 0, st.Live, "start %d: the instance was discarded", i)
			assert.Equal(t, uint64(i), st.Discarded)
		}
	})
}

package host_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

// loadSpin loads the hostile runaway module's infinite loop as "spin".
func loadSpin(t *testing.T, engine string, tweak func(*config.Callback)) *host.Host {
	t.Helper()
	ctx := context.Background()
	h, err := host.New(ctx, nil, host.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close(ctx) })
	cb := hostileCallback(hostileCase{Name: "spin"}, engine)
	if tweak != nil {
		tweak(&cb)
	}
	require.NoError(t, h.LoadModule(ctx, cb, hostileWasm(t, hostileCase{Module: "runaway"})))
	return h
}

// A caller's context that ends by its deadline is a Timeout (wrapping
// context.DeadlineExceeded); one that is canceled is Canceled.
func TestCallerContextKinds(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		h := loadSpin(t, engine, withTimeout(30*time.Second))
		x := abi.From([]float32{1, 2})

		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := h.Invoke(ctx, "spin", x)
		require.Error(t, err)
		assert.Equal(t, host.Timeout, abi.KindOf(err), "error: %v", err)
		assert.ErrorIs(t, err, host.Timeout)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "failed: timeout")

		ctx, cancel = context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		_, err = h.Invoke(ctx, "spin", x)
		require.Error(t, err)
		assert.Equal(t, host.Canceled, abi.KindOf(err), "error: %v", err)
		assert.ErrorIs(t, err, context.Canceled)
		assert.False(t, errors.Is(err, context.DeadlineExceeded))
	})
}

// Fuel statistics after a call that a timeout (not its fuel) ended: what
// was consumed, never a small number the guest did not use (wasmtime
// reported 25 of 2^40 after spinning for the whole timeout).
func TestFuelStatsAfterTimeout(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		h := loadSpin(t, engine, func(cb *config.Callback) { cb.Limits.Fuel = 1 << 40 })
		_, st, err := invokeStats(context.Background(), h, "spin", abi.From([]float32{1}))
		require.ErrorIs(t, err, host.Timeout)
		// Both engines meter the module, so what the spin consumed is
		// known; 250 ms of a tight loop is far more than a million
		// instructions.
		require.True(t, st.FuelKnown, "fuel unknown after a timeout on a metered module")
		assert.Greater(t, st.Fuel, uint64(1_000_000), "fuel reported as known")
	})
}

// Inspect applies the load check before compiling anything: a module Load
// refuses is listed with its problems, never run, and never crashes the
// process (a minimum memory above max_memory used to panic inside wazero).
func TestInspectAppliesLoadChecks(t *testing.T) {
	for _, pages := range []int{1025, 40000, 65536} {
		t.Run(fmt.Sprint(pages), func(t *testing.T) {
			src := fmt.Sprintf(`(module
  (memory (export "memory") %d)
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 1024))
  (func (export "run") (param i32) (result i32) (i32.const 0)))`, pages)
			wasm, err := wat.Compile(src)
			require.NoError(t, err)
			r, err := engines.Inspect(context.Background(), wasm)
			require.NoError(t, err)
			require.NotEmpty(t, r.Problems)
			assert.Contains(t, r.Problems[0], "declares a minimum memory of")
			assert.Zero(t, r.ABIVersion, "a module that would not load is not run")

			// Load refuses it with the same words.
			err = loadAsRun(t, wasm)
			require.ErrorIs(t, err, host.MemoryLimit)
			assert.Contains(t, err.Error(), r.Problems[0])
		})
	}
}

// Inspect and Load say the same of a module whose callbox_alloc has the
// wrong type, once each: Inspect's load check reads it from the binary, and
// its probe looks the export up through the engine as a call does (the
// lookup it never made when FuzzInspect found the two disagreeing).
func TestInspectAgreesWithLoadOnAllocType(t *testing.T) {
	const src = `(module
  (memory (export "memory") 1)
  %s
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (type $a) (i32.const 1024))
  (func (export "run") (type $a) (i32.const 0)))`
	wasm := wat.Must(fmt.Sprintf(src, `(type $a (func (param i32) (result i32)))`))
	const want = "export callbox_alloc has type (i32) -> (i32), want (i32, i32) -> (i32)"
	r, err := engines.Inspect(context.Background(), wasm)
	require.NoError(t, err)
	assert.Equal(t, []string{want}, r.Problems)

	err = loadAsRun(t, wasm)
	require.ErrorIs(t, err, host.ABIViolation)
	assert.Contains(t, err.Error(), want)

	// The same type in a recursion group (the GC proposal's form, which
	// FuzzInspect once found wasmbin misreading) is not valid under
	// callbox's features: both refuse it before the ABI check, Load as
	// InvalidArgument, in every build (wazero alone does not check it).
	rec := wat.Must(fmt.Sprintf(src, `(rec (type $a (func (param i32) (result i32))))`))
	r, err = engines.Inspect(context.Background(), rec)
	require.NoError(t, err)
	require.Len(t, r.Problems, 2)
	assert.Contains(t, r.Problems[0], "not a valid WebAssembly module")
	assert.Equal(t, want, r.Problems[1])
	err = loadAsRun(t, rec)
	require.ErrorIs(t, err, host.InvalidArgument)
	assert.Contains(t, err.Error(), r.Problems[0])
}

// loadAsRun loads wasm on a fresh host with the default limits, as the
// callback "run" of one f32 vector, and returns Load's error.
func loadAsRun(t *testing.T, wasm []byte) error {
	t.Helper()
	h, err := host.New(context.Background(), nil)
	require.NoError(t, err)
	defer h.Close(context.Background())
	cb := config.DefaultCallback()
	cb.Name, cb.Signature = "run", "(x: f32[n]) -> f32[n]"
	return h.LoadModule(context.Background(), cb, wasm)
}

// deadlineOnly is a context that reports a deadline and never ends by
// itself (ffi's callbox_call_within passes one): the host must enforce the
// deadline without the context's help.
type deadlineOnly struct {
	context.Context
	at time.Time
}

func (d deadlineOnly) Deadline() (time.Time, bool) { return d.at, true }

// A context's deadline earlier than the callback's timeout is the call's
// deadline, enforced by the engine itself: a context that never ends by
// itself still stops the guest, the error is the caller's Timeout
// (wrapping context.DeadlineExceeded), the instance is replaced, and the
// next call runs. The wait for a free instance is bounded by it too.
func TestContextDeadlineIsTheCallsDeadline(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		h := loadSpin(t, engine, func(cb *config.Callback) {
			cb.Limits.Timeout = 30 * time.Second
			cb.MaxInstances = 1
		})
		x := abi.From([]float32{1, 2})
		start := time.Now()
		_, err := h.Invoke(deadlineOnly{context.Background(), time.Now().Add(50 * time.Millisecond)}, "spin", x)
		require.Error(t, err)
		assert.Less(t, time.Since(start), 10*time.Second, "stopped at the context's deadline, not the 30 s timeout")
		assert.Equal(t, host.Timeout, abi.KindOf(err), "error: %v", err)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "the caller's deadline passed")

		// The one instance busy: the wait for it ends at the deadline. The
		// spinner holds the instance until it is cancelled, after the
		// check, so no timing decides which call gets it.
		busy := make(chan error, 1)
		busyCtx, stopBusy := context.WithCancel(context.Background())
		defer stopBusy()
		go func() {
			_, err := h.Invoke(busyCtx, "spin", x)
			busy <- err
		}()
		require.Eventually(t, func() bool {
			st, _ := h.PoolStats("spin")
			return st.Live-st.Idle == 1
		}, 30*time.Second, time.Millisecond, "the spinner took the one instance")
		_, err = h.Invoke(deadlineOnly{context.Background(), time.Now().Add(20 * time.Millisecond)}, "spin", x)
		require.Error(t, err)
		assert.Equal(t, host.Timeout, abi.KindOf(err), "error: %v", err)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "while waiting for an instance")
		stopBusy()
		select {
		case err := <-busy:
			assert.ErrorIs(t, err, context.Canceled)
		case <-time.After(30 * time.Second):
			t.Fatal("the cancelled spinner did not return within 30 s")
		}

		// The callback's own timeout, when it comes first, is reported as
		// its own.
		h2 := loadSpin(t, engine, withTimeout(50*time.Millisecond))
		_, err = h2.Invoke(deadlineOnly{context.Background(), time.Now().Add(time.Hour)}, "spin", x)
		require.ErrorIs(t, err, host.Timeout)
		assert.False(t, errors.Is(err, context.DeadlineExceeded), "error: %v", err)
		assert.Contains(t, err.Error(), "timeout after 50ms")
	})
}

// Request.Budget: a call that fits its budget delivers; one that outruns
// it stops at the budget (a Timeout wrapping context.DeadlineExceeded,
// outputs untouched), also while it waits for an instance; the callback's
// own timeout, when shorter, is its own; a callback with no timeout is
// stopped by the budget alone; a negative budget is refused
// (TestRequestTerms has the other bounds).
func TestRequestBudget(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		h := newHost(t, engine, func(cb *config.Callback) { cb.MaxInstances = 1 })
		scale, err := h.Lookup("scale")
		require.NoError(t, err)
		out := abi.From([]float32{0, 0, 0})
		_, err = invokeIntoWithin(ctx, scale, time.Second, []host.Tensor{abi.From([]float32{1, 2, 3}), abi.Scalar(float32(2))}, []host.Tensor{out})
		require.NoError(t, err)
		assert.Equal(t, []float32{2, 4, 6}, abi.MustView[float32](out))

		spin, err := h.Lookup("spin")
		require.NoError(t, err)
		x := abi.From([]float32{1, 2})
		untouched := abi.From([]float32{7, 7})
		start := time.Now()
		_, err = invokeIntoWithin(ctx, spin, 50*time.Millisecond, []host.Tensor{x}, []host.Tensor{untouched})
		require.Error(t, err)
		assert.Less(t, time.Since(start), 1500*time.Millisecond, "stopped at the budget, not the 2 s timeout")
		assert.Equal(t, host.Timeout, abi.KindOf(err), "error: %v", err)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "the caller's deadline passed")
		assert.Equal(t, []float32{7, 7}, abi.MustView[float32](untouched))

		// The one instance busy: the wait for it ends at the budget.
		busy := make(chan error, 1)
		go func() {
			_, err := invokeIntoWithin(ctx, spin, 400*time.Millisecond, []host.Tensor{x}, []host.Tensor{abi.From([]float32{0, 0})})
			busy <- err
		}()
		require.Eventually(t, func() bool {
			st, _ := h.PoolStats("spin")
			return st.Live > st.Idle
		}, 5*time.Second, time.Millisecond)
		_, err = invokeIntoWithin(ctx, spin, 20*time.Millisecond, []host.Tensor{x}, []host.Tensor{untouched})
		require.Error(t, err)
		assert.Equal(t, host.Timeout, abi.KindOf(err), "error: %v", err)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "while waiting for an instance")
		assert.ErrorIs(t, <-busy, context.DeadlineExceeded)

		_, err = invokeIntoWithin(ctx, spin, -time.Millisecond, []host.Tensor{x}, []host.Tensor{untouched})
		assert.Equal(t, host.InvalidArgument, abi.KindOf(err), "error: %v", err)
		assert.Equal(t, []float32{7, 7}, abi.MustView[float32](untouched))

		h2 := loadSpin(t, engine, withTimeout(50*time.Millisecond))
		spin2, err := h2.Lookup("spin")
		require.NoError(t, err)
		_, err = invokeIntoWithin(ctx, spin2, time.Hour, []host.Tensor{x}, []host.Tensor{untouched})
		require.ErrorIs(t, err, host.Timeout)
		assert.False(t, errors.Is(err, context.DeadlineExceeded), "error: %v", err)
		assert.Contains(t, err.Error(), "timeout after 50ms")

		// A callback with no timeout of its own: the budget is the only
		// limit, and it stops the call.
		h3 := loadSpin(t, engine, withTimeout(0))
		spin3, err := h3.Lookup("spin")
		require.NoError(t, err)
		// Canceled when the test ends, so that a failure here never leaves
		// a call spinning for the host's Close to wait for.
		callCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := invokeIntoWithin(callCtx, spin3, 50*time.Millisecond, []host.Tensor{x}, []host.Tensor{untouched})
			done <- err
		}()
		select {
		case err = <-done:
			require.ErrorIs(t, err, host.Timeout)
			assert.ErrorIs(t, err, context.DeadlineExceeded, "the caller's budget ended it")
		case <-time.After(20 * time.Second):
			t.Fatal("a budget of 50 ms did not stop a callback that has no timeout")
		}
	})
}

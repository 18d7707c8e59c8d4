package host_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
)

// reloadConfig is a config of testkit callbacks (module file kit) named by
// names, each with the given timeout.
func reloadConfig(kit string, timeout time.Duration, names ...string) *config.Config {
	cfg := &config.Config{}
	for _, n := range names {
		cb := config.DefaultCallback()
		cb.Name, cb.Module, cb.Export, cb.Signature = n, kit, n, testkitSigs[n]
		cb.Limits.Timeout = timeout
		cfg.Callbacks = append(cfg.Callbacks, cb)
	}
	return cfg
}

func writeKit(t *testing.T) string {
	t.Helper()
	kit := filepath.Join(t.TempDir(), "kit.wasm")
	require.NoError(t, os.WriteFile(kit, testkitWasm(t), 0o644))
	return kit
}

var quiet = host.WithLogger(slog.New(slog.DiscardHandler))

// TestReloadKeepsSwitchesAddsRemoves: an unchanged callback keeps its
// loaded module and warm pool (the same *Callback, no instance created);
// a changed one is replaced (a *Callback looked up before fails with
// ErrReplaced, a fresh lookup gets the new limits); a new one is added and
// a dropped one removed; a named chain keeps working across the switch.
func TestReloadKeepsSwitchesAddsRemoves(t *testing.T) {
	ctx := context.Background()
	kit := writeKit(t)
	h, err := host.New(ctx, reloadConfig(kit, time.Second, "scale", "tap", "spin"), quiet)
	require.NoError(t, err)
	defer h.Close(ctx)
	x, two := abi.From([]float32{1, 2}), abi.Scalar[float32](2)
	_, err = h.Chain("pipeline").Invoke(ctx, "scale", x, two)
	require.NoError(t, err)
	scale, err := h.Lookup("scale")
	require.NoError(t, err)
	tap, err := h.Lookup("tap")
	require.NoError(t, err)
	before, _ := h.PoolStats("scale")

	res, err := h.Reload(ctx, reloadConfig(kit, time.Second, "scale", "tap", "spin"))
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"scale", "tap", "spin"}, res.Kept)
	assert.Empty(t, res.Replaced)
	again, err := h.Lookup("scale")
	require.NoError(t, err)
	assert.Same(t, scale, again, "an unchanged callback is not reloaded")
	after, _ := h.PoolStats("scale")
	assert.Equal(t, before.Created, after.Created, "not recompiled, not re-instantiated: the warm pool is kept")

	// tap's timeout changes, spin goes, busy comes.
	cfg := reloadConfig(kit, time.Second, "scale", "busy")
	tapCfg := reloadConfig(kit, 3*time.Second, "tap").Callbacks[0]
	cfg.Callbacks = append(cfg.Callbacks, tapCfg)
	res, err = h.Reload(ctx, cfg)
	require.NoError(t, err)
	assert.Equal(t, []string{"scale"}, res.Kept)
	assert.Equal(t, []string{"tap"}, res.Replaced)
	assert.Equal(t, []string{"busy"}, res.Added)
	assert.Equal(t, []string{"spin"}, res.Removed)

	_, err = tap.Do(ctx, &host.Request{Inputs: []abi.Tensor{x}, Outputs: []abi.Tensor{abi.From([]float32{0, 0})}})
	require.ErrorIs(t, err, host.ErrReplaced)
	require.ErrorIs(t, err, host.FailedPrecondition)
	info, ok := h.Callback("tap")
	require.True(t, ok)
	assert.Equal(t, 3*time.Second, info.Limits.Timeout, "the new version serves")
	_, err = h.Invoke(ctx, "tap", x)
	require.NoError(t, err)
	_, err = h.Invoke(ctx, "spin", x)
	require.ErrorIs(t, err, host.UnknownCallback)
	_, err = h.Invoke(ctx, "busy", abi.Scalar[int32](1))
	require.NoError(t, err)
	_, err = h.Chain("pipeline").Invoke(ctx, "scale", x, two)
	require.NoError(t, err, "the named chain survives")
}

// TestReloadRefusesABadConfigWhole: a new configuration with one callback
// that cannot load (a missing module, an export the module lacks) is
// refused whole, naming the callback; the old one keeps serving, its
// callbacks untouched.
func TestReloadRefusesABadConfigWhole(t *testing.T) {
	ctx := context.Background()
	kit := writeKit(t)
	h, err := host.New(ctx, reloadConfig(kit, time.Second, "scale", "tap"), quiet)
	require.NoError(t, err)
	defer h.Close(ctx)
	scale, err := h.Lookup("scale")
	require.NoError(t, err)

	missing := reloadConfig(kit, 2*time.Second, "scale", "tap")
	missing.Callbacks[1].Module = filepath.Join(t.TempDir(), "gone.wasm")
	_, err = h.Reload(ctx, missing)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `callback "tap"`)
	assert.Contains(t, err.Error(), "gone.wasm")

	noExport := reloadConfig(kit, 2*time.Second, "scale", "tap")
	noExport.Callbacks[1].Export = "no_such_export"
	noExport.File = "/etc/callbox/new.yaml"
	_, err = h.Reload(ctx, noExport)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/etc/callbox/new.yaml")
	assert.Contains(t, err.Error(), "no_such_export")

	again, err := h.Lookup("scale")
	require.NoError(t, err)
	assert.Same(t, scale, again, "the old configuration is untouched")
	info, _ := h.Callback("scale")
	assert.Equal(t, time.Second, info.Limits.Timeout)
	_, err = h.Invoke(ctx, "tap", abi.From([]float32{1}))
	require.NoError(t, err)
}

// TestReloadUnderLoad: goroutines call a callback without pause, plainly
// and on a named chain, while the configuration is reloaded again and
// again, changing that callback's limits each time. No call fails; a call
// in flight finishes on the version it started on (a Session holds the
// first version across every reload and still calls it); Close then
// leaves no goroutine behind.
func TestReloadUnderLoad(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	kit := writeKit(t)
	h, err := host.New(ctx, reloadConfig(kit, time.Second, "scale", "tap"), quiet)
	require.NoError(t, err)
	sess, err := h.NewSession(ctx, "scale")
	require.NoError(t, err)
	first, err := h.Lookup("scale")
	require.NoError(t, err)

	var calls, failures atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			x, two := abi.From([]float32{float32(g), 1}), abi.Scalar[float32](2)
			ch := h.Chain("load")
			for {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				if g%4 == 0 {
					_, err = ch.Invoke(ctx, "scale", x, two)
				} else {
					_, err = h.Invoke(ctx, "scale", x, two)
				}
				calls.Add(1)
				if err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		}(g)
	}
	const reloads = 20
	for i := 0; i < reloads; i++ {
		// Let calls run between reloads: at least 100 more each time.
		for target := calls.Load() + 100; calls.Load() < target; {
			runtime.Gosched()
		}
		timeout := time.Second + time.Duration((i+1)%2)*time.Second // 2s, 1s, 2s, ...: each differs from the last
		res, err := h.Reload(ctx, reloadConfig(kit, timeout, "scale", "tap"))
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"scale", "tap"}, res.Replaced, "reload %d", i)
		out, _, err := sess.Invoke(ctx, abi.From([]float32{3}), abi.Scalar[float32](2))
		require.NoError(t, err, "the session's call runs on the version it started on")
		assert.Equal(t, []float32{6}, abi.MustView[float32](out[0]))
	}
	close(stop)
	wg.Wait()
	assert.Zero(t, failures.Load(), "failed calls during %d reloads (first: %v)", reloads, firstErr.Load())
	assert.GreaterOrEqual(t, calls.Load(), int64(100*reloads), "calls ran during the reloads")
	closed, _ := host.CallbackStateForTest(first)
	assert.False(t, closed, "the first version is not closed while the session still uses it")
	sess.Release(ctx)
	require.NoError(t, h.Close(ctx))
	closed, live := host.CallbackStateForTest(first)
	assert.True(t, closed, "closed after its last call")
	assert.Zero(t, live, "every instance of the first version closed")
}

// TestReloadIndexesContentIDsAgain: after a reload the content ids are
// those of the new configuration: an id two callbacks shared under
// different limits is refused, and serves again once one of them is gone.
func TestReloadIndexesContentIDsAgain(t *testing.T) {
	ctx := context.Background()
	kit := writeKit(t)
	cfg := reloadConfig(kit, time.Second, "scale")
	other := cfg.Callbacks[0]
	other.Name, other.Export = "scale_slow", "scale"
	other.Limits.Timeout = 3 * time.Second
	both := &config.Config{Callbacks: append(append([]config.Callback(nil), cfg.Callbacks...), other)}
	h, err := host.New(ctx, both, quiet)
	require.NoError(t, err)
	defer h.Close(ctx)
	info, _ := h.Callback("scale")
	_, err = h.Lookup(info.ID)
	require.ErrorIs(t, err, host.ErrAmbiguousID)
	assert.Contains(t, err.Error(), "(scale, scale_slow)")

	_, err = h.Reload(ctx, cfg)
	require.NoError(t, err)
	c, err := h.Lookup(info.ID)
	require.NoError(t, err)
	assert.Equal(t, "scale", c.Name())
}

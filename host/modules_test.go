package host_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/config/configfile"
	"github.com/seed4b3e0ccb/callbox/host"
)

// withSignatureSection appends a callbox.signatures custom section holding
// table to a module.
func withSignatureSection(wasm []byte, table string) []byte {
	uleb := func(n int) []byte {
		var b []byte
		for {
			c := byte(n & 0x7f)
			n >>= 7
			if n != 0 {
				b = append(b, c|0x80)
				continue
			}
			return append(b, c)
		}
	}
	name := abi.SignatureSection
	body := append(append(uleb(len(name)), name...), table...)
	out := append([]byte{}, wasm...)
	out = append(out, 0)
	out = append(out, uleb(len(body))...)
	return append(out, body...)
}

// kitModule writes the testkit module with a signature section declaring
// scale, tap and spin (and no other export) into a temporary directory.
func kitModule(t *testing.T) string {
	t.Helper()
	table := "scale = " + testkitSigs["scale"] + "\ntap = " + testkitSigs["tap"] + "\nspin = " + testkitSigs["spin"] + "\n"
	path := filepath.Join(t.TempDir(), "kit.wasm")
	require.NoError(t, os.WriteFile(path, withSignatureSection(testkitWasm(t), table), 0o644))
	return path
}

// loadYAML loads config text as a file in dir would be.
func loadYAML(t *testing.T, dir, text string) *config.Config {
	t.Helper()
	cfg, err := configfile.LoadData(filepath.Join(dir, "callbox.yaml"), "yaml", []byte(text), dir, nil)
	require.NoError(t, err)
	return cfg
}

func newQuietHost(ctx context.Context, cfg *config.Config) (*host.Host, error) {
	return host.New(ctx, cfg, host.WithLogger(slog.New(slog.DiscardHandler)))
}

// TestModulesEntryLoadsEveryDeclaredCallback: one modules entry loads a
// callback per export its signature section declares, named after the
// export, with the entry's settings and each override's on top; the
// callbacks run as any other does.
func TestModulesEntryLoadsEveryDeclaredCallback(t *testing.T) {
	ctx := context.Background()
	kit := kitModule(t)
	cfg := loadYAML(t, filepath.Dir(kit), `
defaults:
  timeout: 5s
modules:
  kit:
    module: kit.wasm
    max_memory: 1MiB
    max_instances: 2
    callbacks:
      spin:
        timeout: 50ms
      tap:
        batching: parallel
callbacks:
  scale2:
    module: kit.wasm
    export: scale
`)
	h, err := newQuietHost(ctx, cfg)
	require.NoError(t, err)
	defer h.Close(ctx)

	byName := map[string]host.Info{}
	var names []string
	for _, info := range h.Callbacks() {
		names = append(names, info.Name)
		byName[info.Name] = info
	}
	assert.Equal(t, []string{"scale", "scale2", "spin", "tap"}, names)
	for _, n := range []string{"scale", "spin", "tap"} {
		info := byName[n]
		assert.Equal(t, n, info.Export)
		assert.Equal(t, kit, info.Module)
		assert.Equal(t, uint64(1<<20), info.Limits.MaxMemory, n)
		assert.Equal(t, testkitSigs[n], info.Signature.String(), n)
	}
	assert.Equal(t, 5*time.Second, byName["scale"].Limits.Timeout, "the entry's settings, over defaults")
	assert.Equal(t, 50*time.Millisecond, byName["spin"].Limits.Timeout, "the override")
	assert.Equal(t, config.BatchingParallel, byName["tap"].Batching, "an override's batching rule, resolved by the host")
	assert.Equal(t, config.BatchingSequential, byName["scale"].Batching)
	assert.Equal(t, byName["scale2"].ID, byName["scale"].ID, "the same module, export and signature: the same content id")

	out, err := h.Invoke(ctx, "scale", abi.From([]float32{1, 2, 3}), abi.Scalar[float32](2))
	require.NoError(t, err)
	assert.Equal(t, []float32{2, 4, 6}, abi.MustView[float32](out[0]))

	start := time.Now()
	_, err = h.Invoke(ctx, "spin", abi.From([]float32{1}))
	require.ErrorIs(t, err, host.Timeout)
	assert.Less(t, time.Since(start), 2*time.Second)

	expanded, err := host.ExpandModules(cfg)
	require.NoError(t, err)
	assert.Empty(t, expanded.Modules)
	assert.Len(t, expanded.Callbacks, 4)
	spin, ok := expanded.Callback("spin")
	require.True(t, ok)
	assert.Equal(t, 50*time.Millisecond, spin.Limits.Timeout)
	assert.Len(t, cfg.Callbacks, 1, "ExpandModules leaves its argument alone")
}

// TestModulesEntryPrebuilt: a prebuilt SDK module (Rust, whose signatures
// are in the section) loads from a modules entry.
func TestModulesEntryPrebuilt(t *testing.T) {
	ctx := context.Background()
	abs, err := filepath.Abs("../guests/prebuilt/rust-histogram.wasm")
	require.NoError(t, err)
	cfg := loadYAML(t, t.TempDir(), "modules:\n  rust:\n    module: "+abs+"\n")
	h, err := newQuietHost(ctx, cfg)
	require.NoError(t, err)
	defer h.Close(ctx)
	info, ok := h.Callback("histogram")
	require.True(t, ok)
	assert.Equal(t, "(values: f32[n], edges: f32[b]) -> s64[b]", info.Signature.String())
	out, err := h.Invoke(ctx, "histogram", abi.From([]float32{0.5, 1.5, 1.7, 9}), abi.From([]float32{0, 1, 2}))
	require.NoError(t, err)
	assert.Equal(t, "s64[3]", out[0].Type())
}

// TestModulesEntryErrors: every problem a modules entry can have at load
// names the config file and the entry's key, and says what to do.
func TestModulesEntryErrors(t *testing.T) {
	ctx := context.Background()
	kit := kitModule(t)
	dir := filepath.Dir(kit)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "plain.wasm"), testkitWasm(t), 0o644))
	softmax, err := filepath.Abs("../guests/prebuilt/assemblyscript-softmax.wasm")
	require.NoError(t, err)
	file := filepath.Join(dir, "callbox.yaml")
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"override of an undeclared export", "modules:\n  kit:\n    module: kit.wasm\n    callbacks:\n      bad_status: {timeout: 1s}\n",
			[]string{file + ": modules.kit.callbacks.bad_status: module " + kit + ` declares no signature for export "bad_status" (its callbox.signatures section declares: scale, spin, tap)`, "own callbacks entry with export: and signature:"}},
		{"no signature section", "modules:\n  plain:\n    module: plain.wasm\n",
			[]string{file + ": modules.plain.module: module " + filepath.Join(dir, "plain.wasm") + " declares no callbacks (it has no callbox.signatures custom section)"}},
		{"signatures only in the export", "modules:\n  as:\n    module: " + softmax + "\n",
			[]string{file + ": modules.as.module: module " + softmax + " declares its signatures only through its callbox_signatures export"}},
		{"missing module file", "modules:\n  gone:\n    module: gone.wasm\n",
			[]string{file + ": modules.gone.module: open " + filepath.Join(dir, "gone.wasm")}},
		{"name defined twice", "modules:\n  kit:\n    module: kit.wasm\n  again:\n    module: kit.wasm\ncallbacks:\n  tap:\n    module: kit.wasm\n",
			[]string{file + ": modules.again: module " + kit + " declares callback tap, which callbacks.tap defines too: a name is defined once",
				file + ": modules.kit: module " + kit + " declares callback scale, which modules.again defines too"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := loadYAML(t, dir, tc.yaml)
			h, err := newQuietHost(ctx, cfg)
			if h != nil {
				_ = h.Close(ctx)
			}
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			var ce *config.Error
			assert.True(t, errors.As(err, &ce), "a *config.Error: %v", err)
		})
	}
}

// TestAmbiguousContentIDIsRefused: two callbacks with the same module,
// export and signature share a content id. Under different limits a call
// by that id could run under either's, so it is refused, naming both (by
// name each works); under the same settings they are interchangeable and
// the id serves.
func TestAmbiguousContentIDIsRefused(t *testing.T) {
	ctx := context.Background()
	h, err := host.New(ctx, nil, host.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	defer h.Close(ctx)
	load := func(name string, timeout time.Duration) {
		cb := config.DefaultCallback()
		cb.Name, cb.Export, cb.Signature = name, "scale", testkitSigs["scale"]
		cb.Limits.Timeout = timeout
		require.NoError(t, h.LoadModule(ctx, cb, testkitWasm(t)))
	}
	load("fast", 200*time.Millisecond)
	load("fast_too", 200*time.Millisecond)
	fast, _ := h.Callback("fast")
	c, err := h.Lookup(fast.ID)
	require.NoError(t, err, "the same settings: either serves")
	assert.Equal(t, "fast", c.Name())

	load("slow", 3*time.Second)
	slow, _ := h.Callback("slow")
	require.Equal(t, fast.ID, slow.ID)
	_, err = h.Lookup(fast.ID)
	require.ErrorIs(t, err, host.ErrAmbiguousID)
	require.ErrorIs(t, err, host.InvalidArgument)
	for _, n := range []string{"fast", "fast_too", "slow"} {
		assert.Contains(t, err.Error(), n)
	}
	x, two := abi.From([]float32{1}), abi.Scalar[float32](2)
	_, err = h.Invoke(ctx, fast.ID, x, two)
	require.ErrorIs(t, err, host.ErrAmbiguousID)
	_, err = h.Invoke(ctx, "slow", x, two)
	require.NoError(t, err, "by name it works")
}

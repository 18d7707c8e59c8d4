package configfile_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/config/configfile"
)

type loaded struct {
	cfg *config.Config
	err error
}

// until waits for a report of Watch that ok accepts, skipping reports of
// earlier writes still in flight; a generous bound, since a loaded machine
// may be slow to deliver file events.
func until(t *testing.T, ch <-chan loaded, ok func(loaded) bool) loaded {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l := <-ch:
			if ok(l) {
				return l
			}
		case <-deadline:
			t.Fatal("no such reload within 30s of the change")
			return loaded{}
		}
	}
}

func timeoutIs(d time.Duration) func(loaded) bool {
	return func(l loaded) bool {
		if l.cfg == nil {
			return false
		}
		cb, ok := l.cfg.Callback("scale")
		return ok && cb.Limits.Timeout == d
	}
}

// TestWatchReloadsOnChange: an in-place write and a save that renames a
// new file over the old are each one reload with the new values; a
// broken file is reported as an error naming the file and key; writing
// the same bytes again reloads nothing.
func TestWatchReloadsOnChange(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "callbox.yaml")
	write := func(timeout string) {
		require.NoError(t, os.WriteFile(path, []byte("callbacks:\n  scale:\n    module: scale.wasm\n    timeout: "+timeout+"\n"), 0o644))
	}
	write("1s")
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan loaded, 8)
	done := make(chan error, 1)
	go func() {
		done <- configfile.Watch(ctx, path, func(cfg *config.Config, err error) { ch <- loaded{cfg, err} })
	}()
	// Until Watch reports, it may not be watching yet: write until it does.
	var l loaded
	for i := 0; l.cfg == nil; i++ {
		write([]string{"2s", "3s"}[i%2])
		select {
		case l = <-ch:
		case <-time.After(time.Second):
		}
		require.Less(t, i, 30, "Watch never saw a write")
	}
	require.NoError(t, l.err)

	write("5s")
	until(t, ch, timeoutIs(5*time.Second))

	tmp := filepath.Join(dir, "callbox.yaml.tmp")
	require.NoError(t, os.WriteFile(tmp, []byte("callbacks:\n  scale:\n    module: scale.wasm\n    timeout: 7s\n"), 0o644))
	require.NoError(t, os.Rename(tmp, path))
	until(t, ch, timeoutIs(7*time.Second)) // a save by rename is seen

	require.NoError(t, os.WriteFile(path, []byte("callbacks:\n  scale:\n    module: scale.wasm\n    timeout: 7\n"), 0o644))
	l = until(t, ch, func(l loaded) bool { return l.err != nil })
	assert.Nil(t, l.cfg)
	assert.Contains(t, l.err.Error(), "callbacks.scale.timeout")

	// The same bytes again: nothing to reload. Then a change: its report
	// is the next one.
	require.NoError(t, os.WriteFile(path, []byte("callbacks:\n  scale:\n    module: scale.wasm\n    timeout: 7\n"), 0o644))
	// Usually a burst of its own (Watch settles for 100ms); where a slow
	// machine merges it with the next write, the test checks less, never
	// fails for it.
	time.Sleep(300 * time.Millisecond)
	write("9s")
	l = until(t, ch, func(loaded) bool { return true })
	require.NoError(t, l.err, "no report for the unchanged write, before the change's")
	assert.True(t, timeoutIs(9*time.Second)(l))

	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}

//go:build linux

package host_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
)

// chattyWat logs n lines of 100 bytes per call: a reply (the logs ride
// in it) larger than the worker doorbell's area.
const chattyWat = `(module
  (import "callbox" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 2048) "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789")
  (func (export "callbox_abi_version") (result i32) i32.const 1)
  (func (export "callbox_alloc") (param i32 i32) (result i32) i32.const 1024)
  (func (export "chatty") (param i32) (result i32) (local $n i32)
    (local.set $n (i32.const 1500))
    (loop $l
      (call $log (i32.const 1) (i32.const 2048) (i32.const 100))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $l (local.get $n)))
    i32.const 0))`

type lineCounter struct {
	mu    sync.Mutex
	lines int
	bytes int
}

func (c *lineCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *lineCounter) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *lineCounter) WithGroup(string) slog.Handler            { return c }
func (c *lineCounter) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if s := a.Value.String(); strings.HasPrefix(s, "0123456789") {
			c.mu.Lock()
			c.lines++
			c.bytes += len(s)
			c.mu.Unlock()
		}
		return true
	})
	return nil
}

// TestProcessLargeReply: under isolation: process, a reply longer than the
// doorbell holds (150 KB of guest log lines) comes whole, through the
// socket, call after call, with and without the doorbell; a call made
// after it goes through the doorbell again.
func TestProcessLargeReply(t *testing.T) {
	for _, bell := range []bool{true, false} {
		t.Run(map[bool]string{true: "bell", false: "socket"}[bell], func(t *testing.T) {
			if !bell {
				t.Setenv("CALLBOX_PROCESS_BELL", "off")
			}
			ctx := context.Background()
			lc := &lineCounter{}
			h, err := host.New(ctx, nil, host.WithWorker(workerPath(t, false)), host.WithLogger(slog.New(lc)))
			require.NoError(t, err)
			defer h.Close(ctx)
			cb := config.DefaultCallback()
			cb.Name, cb.Export, cb.Signature, cb.Isolation = "chatty", "chatty", "() -> ()", config.IsolationProcess
			cb.Limits.MaxLog = 1 << 20
			cb.Limits.Timeout = 10 * time.Second
			require.NoError(t, h.LoadModule(ctx, cb, wat.Must(chattyWat)))
			for range 3 {
				_, err := h.Invoke(ctx, "chatty")
				require.NoError(t, err)
			}
			lc.mu.Lock()
			defer lc.mu.Unlock()
			assert.Equal(t, 3*1500, lc.lines)
			assert.Equal(t, 3*1500*100, lc.bytes)
		})
	}
}

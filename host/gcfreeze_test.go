package host_test

import (
	"context"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
)

// spinner's callbacks log "in the loop" from inside an endless loop (on
// its millionth iteration, so that it is provably looping), then loop on
// without a call: "loop" at once, "deep" 5000 calls deep.
const spinner = `(module
  (import "callbox" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 64) "in the loop")
  (global $n (mut i32) (i32.const 0))
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 1024))
  (func $spin
    (loop $l
      (global.set $n (i32.add (global.get $n) (i32.const 1)))
      (if (i32.eq (global.get $n) (i32.const 1000000))
        (then (call $log (i32.const 1) (i32.const 64) (i32.const 11))))
      (br $l)))
  (func $descend (param $d i32)
    (if (i32.eqz (local.get $d)) (then (call $spin)))
    (call $descend (i32.sub (local.get $d) (i32.const 1))))
  (func (export "loop") (param i32) (result i32) (call $spin) (i32.const 0))
  (func (export "deep") (param i32) (result i32) (call $descend (i32.const 5000)) (i32.const 0)))`

// signal closes ch at the first guest log line with text.
type signal struct {
	text string
	ch   chan struct{}
}

func (s *signal) Enabled(context.Context, slog.Level) bool { return true }
func (s *signal) Handle(_ context.Context, r slog.Record) error {
	if text, ok := host.GuestLogText(r); ok && text == s.text {
		select {
		case <-s.ch:
		default:
			close(s.ch)
		}
	}
	return nil
}
func (s *signal) WithAttrs([]slog.Attr) slog.Handler { return s }
func (s *signal) WithGroup(string) slog.Handler      { return s }

// TestRunawayGuestLetsGCFinish: while a guest spins in a loop that calls
// nothing, the rest of the process runs: a garbage collection (which
// must stop every goroutine, the guest's included) finishes while the
// guest is still running, long before its timeout. On wazero the guest
// runs compiled code on a goroutine that Go cannot preempt; the meter's
// check in every loop is what hands the goroutine back (docs/SECURITY.md,
// "One guest cannot freeze the host"). Without it, as in a module whose
// rewrite switched its meter off before validation stopped that, the
// collection waits for the guest forever and so does every goroutine.
func TestRunawayGuestLetsGCFinish(t *testing.T) {
	wasm := wat.Must(spinner)
	forEngines(t, func(t *testing.T, engine string) {
		for _, export := range []string{"loop", "deep"} {
			t.Run(export, func(t *testing.T) {
				inLoop := &signal{text: "in the loop", ch: make(chan struct{})}
				h, err := host.New(context.Background(), nil, host.WithLogger(slog.New(inLoop)))
				require.NoError(t, err)
				t.Cleanup(func() { _ = h.Close(context.Background()) })
				cb := config.DefaultCallback()
				cb.Name, cb.Export, cb.Engine, cb.Signature = export, export, engine, "(x: f32[n]) -> f32[n]"
				cb.Limits.Timeout = 10 * time.Minute // only the test's cancel ends it
				require.NoError(t, h.LoadModule(context.Background(), cb, wasm))

				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				done := make(chan error, 1)
				go func() {
					_, err := h.Invoke(ctx, export, abi.From([]float32{1}))
					done <- err
				}()
				select {
				case <-inLoop.ch:
				case err := <-done:
					t.Fatalf("the guest returned before looping: %v", err)
				}

				gc := make(chan time.Duration, 1)
				go func() {
					start := time.Now()
					runtime.GC()
					gc <- time.Since(start)
				}()
				// The bound is generous: a collection takes milliseconds;
				// one that waits for the guest never ends.
				select {
				case took := <-gc:
					t.Logf("runtime.GC took %v while the guest spun", took)
				case err := <-done:
					t.Fatalf("the guest stopped (%v) before the collection finished", err)
				case <-time.After(2 * time.Minute):
					t.Fatal("runtime.GC did not finish while the guest spun")
				}
				select {
				case err := <-done:
					t.Fatalf("the guest stopped on its own: %v", err)
				default:
				}
				cancel()
				require.ErrorIs(t, <-done, host.Canceled)
			})
		}
	})
}

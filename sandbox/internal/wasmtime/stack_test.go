//go:build cgo

package wasmtime_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/wasmtime"
)

// stackWAT recurses: forever without end, down(n) n frames deep, and
// down_host(n) n frames deep, then makes a host call (WASI's
// clock_time_get) from the bottom and returns n+1 if the clock was read.
const stackWAT = `
(module
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock (param i32 i64 i32) (result i32)))
  (memory (export "memory") 1)
  (func $down_host (export "down_host") (param $n i32) (result i32)
    (if (result i32) (i32.eqz (local.get $n))
      (then
        (i64.store (i32.const 16) (i64.const 0))
        (drop (call $clock (i32.const 1) (i64.const 1) (i32.const 16)))
        (i64.ne (i64.load (i32.const 16)) (i64.const 0)))
      (else (i32.add (call $down_host (i32.sub (local.get $n) (i32.const 1))) (i32.const 1)))))
  (func $forever (export "forever") (param $n i32) (result i32)
    (i32.add (call $forever (i32.add (local.get $n) (i32.const 1))) (i32.const 1)))
  (func $down (export "down") (param $n i32) (result i32)
    (if (result i32) (i32.eqz (local.get $n))
      (then (i32.const 0))
      (else (i32.add (call $down (i32.sub (local.get $n) (i32.const 1))) (i32.const 1))))))`

// TestBigMaxStackSwitchesStacks: a callback whose max_stack (24 MiB) is
// more than a Go thread's whole native stack (8 MiB, or 2 MiB where the
// stack rlimit is unlimited) runs on a stack the engine reserves, so
// unbounded recursion is the StackOverflow trap, not a fault past the
// thread's guard page that kills the process; a deep but bounded
// recursion that needs more than the thread has returns its value, with a
// host call (into Go) from its deepest frame. Both
// ways of switching: the x86-64 assembly, and makecontext/swapcontext,
// which every other glibc target (aarch64, ...) runs.
func TestBigMaxStackSwitchesStacks(t *testing.T) {
	ctx := context.Background()
	e, err := wasmtime.New(ctx, wasmtime.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close(ctx) })
	lim := config.Limits{Timeout: time.Minute, MaxMemory: 1 << 20, MaxStack: 24 << 20, MaxError: 64, MaxLog: 64}
	m, err := sandbox.Compile(ctx, e, wat.Must(stackWAT), sandbox.ModuleConfig{Name: "deep", Limits: lim, WASI: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close(ctx) })

	for _, mode := range []struct {
		name string
		mode int
	}{{"assembly", wasmtime.SwitchAssembly}, {"ucontext", wasmtime.SwitchContext}} {
		t.Run(mode.name, func(t *testing.T) {
			if !wasmtime.ChooseStackSwitch(t, mode.mode) {
				t.Skipf("this build offers no choice of stack switch")
			}
			before := wasmtime.StackSwitches()
			_, err := callWith(ctx, m, "forever", 0, time.Minute)
			var trap *sandbox.Trap
			require.True(t, errors.As(err, &trap), "%v", err)
			assert.Equal(t, abi.StackOverflow, trap.Class, "%v", err)
			assert.Greater(t, wasmtime.StackSwitches(), before, "the call ran on the thread's own stack")

			// 400,000 frames of down take more than 8 MiB (at least 32
			// bytes each) and less than 24 MiB.
			got, err := callWith(ctx, m, "down", 400_000, time.Minute)
			require.NoError(t, err)
			assert.EqualValues(t, 400_000, got)

			// A host call from deep in the switched stack (a cgo callback
			// into Go from it) works, and the guest goes on after it. Go
			// checks a callback's stack against the bounds it gave the
			// thread it made, and where the switched stack lies relative
			// to them varies: each round runs on a fresh thread (a
			// goroutine that exits locked to its thread ends it), so a
			// callback on the wrong stack is caught in a few rounds (without the
			// switch back, 4 of 8 runs of 6 rounds failed).
			freed := wasmtime.StacksFreed()
			for round := range 24 {
				done := make(chan error, 1)
				go func() {
					runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
					got, err := callWith(ctx, m, "down_host", 300_000, time.Minute)
					if err == nil && got != 300_001 {
						err = fmt.Errorf("down_host returned %d, want 300001 (the clock read and the recursion unwound)", got)
					}
					done <- err
				}()
				require.NoError(t, <-done, "round %d", round)
			}
			// Each of those threads switched, then ended: its own stack is
			// unmapped by then (a pthread key's destructor), not left
			// behind with the pages the recursion touched.
			assert.Eventually(t, func() bool { return wasmtime.StacksFreed() > freed }, time.Minute, time.Millisecond,
				"no thread's own stack was unmapped at its end")
		})
	}
}

// TestNoStackSwitchRefusesShortThread: where the engine cannot switch
// stacks (musl off x86-64, other systems; chosen here through the knob),
// a call whose thread has less native stack than the guest may need does
// not start: it fails as a StackOverflow that names the thread's room and
// the need, and the process lives on. CallerStack then says what a caller
// must give, and a callback that fits the thread still runs.
func TestNoStackSwitchRefusesShortThread(t *testing.T) {
	if !wasmtime.ChooseStackSwitch(t, wasmtime.SwitchNone) {
		t.Skip("this build cannot turn its stack switch off")
	}
	ctx := context.Background()
	e, err := wasmtime.New(ctx, wasmtime.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close(ctx) })
	big := config.Limits{Timeout: time.Minute, MaxMemory: 1 << 20, MaxStack: 24 << 20, MaxError: 64, MaxLog: 64}
	assert.EqualValues(t, 25<<20, wasmtime.CallerStack(big.MaxStack), "without a switch a caller must give max_stack plus 1 MiB")

	// Instantiation runs start functions: it is refused the same way.
	m, err := sandbox.Compile(ctx, e, wat.Must(stackWAT), sandbox.ModuleConfig{Name: "deep", Limits: big, WASI: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close(ctx) })
	before := wasmtime.StackSwitches()
	_, err = callWith(ctx, m, "down", 10, time.Minute)
	var trap *sandbox.Trap
	require.True(t, errors.As(err, &trap), "%v", err)
	assert.Equal(t, abi.StackOverflow, trap.Class)
	assert.Contains(t, trap.Message, "the calling thread has ")
	assert.Contains(t, trap.Message, "the guest needs 25MiB (max_stack 24MiB plus the engine's own)")
	assert.Equal(t, before, wasmtime.StackSwitches(), "nothing switched")

	// A call that fits the thread (the default 512 KiB wasm stack on a Go
	// thread of megabytes) runs as before.
	small := big
	small.MaxStack = 0
	ms, err := sandbox.Compile(ctx, e, wat.Must(stackWAT), sandbox.ModuleConfig{Name: "shallow", Limits: small, WASI: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ms.Close(ctx) })
	got, err := callWith(ctx, ms, "down", 1000, time.Minute)
	require.NoError(t, err)
	assert.EqualValues(t, 1000, got)
}

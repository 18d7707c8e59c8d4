//go:build cgo

package wasmtime_test

import (
	"context"
	"fmt"
	"sync"
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

// turnsWAT has a runaway export and one that does a given amount of work:
// work(n) counts down from n*2^20 and returns n, so a call that returns n
// ran to the end.
const turnsWAT = `
(module
  (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func $count (param $n i32)
    (local $i i64)
    (local.set $i (i64.shl (i64.extend_i32_u (local.get $n)) (i64.const 20)))
    (block $done
      (loop $l
        (br_if $done (i64.eqz (local.get $i)))
        (local.set $i (i64.sub (local.get $i) (i64.const 1)))
        (br $l))))
  ;; nap(n) works like work(n), then sleeps 500 ms (a WASI clock
  ;; subscription at address 0, relative) and returns n.
  (func (export "nap") (param $n i32) (result i32)
    (call $count (local.get $n))
    (i64.store (i32.const 24) (i64.const 500000000))
    (drop (call $poll (i32.const 0) (i32.const 64) (i32.const 1) (i32.const 128)))
    (local.get $n))
  (func (export "spin") (param i32) (result i32) (loop $l (br $l)) (i32.const 0))
  (func (export "work") (param $n i32) (result i32)
    (call $count (local.get $n))
    (local.get $n))
)`

var i32toi32 = []sandbox.ValType{sandbox.I32}

// turnsModule compiles turnsWAT on a wasmtime engine whose guests take
// turns on the given number of cores.
func turnsModule(t testing.TB, cores int) sandbox.Module {
	_, m := turnsEngine(t, cores)
	return m
}

// turnsEngine is turnsModule with its engine, whose turns a test may
// watch (wasmtime.Turns).
func turnsEngine(t testing.TB, cores int) (sandbox.Engine, sandbox.Module) {
	t.Helper()
	ctx := context.Background()
	e, err := wasmtime.New(ctx, wasmtime.Options{Cores: cores})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close(ctx) })
	lim := config.Limits{Timeout: time.Minute, MaxMemory: 1 << 20, MaxError: 64, MaxLog: 64}
	m, err := sandbox.Compile(ctx, e, wat.Must(turnsWAT), sandbox.ModuleConfig{Name: "turns", Limits: lim, WASI: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close(ctx) })
	return e, m
}

// callWith instantiates m and calls export once with arg, under the given
// timeout (0: none) and context.
func callWith(ctx context.Context, m sandbox.Module, export string, arg uint64, timeout time.Duration) (uint64, error) {
	inst, err := m.Instantiate(ctx, sandbox.Deadline(time.Now(), timeout))
	if err != nil {
		return 0, err
	}
	defer inst.Close(context.Background())
	fn, err := inst.Export(export, i32toi32, i32toi32)
	if err != nil {
		return 0, err
	}
	stack := []uint64{arg}
	inst.SetDeadline(sandbox.Deadline(time.Now(), timeout))
	err = inst.Call(ctx, fn, stack)
	return stack[0], err
}

// A call asleep in a host call gives its turn up: with one turn, a call
// that needs tens of milliseconds of work finishes within its 300 ms while
// the turn's holder sleeps 500 ms.
func TestSleepingCallGivesItsTurnUp(t *testing.T) {
	e, m := turnsEngine(t, 1)
	napper := make(chan error, 1)
	go func() {
		got, err := callWith(context.Background(), m, "nap", 16, 5*time.Second)
		if err == nil && got != 16 {
			err = fmt.Errorf("nap returned %d, want 16", got)
		}
		napper <- err
	}()
	// The napper took the turn at a tick of its work, and gave it up to
	// sleep in poll_oneoff.
	require.Eventually(t, func() bool { return wasmtime.Turns(e).GivenUp >= 1 }, 30*time.Second, time.Millisecond,
		"the napper never gave its turn up")
	got, err := callWith(context.Background(), m, "work", 64, 300*time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, uint64(64), got)
	require.NoError(t, <-napper)
}

// More calls than turns, each many ticks long, all run to the end: turns
// are handed on, never lost.
func TestTurnsAreSharedAndNeverLost(t *testing.T) {
	m := turnsModule(t, 1)
	const calls, rounds = 4, 3
	var wg sync.WaitGroup
	results := make([][]uint64, calls)
	errs := make([][]error, calls)
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				got, err := callWith(context.Background(), m, "work", 64, time.Minute)
				results[i] = append(results[i], got)
				errs[i] = append(errs[i], err)
			}
		}()
	}
	wg.Wait()
	for i := range calls {
		for r := range rounds {
			require.NoError(t, errs[i][r], "call %d round %d", i, r)
			assert.Equal(t, uint64(64), results[i][r], "call %d round %d ran to the end", i, r)
		}
	}
}

// With one turn and a runaway call holding it, a second runaway call
// (waiting for the turn, or holding it for a slice) stops when its own
// limit comes, a deadline or its context's cancellation, with that
// limit's kind, while the first keeps running to its own, later deadline.
func TestSecondCallStopsAtItsOwnLimit(t *testing.T) {
	for _, c := range []struct {
		name    string
		timeout time.Duration
		cancel  time.Duration
		want    error
	}{
		{"deadline", 50 * time.Millisecond, 0, abi.Timeout},
		{"canceled", 0, 50 * time.Millisecond, abi.Canceled},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, m := turnsEngine(t, 1)
			holder := make(chan error, 1)
			go func() {
				_, err := callWith(context.Background(), m, "spin", 0, time.Second)
				holder <- err
			}()
			// The holder takes the one turn at its first tick.
			require.Eventually(t, func() bool { return wasmtime.Turns(e).Free == 0 }, 30*time.Second, time.Millisecond,
				"the holder never took the turn")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if c.cancel > 0 {
				time.AfterFunc(c.cancel, cancel)
			}
			_, err := callWith(ctx, m, "spin", 0, c.timeout)
			require.ErrorIs(t, err, c.want)
			select {
			case err := <-holder:
				t.Fatalf("the first call ended first: %v", err)
			default:
			}
			require.ErrorIs(t, <-holder, abi.Timeout)
		})
	}
}

// Many calls with mixed deadlines and cancellations on two turns: every
// call ends, with the kind its own limit gives.
func TestTurnsUnderMixedStops(t *testing.T) {
	m := turnsModule(t, 2)
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch i % 3 {
			case 0:
				_, err := callWith(context.Background(), m, "spin", 0, time.Duration(10+i)*time.Millisecond)
				assert.ErrorIs(t, err, abi.Timeout, "call %d", i)
			case 1:
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(5+i)*time.Millisecond)
				defer cancel()
				_, err := callWith(ctx, m, "spin", 0, 0)
				assert.ErrorIs(t, err, abi.Timeout, "call %d: a context deadline is a timeout", i)
			default:
				got, err := callWith(context.Background(), m, "work", 4, time.Minute)
				assert.NoError(t, err, "call %d", i)
				assert.Equal(t, uint64(4), got, "call %d", i)
			}
		}()
	}
	wg.Wait()
}

// BenchmarkOversubscribedWork is the cost of turns when more guests than
// cores run: 4 goroutines per core each run work(8) (about 10 ms of
// looping) back to back, with turns (the default) and with the OS
// time-slicing (Cores: -1). ns/op is per call; read the ratio.
func BenchmarkOversubscribedWork(b *testing.B) {
	for _, c := range []struct {
		name  string
		cores int
	}{{"turns", 0}, {"os", -1}} {
		b.Run(c.name, func(b *testing.B) {
			m := turnsModule(b, c.cores)
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := callWith(context.Background(), m, "work", 8, time.Minute); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

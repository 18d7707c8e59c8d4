package host_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
)

// ratioWat does work in two functions in a known ratio: light runs its
// loop n times and heavy 9n, each iteration calling the leaf mix (no loop
// of its own, so all of its fuel is charged at its entry: a profiler that
// charged a function's entry to its caller would give mix nothing). fail
// runs light, then divides by zero.
const ratioWat = `(module
  (import "callbox" "error" (func $err (param i32 i32)))
  (memory (export "memory") 1)
  (global $sink (mut i32) (i32.const 0))
  (func (export "callbox_abi_version") (result i32) i32.const 1)
  (func (export "callbox_alloc") (param i32 i32) (result i32) i32.const 1024)
  (func $mix (param $x i32) (result i32)
    (i32.xor (i32.mul (local.get $x) (i32.const 2654435761)) (i32.shr_u (local.get $x) (i32.const 7))))
  (func $light (param $n i32)
    (loop $l
      (global.set $sink (i32.add (global.get $sink) (call $mix (local.get $n))))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $l (local.get $n))))
  (func $heavy (param $n i32)
    (local.set $n (i32.mul (local.get $n) (i32.const 9)))
    (loop $l
      (global.set $sink (i32.add (global.get $sink) (call $mix (local.get $n))))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $l (local.get $n))))
  (func (export "run") (param i32) (result i32)
    (call $light (i32.const 20000))
    (call $heavy (i32.const 20000))
    i32.const 0)
  (func (export "fail") (param i32) (result i32)
    (call $light (i32.const 20000))
    (i32.div_u (i32.const 1) (i32.const 0))))`

func findFunc(t *testing.T, p *host.GuestProfile, name string) host.ProfileFunction {
	t.Helper()
	for _, f := range p.Functions {
		if f.Frame.Func == name {
			return f
		}
	}
	require.Failf(t, "function not in the profile", "%s: %+v", name, p.Functions)
	return host.ProfileFunction{}
}

// TestGuestProfile: a guest whose two functions do work in the ratio 1:9
// shows that ratio in its profile on both engines (fuel is counted per
// instruction, so the ratio is exact but for each function's few
// instructions outside its loop), every function's entry is its own, the
// fuel of the call path under the export is the call's fuel as the host
// measures it, and the pprof output is what go tool pprof reads: the
// module's function names on every sample's stack, fuel the default.
func TestGuestProfile(t *testing.T) {
	wasm := wat.Must(ratioWat)
	ctx := context.Background()
	h, err := host.New(ctx, nil, host.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	defer h.Close(ctx)
	for _, engine := range engineNames() {
		t.Run(engine, func(t *testing.T) {
			for _, export := range []string{"run", "fail"} {
				cb := config.DefaultCallback()
				cb.Name, cb.Export, cb.Engine = export+"_"+engine, export, engine
				cb.Signature = "() -> ()"
				cb.Limits.Fuel = 1 << 40 // the host then measures each call's fuel
				require.NoError(t, h.LoadModule(ctx, cb, wasm))
			}
			const calls = 3
			p, err := h.Profile(ctx, "run_"+engine, calls)
			require.NoError(t, err)
			assert.Equal(t, uint64(calls), p.Calls)
			assert.Zero(t, p.Failed)
			assert.Equal(t, engine, p.Engine)

			light, heavy, mix, run := findFunc(t, p, "light"), findFunc(t, p, "heavy"), findFunc(t, p, "mix"), findFunc(t, p, "run")
			ratio := float64(heavy.Total.Fuel) / float64(light.Total.Fuel)
			assert.InDelta(t, 9, ratio, 9*0.15, "heavy:light fuel %d:%d", heavy.Total.Fuel, light.Total.Fuel)
			assert.InDelta(t, 9, ratio, 9*0.01, "fuel is exact: only the few instructions outside the loops differ")
			assert.Equal(t, uint64(calls*20000*10), mix.Self.Calls, "mix entered once per iteration")
			assert.Equal(t, uint64(calls), light.Self.Calls)
			assert.Positive(t, mix.Self.Fuel, "mix's entry charge is its own")
			assert.Equal(t, mix.Self.Fuel, mix.Total.Fuel)
			assert.Equal(t, light.Total.Fuel+heavy.Total.Fuel+run.Self.Fuel, run.Total.Fuel)
			assert.Positive(t, heavy.Self.Nanos)
			t.Logf("%s: heavy:light fuel %.3f, wall %.3f (%v vs %v)", engine, ratio,
				float64(heavy.Total.Nanos)/float64(light.Total.Nanos), time.Duration(heavy.Total.Nanos), time.Duration(light.Total.Nanos))

			// The profile's fuel under the export is the call's own.
			st, err := h.Do(ctx, &host.Request{Callback: "run_" + engine})
			require.NoError(t, err)
			require.True(t, st.FuelKnown)
			assert.Equal(t, st.Fuel, run.Total.Fuel/calls, "the path under run is the call's fuel")

			var buf bytes.Buffer
			require.NoError(t, p.WritePprof(&buf))
			pp, err := profile.Parse(&buf)
			require.NoError(t, err)
			require.NoError(t, pp.CheckValid())
			assert.Equal(t, "fuel", pp.DefaultSampleType)
			require.Len(t, pp.SampleType, 3)
			var total int64
			stacks := map[string]int64{}
			for _, s := range pp.Sample {
				total += s.Value[0]
				var names []string
				for _, l := range s.Location {
					names = append(names, l.Line[0].Function.Name)
				}
				stacks[fmt.Sprint(names)] += s.Value[0]
			}
			// pprof lists a stack leaf first.
			assert.Equal(t, int64(mix.Self.Fuel), stacks["[mix light run]"]+stacks["[mix heavy run]"], "%v", stacks)
			assert.InDelta(t, 9, float64(stacks["[mix heavy run]"])/float64(stacks["[mix light run]"]), 0.01)
			var self uint64
			for _, f := range p.Functions {
				self += f.Self.Fuel
			}
			assert.Equal(t, int64(self), total, "every function's self fuel, the service exports' included")

			// A failing call is profiled up to where it stopped.
			p, err = h.Profile(ctx, "fail_"+engine, 2)
			require.Error(t, err, "every call failed")
			var ce *host.CallbackError
			require.True(t, errors.As(err, &ce), "%v", err)
			assert.Equal(t, abi.DivideByZero, ce.Kind())
			assert.Nil(t, p)
		})
	}
}

// TestGuestProfilerOption: a host made WithGuestProfiler profiles every
// call of its callbacks; without it GuestProfile says how to get one; a
// process-isolated callback cannot be profiled in its worker.
func TestGuestProfilerOption(t *testing.T) {
	wasm := wat.Must(ratioWat)
	ctx := context.Background()
	h, err := host.New(ctx, nil, host.WithGuestProfiler(), host.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	defer h.Close(ctx)
	cb := config.DefaultCallback()
	cb.Name, cb.Export, cb.Signature = "run", "run", "() -> ()"
	require.NoError(t, h.LoadModule(ctx, cb, wasm))
	run := cb
	for range 4 {
		_, err := h.Invoke(ctx, "run")
		require.NoError(t, err)
	}
	cb.Name, cb.Export = "fail", "fail"
	require.NoError(t, h.LoadModule(ctx, cb, wasm))
	_, err = h.Invoke(ctx, "fail")
	assert.Equal(t, abi.DivideByZero, abi.KindOf(err))
	p, err := h.GuestProfile("fail")
	require.NoError(t, err)
	assert.Equal(t, uint64(1), findFunc(t, p, "light").Self.Calls, "a failed call is profiled up to where it stopped")
	assert.Positive(t, findFunc(t, p, "fail").Self.Fuel)

	p, err = h.GuestProfile("run")
	require.NoError(t, err)
	assert.Equal(t, uint64(4), findFunc(t, p, "heavy").Self.Calls)
	assert.InDelta(t, 9, float64(findFunc(t, p, "heavy").Total.Fuel)/float64(findFunc(t, p, "light").Total.Fuel), 0.09)

	plain, err := host.New(ctx, nil, host.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	defer plain.Close(ctx)
	require.NoError(t, plain.LoadModule(ctx, run, wasm))
	_, err = plain.GuestProfile("run")
	require.ErrorContains(t, err, "WithGuestProfiler")
	assert.Equal(t, abi.FailedPrecondition, abi.KindOf(err))
	_, err = plain.Profile(ctx, "run", 0)
	assert.Equal(t, abi.InvalidArgument, abi.KindOf(err))
}

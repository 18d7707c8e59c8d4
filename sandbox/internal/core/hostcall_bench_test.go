package core_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/wasmtime"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/wazero"
)

// hostCallWAT calls callbox.log or callbox.error n times in one guest call.
const hostCallWAT = `(module
  (import "callbox" "log" (func $log (param i32 i32 i32)))
  (import "callbox" "error" (func $error (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "a log line of 32 bytes, 1234567")
  (func (export "logs") (param $n i32) (result i32)
    (loop $l
      (call $log (i32.const 0) (i32.const 16) (i32.const 32))
      (br_if $l (local.tee $n (i32.sub (local.get $n) (i32.const 1)))))
    (i32.const 0))
  (func (export "errors") (param $n i32) (result i32)
    (loop $l
      (call $error (i32.const 16) (i32.const 32))
      (br_if $l (local.tee $n (i32.sub (local.get $n) (i32.const 1)))))
    (i32.const 0)))`

// BenchmarkHostCall is the cost of one call from the guest to a host
// function (callbox.log at a level the logger drops, and callbox.error),
// per engine: b.N calls in one guest call, so the figure is per host call.
func BenchmarkHostCall(b *testing.B) {
	ctx := context.Background()
	type namedEngine struct {
		name string
		new  func() (sandbox.Engine, error)
	}
	engs := []namedEngine{{"wazero", func() (sandbox.Engine, error) { return wazero.New(ctx, wazero.Options{}) }}}
	if wasmtime.Available {
		engs = append(engs, namedEngine{"wasmtime", func() (sandbox.Engine, error) { return wasmtime.New(ctx, wasmtime.Options{}) }})
	}
	for _, ec := range engs {
		for _, export := range []string{"logs", "errors"} {
			b.Run(ec.name+"/"+export, func(b *testing.B) {
				e, err := ec.new()
				require.NoError(b, err)
				defer e.Close(ctx)
				lim := config.Limits{Timeout: time.Minute, MaxMemory: 1 << 20, MaxError: 64, MaxLog: 1 << 30}
				logger := slog.New(slog.DiscardHandler)
				m, err := sandbox.Compile(ctx, e, wat.Must(hostCallWAT), sandbox.ModuleConfig{Name: "b", Limits: lim, Logger: logger})
				require.NoError(b, err)
				defer m.Close(ctx)
				inst, err := m.Instantiate(ctx, time.Time{})
				require.NoError(b, err)
				defer inst.Close(ctx)
				fn, err := inst.Export(export, []sandbox.ValType{sandbox.I32}, []sandbox.ValType{sandbox.I32})
				require.NoError(b, err)
				b.ReportAllocs()
				b.ResetTimer()
				require.NoError(b, inst.Call(ctx, fn, []uint64{uint64(b.N)}))
			})
		}
	}
}

package host_test

import (
	"bytes"
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

// deepWat fails three calls deep: run -> level1 -> level2 -> level3,
// which divides by zero (or, with spin, loops forever). The import makes
// the module's own function indices differ from those the meter's
// rewrite gives the engine.
const deepWat = `(module
  (import "callbox" "error" (func $err (param i32 i32)))
  (memory (export "memory") 1)
  (func (export "callbox_abi_version") (result i32) i32.const 1)
  (func (export "callbox_alloc") (param i32 i32) (result i32) i32.const 1024)
  (func $level3 (param i32) (result i32)
    local.get 0
    i32.const 0
    i32.div_u)
  (func $level2 (param i32) (result i32) local.get 0 call $level3)
  (func $level1 (param i32) (result i32) local.get 0 call $level2)
  (func $spin3 (param i32) (result i32) (loop $l (br $l)) local.get 0)
  (func $spin2 (param i32) (result i32) local.get 0 call $spin3)
  (func (export "run") (param i32) (result i32) i32.const 7 call $level1)
  (func (export "spin") (param i32) (result i32) i32.const 7 call $spin2))`

// TestBacktraces: a failure three calls deep names those functions, with
// the function index and byte offset of the module as its author built
// it (not the rewritten one the engine ran), on both engines, with and
// without fuel (wasmtime runs the module as is without it, rewritten
// with it), in process and under isolation: process; the error message
// shows the innermost frames. A timeout says where the guest was.
func TestBacktraces(t *testing.T) {
	wasm := wat.Must(deepWat)
	// level3's i32.div_u, found in the module's bytes.
	body := []byte{0x20, 0x00, 0x41, 0x00, 0x6e, 0x0b}
	at := bytes.Index(wasm, body)
	require.Positive(t, at)
	divOffset := uint64(at + 4)
	loop := bytes.Index(wasm, []byte{0x03, 0x40, 0x0c, 0x00, 0x0b}) // spin3's loop
	require.Positive(t, loop)

	isolations := []string{config.IsolationPooled}
	var opts []host.Option
	if engines.ProcessIsolationAvailable() {
		isolations = append(isolations, config.IsolationProcess)
		opts = append(opts, host.WithWorker(workerPath(t, false)))
	}
	ctx := context.Background()
	h, err := host.New(ctx, nil, append(opts, host.WithLogger(slog.New(slog.DiscardHandler)))...)
	require.NoError(t, err)
	defer h.Close(ctx)
	for _, engine := range engineNames() {
		for _, fuel := range []uint64{0, 1 << 40} {
			for _, iso := range isolations {
				name := fmt.Sprintf("%s_fuel%v_%s", engine, fuel > 0, iso)
				for _, export := range []string{"run", "spin"} {
					cb := config.DefaultCallback()
					cb.Name, cb.Export, cb.Engine, cb.Isolation = export+"_"+name, export, engine, iso
					cb.Signature = "() -> ()"
					cb.Limits.Fuel = fuel
					cb.Limits.Timeout = 200 * time.Millisecond
					require.NoError(t, h.LoadModule(ctx, cb, wasm), name)
				}

				_, err := h.Invoke(ctx, "run_"+name)
				var ce *host.CallbackError
				require.True(t, errors.As(err, &ce), "%s: %v", name, err)
				assert.Equal(t, abi.DivideByZero, ce.Kind(), name)
				require.GreaterOrEqual(t, len(ce.Frames), 4, "%s: %v", name, ce.Frames)
				want := []string{"level3", "level2", "level1"}
				for i, fn := range want {
					assert.Equal(t, fn, ce.Frames[i].Func, "%s: frame %d of %v", name, i, ce.Frames)
					assert.Empty(t, ce.Frames[i].Module, name)
				}
				assert.Equal(t, uint32(3), ce.Frames[0].FuncIndex, "%s: level3 is function 3 of the module as built", name)
				assert.Equal(t, uint32(4), ce.Frames[1].FuncIndex, name)
				assert.Equal(t, divOffset, ce.Frames[0].Offset, "%s: the offset of level3's i32.div_u in the module as built", name)
				assert.Contains(t, err.Error(), fmt.Sprintf("(at level3 @0x%x <- level2 @0x", divOffset), name)

				_, err = h.Invoke(ctx, "spin_"+name)
				require.True(t, errors.As(err, &ce), "%s: %v", name, err)
				assert.Equal(t, abi.Timeout, ce.Kind(), name)
				require.NotEmpty(t, ce.Frames, "%s: a timeout says where the guest was: %v", name, err)
				assert.Equal(t, "spin3", ce.Frames[0].Func, "%s: %v", name, ce.Frames)
				assert.GreaterOrEqual(t, ce.Frames[0].Offset, uint64(loop), name)
				assert.Less(t, ce.Frames[0].Offset, uint64(loop+5), name)
			}
		}
	}
}

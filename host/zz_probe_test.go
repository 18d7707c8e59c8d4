package host_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/wat"
)

const probePrelude = `
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 4096))
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func $alloc (export "callbox_alloc") (param $size i32) (param $align i32) (result i32)
    (local $p i32)
    (local.set $p (i32.and (i32.add (global.get $heap) (i32.sub (local.get $align) (i32.const 1)))
                           (i32.sub (i32.const 0) (local.get $align))))
    (global.set $heap (i32.add (local.get $p) (local.get $size)))
    (local.get $p))
`

func TestProbe(t *testing.T) {
	src := os.Getenv("PROBE_WAT")
	eng := os.Getenv("PROBE_ENGINE")
	b, err := wat.Compile("(module " + os.Getenv("PROBE_IMPORTS") + probePrelude + src + ")")
	if err != nil {
		t.Fatal(err)
	}
	h, _ := host.New(context.Background(), nil, host.WithLogger(slog.New(slog.DiscardHandler)))
	defer h.Close(context.Background())
	cb := config.DefaultCallback()
	cb.Name, cb.Signature, cb.Engine = "run", "(x: f32[n]) -> f32[n]", eng
	cb.Limits.Timeout = time.Second
	if os.Getenv("PROBE_WASI") != "" {
		cb.WASI = config.WASIMinimal
	}
	start := time.Now()
	err = h.LoadModule(context.Background(), cb, b)
	t.Logf("load: %v (%v)", err, time.Since(start))
	if err != nil {
		return
	}
	start = time.Now()
	_, err = h.Invoke(context.Background(), "run", abi.From([]float32{1, 2}))
	t.Logf("call: %v (%v)", err, time.Since(start))
}

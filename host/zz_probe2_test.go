package host_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
)

func leb(v uint64) []byte {
	var out []byte
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			out = append(out, b|0x80)
		} else {
			return append(out, b)
		}
	}
}

func section(id byte, body []byte) []byte { return append(append([]byte{id}, leb(uint64(len(body)))...), body...) }

func TestProbeLocals(t *testing.T) {
	eng := os.Getenv("PROBE_ENGINE")
	m := []byte("\x00asm\x01\x00\x00\x00")
	// types: 0 ()->i32, 1 (i32,i32)->i32, 2 (i32)->i32
	m = append(m, section(1, []byte{3, 0x60, 0, 1, 0x7f, 0x60, 2, 0x7f, 0x7f, 1, 0x7f, 0x60, 1, 0x7f, 1, 0x7f})...)
	m = append(m, section(3, []byte{3, 0, 1, 2})...)
	m = append(m, section(5, []byte{1, 0, 1})...)
	exp := []byte{4}
	for i, n := range []string{"callbox_abi_version", "callbox_alloc", "run"} {
		exp = append(exp, byte(len(n)))
		exp = append(exp, n...)
		exp = append(exp, 0, byte(i))
	}
	exp = append(exp, 6)
	exp = append(exp, "memory"...)
	exp = append(exp, 2, 0)
	m = append(m, section(7, exp)...)
	body0 := []byte{0, 0x41, 1, 0x0b}
	body1 := []byte{0, 0x41, 0x80, 0x20, 0x0b}
	locals := append([]byte{2}, leb(0xfffffff0)...)
	locals = append(locals, 0x7e)
	locals = append(locals, leb(0xf)...)
	locals = append(locals, 0x7e)
	body2 := append(locals, 0x41, 0, 0x0b)
	code := []byte{3}
	for _, b := range [][]byte{body0, body1, body2} {
		code = append(code, leb(uint64(len(b)))...)
		code = append(code, b...)
	}
	m = append(m, section(10, code)...)
	h, _ := host.New(context.Background(), nil, host.WithLogger(slog.New(slog.DiscardHandler)))
	defer h.Close(context.Background())
	cb := config.DefaultCallback()
	cb.Name, cb.Signature, cb.Engine = "run", "(x: f32[n]) -> f32[n]", eng
	start := time.Now()
	err := h.LoadModule(context.Background(), cb, m)
	t.Logf("load: %v (%v)", err, time.Since(start))
}

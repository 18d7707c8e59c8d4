package core_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/core"
)

// FuzzImports calls the host side of every guest import — callbox.error,
// callbox.log and every function of the WASI profile — with fuzzed guest
// memory and fuzzed arguments (any pointer, any length), several calls in a
// row on one GuestState, as a hostile guest would. No call may panic; a
// refused argument must abort the call with a typed trap (ABIViolation, or
// GuestError for proc_exit, Timeout for a sleep past the deadline); the
// error message and the log must stay within their caps; callbox.error
// and callbox.log must never write guest memory, and the WASI functions
// may write only inside guest memory (they get the slice, nothing else).
func FuzzImports(f *testing.F) {
	le := binary.LittleEndian
	call := func(fn byte, args ...uint32) []byte {
		b := []byte{fn}
		for _, a := range args {
			b = le.AppendUint32(b, a)
		}
		for len(b) < 1+9*4 {
			b = append(b, 0)
		}
		return b
	}
	mem := make([]byte, 256)
	copy(mem, "hello, host\n\xff\xfe not utf-8 \xc3\x28")
	le.PutUint32(mem[128:], 0)  // iovec: ptr 0
	le.PutUint32(mem[132:], 40) //        len 40
	fns := core.HostFuncs(true)
	index := func(module, name string) byte {
		for i, hf := range fns {
			if hf.Module == module && hf.Name == name {
				return byte(i)
			}
		}
		f.Fatalf("no host function %s.%s", module, name)
		return 0
	}
	for _, script := range [][]byte{
		call(index("callbox", "error"), 0, 11),
		call(index("callbox", "error"), 0xfffffff8, 64),
		call(index("callbox", "error"), 16, 0xffffffff),
		call(index("callbox", "log"), 1, 0, 40),
		call(index("callbox", "log"), 0xfffffffb, 200, 56),
		call(index("wasi_snapshot_preview1", "fd_write"), 1, 128, 1, 200),
		call(index("wasi_snapshot_preview1", "fd_write"), 2, 128, 0x20000000, 200),
		call(index("wasi_snapshot_preview1", "fd_read"), 0, 128, 1, 200),
		call(index("wasi_snapshot_preview1", "random_get"), 0, 256),
		call(index("wasi_snapshot_preview1", "clock_time_get"), 1, 0, 0, 248),
		call(index("wasi_snapshot_preview1", "poll_oneoff"), 0, 64, 1, 252),
		call(index("wasi_snapshot_preview1", "proc_exit"), 3),
		call(index("wasi_snapshot_preview1", "fd_fdstat_get"), 1, 200),
		call(index("wasi_snapshot_preview1", "args_sizes_get"), 0, 4),
		append(call(index("callbox", "log"), 2, 0, 12), call(index("callbox", "error"), 12, 30)...),
	} {
		f.Add(mem, script, uint16(16), uint16(64))
	}
	f.Fuzz(func(t *testing.T, mem, script []byte, maxError, maxLog uint16) {
		lim := config.Limits{Timeout: time.Millisecond, MaxError: uint64(maxError), MaxLog: uint64(maxLog)}
		g := core.NewGuestState(&lim, nil)
		g.SetDeadline(time.Now().Add(lim.Timeout))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		const callSize = 1 + 9*4
		for len(script) >= callSize {
			hf := fns[int(script[0])%len(fns)]
			stack := make([]uint64, max(len(hf.Params), len(hf.Results)))
			for i := range hf.Params {
				v := uint64(le.Uint32(script[1+4*i:]))
				if hf.Params[i] == sandbox.I64 {
					v |= uint64(le.Uint32(script[1+4*((i+1)%9):])) << 32
				}
				stack[i] = v
			}
			script = script[callSize:]
			before := bytes.Clone(mem)
			g.Begin(ctx)
			start := time.Now()
			hf.Fn(g, mem, stack)
			if d := time.Since(start); d > 500*time.Millisecond {
				t.Fatalf("%s.%s took %v", hf.Module, hf.Name, d)
			}
			g.End()
			if hf.Module == "callbox" && !bytes.Equal(before, mem) {
				t.Fatalf("%s.%s wrote guest memory", hf.Module, hf.Name)
			}
			if g.Abort != nil {
				var trap *sandbox.Trap
				if !errors.As(g.Abort, &trap) {
					t.Fatalf("untyped abort %T", g.Abort)
				}
				switch trap.Class {
				case abi.ABIViolation, abi.GuestError, abi.Timeout, abi.Canceled:
				default:
					t.Fatalf("%s.%s aborted with %s: %v", hf.Module, hf.Name, trap.Class.Ident(), trap)
				}
				if trap.Class == abi.GuestError && hf.Name != "proc_exit" {
					t.Fatalf("%s.%s: %v", hf.Module, hf.Name, trap)
				}
			}
			if n := uint64(len(g.ErrorMessage)); n > uint64(maxError)+uint64(len("…[truncated 4294967295 bytes]"))+3 {
				t.Fatalf("error message of %d bytes, cap %d", n, maxError)
			}
			if g.LogBytes > uint64(maxLog) {
				t.Fatalf("logged %d bytes, cap %d", g.LogBytes, maxLog)
			}
		}
	})
}

//go:build linux

package procwall

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/core"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/symbols"
)

// TestWireRoundTrip: messages of every size class, short and long (split
// over packets), arrive whole and in order, with the descriptor sent
// beside the first packet.
func TestWireRoundTrip(t *testing.T) {
	a, b, err := socketPair()
	require.NoError(t, err)
	defer closeFD(a)
	defer closeFD(b)
	for _, n := range []int{1, 100, maxPacket - 1, maxPacket, maxPacket + 1, 3*maxPacket + 7} {
		msg := bytes.Repeat([]byte{0x42}, n)
		msg[0] = opCall
		fd, err := unix.MemfdCreate("t", unix.MFD_CLOEXEC)
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- send(a, msg, fd) }()
		got, gotFD, err := recv(b, nil, maxMessage, true)
		require.NoError(t, err, "size %d", n)
		require.NoError(t, <-done)
		assert.Equal(t, msg, got, "size %d", n)
		assert.GreaterOrEqual(t, gotFD, 0, "the descriptor came with the message")
		closeFD(gotFD)
		closeFD(fd)
	}
}

// TestWireRefusesLies: a long message above the limit, or whose packets
// run past the length it declared, is refused, not trusted.
func TestWireRefusesLies(t *testing.T) {
	a, b, err := socketPair()
	require.NoError(t, err)
	defer closeFD(a)
	defer closeFD(b)
	big := bytes.Repeat([]byte{1}, 2*maxPacket)
	big[0] = opCall
	go func() { _ = send(a, big, -1) }()
	_, _, err = recv(b, nil, maxPacket, false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "above the limit")

	a2, b2, err := socketPair()
	require.NoError(t, err)
	defer closeFD(a2)
	defer closeFD(b2)
	head := []byte{longMark, 10, 0, 0, 0, opCall, 1, 2}
	require.NoError(t, sendPacket(a2, head, nil))
	require.NoError(t, sendPacket(a2, bytes.Repeat([]byte{9}, 50), nil))
	_, _, err = recv(b2, nil, maxMessage, false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "longer than the 10 bytes it declared")
}

// TestWorkerText: text from a worker is made valid UTF-8 and capped on a
// rune boundary, whatever it claims.
func TestWorkerText(t *testing.T) {
	assert.Equal(t, "abc", workerText("abc", 10))
	assert.Equal(t, "ab", workerText("abc", 2))
	assert.Equal(t, "a", workerText("aé", 2), "never half a rune")
	got := workerText("\xff\xfeok", 100)
	assert.True(t, utf8.ValidString(got))
	assert.True(t, strings.HasSuffix(got, "ok"))
	assert.Equal(t, "", workerText("abc", 0))
}

// TestFramesCrossTheWire: a trap's frames arrive as the worker resolved
// them, with their source places; a worker's frames are cut to
// core.MaxFrames and their text to symbols.MaxText, made printable.
func TestFramesCrossTheWire(t *testing.T) {
	frames := []sandbox.Frame{{Func: "level3", FuncIndex: 3, Offset: 0x64e3, File: "deep.c", Line: 10, Column: 9}, {Module: "callbox", Func: "callbox.abort"}}
	for range core.MaxFrames {
		frames = append(frames, sandbox.Frame{Func: strings.Repeat("\x1b[2J", 100), File: "x\ny"})
	}
	var e enc
	e.trap(&sandbox.Trap{Class: abi.DivideByZero, Message: "integer divide by zero", Frames: frames})
	d := dec{b: e.b}
	got := d.trap()
	require.NoError(t, d.err)
	require.Len(t, got.Frames, core.MaxFrames)
	assert.Equal(t, frames[0], got.Frames[0])
	assert.Equal(t, frames[1], got.Frames[1])
	assert.LessOrEqual(t, len(got.Frames[2].Func), symbols.MaxText)
	assert.NotContains(t, got.Frames[2].Func, "\x1b")
	assert.Equal(t, "x?y", got.Frames[2].File)
}

// FuzzDecodeReturned: any bytes a worker sends as a call's reply are
// decoded without a panic, into at most the caps the callback's limits
// set, and a reply the host accepts has the stack it sent.
func FuzzDecodeReturned(f *testing.F) {
	var e enc
	e.reset(opReturned)
	e.err(&sandbox.Trap{Class: abi.Unreachable, Message: "unreachable", Frames: []sandbox.Frame{{Func: "f", FuncIndex: 3, Offset: 9}}})
	e.u32(1)
	e.u64(7)
	e.u64(65536)
	e.str("guest said no")
	e.u64(5)
	e.u64(0)
	e.bool(false)
	e.bool(true)
	e.trap(&sandbox.Trap{Class: abi.ABIViolation, Message: "bad pointer"})
	e.u64(100)
	e.bool(true)
	(&logBuf{lines: []logLine{{level: slog.LevelInfo, text: "hello"}, {stream: "stdout", text: "out"}}}).encode(&e)
	f.Add(e.b[1:])
	f.Add([]byte{})
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff})
	limits := config.DefaultCallback().Limits
	f.Fuzz(func(t *testing.T, b []byte) {
		var logged logSize
		m := &module{cfg: sandbox.ModuleConfig{Limits: limits, Logger: slog.New(&logged)}}
		i := &instance{m: m, state: core.NewGuestState(&m.cfg.Limits, m.cfg.Logger)}
		stack := []uint64{0}
		d := dec{b: b}
		callErr, _, err := i.decodeReturned(context.Background(), &d, stack)
		if err != nil {
			return
		}
		if callErr != nil {
			_ = callErr.Error()
			if tr, ok := sandbox.AsTrap(callErr); ok {
				require.True(t, tr.Class.Valid())
				require.LessOrEqual(t, len(tr.Frames), core.MaxFrames)
				for _, fr := range tr.Frames {
					require.LessOrEqual(t, len(fr.Func)+len(fr.File)+len(fr.Module), 3*symbols.MaxText)
					require.True(t, utf8.ValidString(fr.Func+fr.File+fr.Module))
				}
			}
		}
		require.LessOrEqual(t, uint64(len(i.state.ErrorMessage)), limits.MaxError+core.CapSlack)
		require.True(t, utf8.ValidString(i.state.ErrorMessage))
		require.LessOrEqual(t, logged.n, limits.MaxLog+core.CapSlack)
	})
}

// logSize is a slog handler that counts the guest text logged.
type logSize struct{ n uint64 }

func (l *logSize) Enabled(context.Context, slog.Level) bool { return true }
func (l *logSize) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logSize) WithGroup(string) slog.Handler            { return l }
func (l *logSize) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == sandbox.GuestTextKey {
			l.n += uint64(len(a.Value.String()))
		}
		return true
	})
	return nil
}

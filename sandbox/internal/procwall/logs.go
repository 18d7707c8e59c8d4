//go:build linux

package procwall

import (
	"context"
	"log/slog"
	"strings"
	"unicode/utf8"

	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/core"
)

// A guest's log lines are written in the worker and logged in the host.
// The worker's logger keeps each guest line of the call in progress (the
// call's context carries where), and the reply carries them; the host
// rebuilds each record in the one shape a guest line has (engine's
// GuestLogMessage with the text as an attribute) on the callback's own
// logger. A worker cannot make the host log any other record.

type logKey struct{}

// logLine is one guest line.
type logLine struct {
	level  slog.Level
	stream string // "", "stdout" or "stderr"
	text   string
}

// logBuf is the lines of one call.
type logBuf struct{ lines []logLine }

func (b *logBuf) reset() { b.lines = b.lines[:0] }

// maxLogLines bounds the lines one reply may carry: each costs the guest
// at least a byte of its max_log, which the worker's state enforces; this
// bounds what a lying worker can make the host allocate.
const maxLogLines = 1 << 20

func (b *logBuf) encode(e *enc) {
	e.u32(uint32(len(b.lines)))
	for _, l := range b.lines {
		e.u32(uint32(int32(l.level)))
		e.str(l.stream)
		e.str(l.text)
	}
}

// emitLogs reads the lines of a reply and logs them on logger: no more
// text than maxLog (and one truncation mark) in all, as the worker's
// engine caps it (a lying worker cannot make the host log more), each
// line valid UTF-8.
func emitLogs(ctx context.Context, d *dec, logger *slog.Logger, maxLog uint64) {
	n := d.count(12, "log lines")
	if n > maxLogLines {
		n = 0
	}
	src := slog.String(sandbox.GuestSourceKey, sandbox.GuestSource)
	room := maxLog + core.CapSlack
	for range n {
		level, stream, text := slog.Level(int32(d.u32())), d.str(), d.str()
		if d.err != nil || logger == nil {
			return
		}
		text = workerText(text, room)
		room -= uint64(len(text))
		if text == "" && room == 0 {
			continue
		}
		txt := slog.String(sandbox.GuestTextKey, text)
		switch stream {
		case "stdout", "stderr":
			logger.LogAttrs(ctx, level, sandbox.GuestLogMessage, src, txt, slog.String("stream", stream))
		default:
			logger.LogAttrs(ctx, level, sandbox.GuestLogMessage, src, txt)
		}
	}
}

// captureHandler is the worker's slog handler: it keeps guest lines in
// the logBuf of the call's context and drops everything else (the capped
// warning is the host's to log, from the reply's LogDropped).
type captureHandler struct{ probe func(string) }

func (h captureHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h captureHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h captureHandler) WithGroup(string) slog.Handler            { return h }

func (h captureHandler) Handle(ctx context.Context, r slog.Record) error {
	b, _ := ctx.Value(logKey{}).(*logBuf)
	if b == nil || r.Message != sandbox.GuestLogMessage {
		return nil
	}
	l := logLine{level: r.Level}
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case sandbox.GuestTextKey:
			l.text = a.Value.String()
		case "stream":
			l.stream = a.Value.String()
		}
		return true
	})
	if h.probe != nil {
		h.probe(l.text)
	}
	b.lines = append(b.lines, l)
	return nil
}

// workerText is guest text as a worker reported it, made what the engines
// make it in process: valid UTF-8 (each invalid run one U+FFFD) of at most
// max bytes, cut on a rune boundary.
func workerText(s string, max uint64) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if uint64(len(s)) <= max {
		return s
	}
	cut := int(max)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

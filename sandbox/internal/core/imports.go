package core

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/sandbox"
)

// GuestState is the host side of one instance's imports: what callbox.error,
// callbox.log and the WASI profile recorded during the current call. Both
// engines route their host functions here, so caps, truncation and bounds
// checks behave identically. It is reset at the start of every call.
type GuestState struct {
	limits *config.Limits
	logger *slog.Logger

	// ErrorMessage is the text the guest last passed to callbox.error.
	ErrorMessage string
	// LogBytes counts log bytes accepted this call; LogDropped counts
	// bytes dropped by the cap.
	LogBytes   uint64
	LogDropped uint64
	// Abort, when set, fails the call whatever the guest returns: an ABI
	// violation in an import, proc_exit, or a host panic.
	Abort *sandbox.Trap
	// MemoryDenied records that a memory.grow was refused by MaxMemory.
	MemoryDenied bool
	// Fuel accounts the metered budget of the call in progress, and
	// Counter reaches the guest's counter; nil when the module is not
	// metered. Imports that touch guest bytes charge through them
	// (ChargeBytes).
	Fuel    FuelMeter
	Counter FuelCounter
	// Profile, when set, records the guest's call paths for the guest
	// profiler (ModuleConfig.Profile).
	Profile *ProfileRecorder
	// Blocking, when set, is called by an import before it blocks the
	// guest's thread (a WASI sleep): the engine gives up what the running
	// guest holds that others may need (wasmtime: its core turn).
	Blocking func()

	ctx context.Context
	// deadline is the deadline of the host call in progress (zero for
	// none), set by the engine's SetDeadline. The engines interrupt guest
	// code at the deadline, but not a host function that blocks (a WASI
	// sleep), so those wait no longer than this.
	deadline time.Time
	born     time.Time
	stdout   lineBuffer
	stderr   lineBuffer
}

// NewGuestState creates the import state of one instance.
func NewGuestState(limits *config.Limits, logger *slog.Logger) *GuestState {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &GuestState{limits: limits, logger: logger, ctx: context.Background(), born: time.Now()}
}

// Report is the part of the state the host reads after a call
// (Instance.LastCall).
func (g *GuestState) Report() sandbox.CallReport {
	return sandbox.CallReport{GuestError: g.ErrorMessage, MemoryDenied: g.MemoryDenied}
}

// Stateful is implemented by the in-process engines' instances: the whole
// import state behind LastCall, which the process-isolation worker sends
// its host after each call.
type Stateful interface {
	GuestState() *GuestState
}

// Limits returns the limits the instance runs under.
func (g *GuestState) Limits() *config.Limits { return g.limits }

// SetDeadline sets the deadline host functions that wait honour (zero:
// none); the engines call it from their SetDeadline.
func (g *GuestState) SetDeadline(deadline time.Time) { g.deadline = deadline }

// Begin resets the per-call state. The deadline is not touched: it belongs
// to the host call, which may enter the guest several times.
func (g *GuestState) Begin(ctx context.Context) {
	g.ErrorMessage = ""
	g.LogBytes, g.LogDropped = 0, 0
	g.Abort = nil
	g.MemoryDenied = false
	g.ctx = ctx
	if g.Profile != nil {
		g.Profile.begin()
	}
}

// End flushes partial stdout/stderr lines and reports dropped log bytes.
func (g *GuestState) End() {
	g.stdout.flush(g, "stdout")
	g.stderr.flush(g, "stderr")
	LogCapped(g.ctx, g.logger, g.LogDropped, g.limits.MaxLog)
	g.ctx = context.Background()
}

// LogCapped logs the warning of a call whose guest wrote more than its
// max_log (nothing when dropped is 0): the one wording, whichever process
// ran the guest.
func LogCapped(ctx context.Context, logger *slog.Logger, dropped, maxLog uint64) {
	if dropped > 0 {
		logger.WarnContext(ctx, LogCappedMessage, "dropped_bytes", dropped, "max_log", maxLog)
	}
}

// CapSlack is the most capText writes past its cap: its truncation mark
// ("…[truncated N bytes]": 41 bytes with a 20-digit N).
const CapSlack = 64

// LogCappedMessage is the message of LogCapped's record.
const LogCappedMessage = "guest log output capped"

// Context is the context of the call in progress.
func (g *GuestState) Context() context.Context { return g.ctx }

// Fail records an abort reason; the first one wins.
func (g *GuestState) Fail(t *sandbox.Trap) {
	if g.Abort == nil {
		g.Abort = t
	}
}

// violation records a bad guest pointer seen by an import.
func (g *GuestState) violation(err error) {
	g.Fail(&sandbox.Trap{Class: abi.ABIViolation, Message: err.Error(), Cause: err})
}

// capText decodes guest bytes as UTF-8 (each invalid byte replaced by
// U+FFFD) and keeps at most max bytes of the result, cut on a rune boundary
// and marked with how many guest bytes were dropped. Every byte it reads
// adds at least one byte to the result, so it reads at most max bytes: a
// hostile length costs nothing beyond the bounds check. (Cutting the input
// before replacing, as it once did, let a message of invalid bytes grow to
// twice the cap: "\xffA" is 2 bytes in, 4 out. Replacing a whole run of
// invalid bytes with one U+FFFD, as strings.ToValidUTF8 does, would make
// the scan as long as the run: all of guest memory.)
//
// CapSlack bounds what it adds past max: the mark. A text that crossed a
// process (isolation: process) is held to max + CapSlack on arrival.
func capText(b []byte, max uint64) string {
	head := b[:min(uint64(len(b)), max)]
	if utf8.Valid(head) {
		// The common case, and a fast one: valid text (complete runes
		// only, so the cut is on a boundary).
		if dropped := len(b) - len(head); dropped > 0 {
			return fmt.Sprintf("%s…[truncated %d bytes]", head, dropped)
		}
		return string(head)
	}
	var sb strings.Builder
	sb.Grow(len(head))
	i := 0
	for i < len(b) {
		r, size := utf8.DecodeRune(b[i:])
		piece := b[i : i+size]
		if r == utf8.RuneError && size == 1 {
			piece = []byte("\uFFFD")
		}
		if uint64(sb.Len()+len(piece)) > max {
			break
		}
		sb.Write(piece)
		i += size
	}
	if dropped := len(b) - i; dropped > 0 {
		fmt.Fprintf(&sb, "…[truncated %d bytes]", dropped)
	}
	return sb.String()
}

// HostError implements callbox.error(ptr, len). capText copies at most the
// cap, so a hostile length costs nothing beyond the bounds check.
func (g *GuestState) HostError(mem []byte, ptr, n uint32) {
	b, err := abi.GuestBytes(mem, uint64(ptr), uint64(n), "callbox.error message")
	if err != nil {
		g.violation(err)
		return
	}
	if !g.ChargeBytes(min(uint64(n), g.limits.MaxError)) { // capText reads no more
		return
	}
	g.ErrorMessage = capText(b, g.limits.MaxError)
}

// HostLog implements callbox.log(level, ptr, len).
func (g *GuestState) HostLog(mem []byte, level int32, ptr, n uint32) {
	b, err := abi.GuestBytes(mem, uint64(ptr), uint64(n), "callbox.log message")
	if err != nil {
		g.violation(err)
		return
	}
	if !g.ChargeBytes(min(uint64(n), g.logRoom())) { // emit reads no more
		return
	}
	g.emit(levelOf(level), b, "")
}

func levelOf(level int32) slog.Level {
	switch {
	case level <= abi.LogDebug:
		return slog.LevelDebug
	case level == abi.LogInfo:
		return slog.LevelInfo
	case level == abi.LogWarn:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

// logRoom is how many more log bytes the call may emit.
func (g *GuestState) logRoom() uint64 {
	if g.LogBytes < g.limits.MaxLog {
		return g.limits.MaxLog - g.LogBytes
	}
	return 0
}

// emit logs one line of guest text under the per-call cap.
func (g *GuestState) emit(level slog.Level, text []byte, stream string) {
	room := g.logRoom()
	if room == 0 {
		g.LogDropped += uint64(len(text))
		return
	}
	take := uint64(len(text))
	if take > room {
		g.LogDropped += take - room
	}
	g.LogBytes += min(take, room)
	if !g.logger.Enabled(g.ctx, level) {
		return // counted against the cap, but not formatted for nothing
	}
	// The guest's text is an attribute, never the record's message: a
	// guest must not be able to write a line that reads as the host's.
	src, txt := slog.String(sandbox.GuestSourceKey, sandbox.GuestSource), slog.String(sandbox.GuestTextKey, capText(text, room))
	if stream != "" {
		g.logger.LogAttrs(g.ctx, level, sandbox.GuestLogMessage, src, txt, slog.String("stream", stream))
		return
	}
	g.logger.LogAttrs(g.ctx, level, sandbox.GuestLogMessage, src, txt)
}

// lineBuffer splits a WASI stream into log lines.
type lineBuffer struct{ pending []byte }

const maxPendingLine = 4 << 10

func (lb *lineBuffer) write(g *GuestState, p []byte, stream string, level slog.Level) {
	if g.LogBytes >= g.limits.MaxLog {
		// Capped: every further byte is dropped, so skip the line
		// splitting (a guest may write megabytes per call).
		g.LogDropped += uint64(len(p) + len(lb.pending))
		lb.pending = lb.pending[:0]
		return
	}
	for len(p) > 0 {
		// Look for a newline only where it can end the pending line:
		// searching all of p on every pass made a long write without
		// newlines quadratic (300 MiB cost seconds of host CPU that the
		// call's timeout cannot interrupt).
		room := maxPendingLine - len(lb.pending)
		chunk := p[:min(len(p), room)]
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			lb.pending = append(lb.pending, chunk...)
			p = p[len(chunk):]
			if len(lb.pending) >= maxPendingLine {
				g.emit(level, lb.pending, stream)
				lb.pending = lb.pending[:0]
			}
			continue
		}
		if len(lb.pending) > 0 {
			lb.pending = append(lb.pending, chunk[:i]...)
			g.emit(level, lb.pending, stream)
			lb.pending = lb.pending[:0]
		} else {
			g.emit(level, chunk[:i], stream)
		}
		p = p[i+1:]
	}
}

func (lb *lineBuffer) flush(g *GuestState, stream string) {
	if len(lb.pending) > 0 {
		level := slog.LevelInfo
		if stream == "stderr" {
			level = slog.LevelWarn
		}
		g.emit(level, lb.pending, stream)
		lb.pending = lb.pending[:0]
	}
}

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/seed4b3e0ccb/callbox/cmd/callbox/internal/termsafe"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/sandbox"
)

// guestLogger prints guest log lines (callbox.log, WASI stdout and stderr)
// and the host's own records to w, at info and above unless verbose.
func guestLogger(w io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(&lineHandler{w: w, level: level, mu: &sync.Mutex{}})
}

// lineHandler writes one line per record, "callbox: LEVEL message
// key=value ...", with the message and every value escaped by
// termsafe.Text: a record's message is often guest text, and a guest must
// not be able to forge a line or send a terminal escape.
type lineHandler struct {
	w      io.Writer
	level  slog.Level
	mu     *sync.Mutex
	attrs  []slog.Attr
	prefix string // group prefix for keys
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == host.LogCallFailed && h.level > slog.LevelDebug {
		return nil // the command reports the failure itself (-v shows the host's line too)
	}
	var b strings.Builder
	// A guest's line shows its text as the message, escaped like every
	// value (the text is an attribute of the record: host.GuestLogText).
	text, guest := host.GuestLogText(r)
	if !guest {
		text = r.Message
	}
	fmt.Fprintf(&b, "callbox: %s %s", r.Level, termsafe.Text(text))
	put := func(a slog.Attr) bool {
		if guest && (a.Key == sandbox.GuestSourceKey || a.Key == sandbox.GuestTextKey) {
			return true
		}
		h.writeAttr(&b, h.prefix, a)
		return true
	}
	for _, a := range h.attrs {
		h.writeAttr(&b, "", a)
	}
	r.Attrs(put)
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *lineHandler) writeAttr(b *strings.Builder, prefix string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		for _, g := range a.Value.Group() {
			h.writeAttr(b, prefix+a.Key+".", g)
		}
		return
	}
	v := termsafe.Text(a.Value.String())
	if v == "" || strings.ContainsAny(v, " =\"") {
		v = `"` + strings.ReplaceAll(v, `"`, `\"`) + `"`
	}
	fmt.Fprintf(b, " %s=%s", termsafe.Text(prefix+a.Key), v)
}

func (h *lineHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append([]slog.Attr{}, h.attrs...)
	for _, a := range attrs {
		a.Key = h.prefix + a.Key
		c.attrs = append(c.attrs, a)
	}
	return &c
}

func (h *lineHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.prefix = h.prefix + name + "."
	return &c
}

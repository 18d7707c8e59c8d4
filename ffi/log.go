//go:build cgo

package main

/*
#define CALLBOX_BUILDING_LIBRARY 1
#include <stdlib.h>
#include "include/callbox.h"
void cbx_call_log(callbox_log_fn fn, void *user, int32_t level, const char *callback, const char *message);
*/
import "C"

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/sandbox"
)

// logTarget is a C log callback (callbox_set_log_callback).
type logTarget struct {
	fn   C.callbox_log_fn
	user unsafe.Pointer
	min  slog.Level
}

// logSink is where every host the library opens logs (guest log lines,
// the library's warnings): the C callback when one is set, else stderr at
// CALLBOX_LOG_LEVEL. It is read at each line, so setting it reaches hosts
// already open. Process-wide, as a C callback is.
var logSink atomic.Pointer[logTarget]

//export cbxgo_set_log_callback
func cbxgo_set_log_callback(fn C.callbox_log_fn, user unsafe.Pointer, minLevel C.int32_t) *C.callbox_error {
	return entry("callbox_set_log_callback", func() error {
		if fn == nil {
			logSink.Store(nil)
			return nil
		}
		logSink.Store(&logTarget{fn: fn, user: user, min: slog.Level(minLevel)})
		return nil
	})
}

// bridgeLogger is the logger of hosts opened through the C API.
func bridgeLogger() *slog.Logger {
	level := slog.LevelWarn
	if v := getenv("CALLBOX_LOG_LEVEL"); v != "" {
		_ = level.UnmarshalText([]byte(v))
	}
	return slog.New(&sinkHandler{stderr: slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})})
}

// sinkHandler sends each record to the C callback when one is set, else
// to stderr: the callback gets the level, the callback's name (the
// "callback" attribute) and the message with the other attributes (but
// the callback's content id) as key=value. A guest's line has its text as
// the message. The host's warning about a failed call goes out as a
// debug line: through the library the caller gets every failure as its error.
type sinkHandler struct {
	stderr slog.Handler
	attrs  []slog.Attr
}

func (h *sinkHandler) Enabled(ctx context.Context, level slog.Level) bool {
	if t := logSink.Load(); t != nil {
		return level >= t.min
	}
	return h.stderr.Enabled(ctx, level)
}

func (h *sinkHandler) Handle(ctx context.Context, r slog.Record) error {
	t := logSink.Load()
	if r.Message == host.LogCallFailed {
		// The caller gets the failure as its error: the host's warning
		// about it is passed on as a debug line.
		r.Level = slog.LevelDebug
		if t != nil && r.Level < t.min || t == nil && !h.stderr.Enabled(ctx, r.Level) {
			return nil
		}
	}
	if t == nil {
		return h.stderr.Handle(ctx, r)
	}
	callback := ""
	var b strings.Builder
	// A guest's line: its text is the message the C callback gets, as
	// before the text became an attribute (callback names its source).
	text, guest := host.GuestLogText(r)
	if guest {
		b.WriteString(text)
	} else {
		b.WriteString(r.Message)
	}
	add := func(a slog.Attr) bool {
		switch a.Key {
		case "callback":
			callback = a.Value.String()
			return true
		case "callback_id":
			return true // the name says which callback; the id would drown the line
		case sandbox.GuestSourceKey, sandbox.GuestTextKey:
			if guest {
				return true
			}
		}
		b.WriteString(" " + a.Key + "=" + a.Value.String())
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	cb, msg := C.CString(callback), C.CString(b.String())
	defer C.free(unsafe.Pointer(cb))
	defer C.free(unsafe.Pointer(msg))
	C.cbx_call_log(t.fn, t.user, C.int32_t(r.Level), cb, msg)
	return nil
}

func (h *sinkHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &sinkHandler{stderr: h.stderr.WithAttrs(attrs), attrs: append(append([]slog.Attr(nil), h.attrs...), attrs...)}
}

func (h *sinkHandler) WithGroup(name string) slog.Handler {
	return &sinkHandler{stderr: h.stderr.WithGroup(name), attrs: h.attrs}
}

package host

import (
	"log/slog"

	"github.com/seed4b3e0ccb/callbox/sandbox"
)

// GuestLogText returns the guest's text when r is a guest's log line
// (callbox.log, or a WASI guest's stdout or stderr): such a record's
// message is always "guest log", with attributes source="guest" and
// text=<the guest's text> (and stream=stdout|stderr for WASI), beside the
// callback's name and id. A guest never sets a record's message, so it
// cannot write a line that reads as the host's; a handler that wants the
// guest's words as the message (a terminal, a foreign logger) uses this.
func GuestLogText(r slog.Record) (string, bool) {
	if r.Message != sandbox.GuestLogMessage {
		return "", false
	}
	text, guest := "", false
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case sandbox.GuestSourceKey:
			guest = a.Value.String() == sandbox.GuestSource
		case sandbox.GuestTextKey:
			text = a.Value.String()
		}
		return true
	})
	return text, guest
}

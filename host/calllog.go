package host

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// logEvery is the most often a callback logs the same kind of event (a
// failed call, a long wait for an instance); the lines in between are
// counted, and the next line says how many were suppressed.
const logEvery = time.Second

// rateLimit lets one event through per logEvery and counts the rest.
type rateLimit struct {
	next       atomic.Int64 // unix nanoseconds before which events are suppressed
	suppressed atomic.Uint64
}

// allow reports whether an event now may be logged, and how many were
// suppressed since the last one that was.
func (r *rateLimit) allow(now time.Time) (uint64, bool) {
	n, t := r.next.Load(), now.UnixNano()
	if t < n || !r.next.CompareAndSwap(n, t+int64(logEvery)) {
		r.suppressed.Add(1)
		return 0, false
	}
	return r.suppressed.Swap(0), true
}

// The messages of the host's own log records about calls.
const (
	// LogCallFailed is the message of a failed call's warning (attributes
	// kind, path, error, suppressed).
	LogCallFailed = "callbox: call failed"
	// LogLongWait is the message of a long wait's warning (attributes
	// wait, max_instances, max_wait, suppressed).
	LogLongWait = "callbox: call waited long for an instance"
)

// callLogs is one callback's log limiters.
type callLogs struct {
	failures, waits rateLimit
}

// logCall logs a failed call at warn, and a call that waited longer than
// the callback's timeout for an instance at warn: each at most once per
// logEvery per callback, with structured attributes (the callback's name
// and id come from its logger). Successful calls log nothing and read no
// clock.
func (c *Callback) logCall(ctx context.Context, path callPath, st *Stats, err *CallbackError) {
	slow := st.Wait > 0 && c.spec.Limits.Timeout > 0 && st.Wait > c.spec.Limits.Timeout
	if err == nil && !slow {
		return
	}
	if !c.logger.Enabled(ctx, slog.LevelWarn) {
		return
	}
	now := time.Now()
	if err != nil {
		if n, ok := c.logs.failures.allow(now); ok {
			c.logger.LogAttrs(ctx, slog.LevelWarn, LogCallFailed,
				slog.String("kind", err.kind.Ident()), slog.String("path", pathNames[path]),
				slog.String("error", err.Error()), slog.Uint64("suppressed", n))
		}
	}
	if slow {
		if n, ok := c.logs.waits.allow(now); ok {
			c.logger.LogAttrs(ctx, slog.LevelWarn, LogLongWait,
				slog.Duration("wait", st.Wait), slog.Int("max_instances", c.spec.MaxInstances),
				slog.Duration("max_wait", c.spec.Limits.MaxWait), slog.Uint64("suppressed", n))
		}
	}
}

//go:build linux

package procwall

import (
	"sync/atomic"
	"time"
)

// The kill grace: how long past a call's deadline (or its caller's
// cancellation) the host waits for the worker's reply before it kills the
// worker. The worker stops a guest at its deadline by itself, so a reply
// comes within the time the worker's threads take to get a core and
// answer: on the 2-core development machine with 16 processes spinning on
// it and 4 callers, the reply of a timed-out call came up to 72 ms after
// the deadline (p99 59 ms), against 32 ms with 8 spinners and 1 caller.
// The fixed 100 ms grace this replaces killed workers, and every call on
// them, on loaded machines. The grace is now ten times the latest
// lateness the engine has seen (a running maximum that decays by 1/64 at
// each observation), and never less than minKillGrace (1 s: fourteen
// times the worst measured) nor more than maxKillGrace (30 s: a guest
// stuck where neither epoch nor fuel reaches holds its worker that long).
const (
	minKillGrace = time.Second
	maxKillGrace = 30 * time.Second
)

// lateness tracks how late timed-out calls reply.
type lateness struct{ ns atomic.Int64 }

// observe records that a call that reached its deadline replied late
// after it.
func (l *lateness) observe(late time.Duration) {
	for {
		old := l.ns.Load()
		next := max(int64(late), old-old/64)
		if next == old || l.ns.CompareAndSwap(old, next) {
			return
		}
	}
}

// grace is the kill grace now.
func (l *lateness) grace() time.Duration {
	return min(max(10*time.Duration(l.ns.Load()), minKillGrace), maxKillGrace)
}

package host

import "time"

// monoClock reads the time for a call's deadline and stats with one read
// of the monotonic clock. time.Now reads the wall clock and the monotonic
// clock (two vDSO calls, each 25-70 ns on the development VM), and a call
// read it twice, besides the two time.Since at the guest's return and the
// call's end: about 15% of a tiny call's CPU in a profile. A call never
// needs the wall clock: its deadline is compared with the monotonic
// reading (time.Time comparisons and Sub use it when both sides carry
// one), and Stats are durations.
type monoClock struct {
	epoch time.Time // a time.Now reading, which carries a monotonic reading
}

func newMonoClock() monoClock { return monoClock{epoch: time.Now()} }

// now is the current time as a time.Time with a monotonic reading, from
// one monotonic clock read (time.Since of the epoch). Its wall-clock part
// is the epoch's plus the monotonic time since, which differs from
// time.Now only by wall-clock steps since the host opened; nothing that
// uses it reads the wall clock.
func (k monoClock) now() time.Time { return k.epoch.Add(time.Since(k.epoch)) }

// sinceUnlessUntimed is the time since began, or zero on a host opened
// WithoutCallTiming (whose Stats leave Wall unmeasured).
func (c *Callback) sinceUnlessUntimed(began time.Time) time.Duration {
	if c.h.untimed {
		return 0
	}
	return time.Since(began)
}

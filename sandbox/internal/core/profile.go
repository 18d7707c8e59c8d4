package core

import (
	"encoding/binary"
	"time"

	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/meter"
)

// ProfileRecorder is one instance's side of the guest profiler
// (sandbox.GuestProfile): it follows the guest's call path from the
// meter's entry and exit reports (meter.Options.Profile), charges the fuel
// and time between two reports to the path then on top, and adds what a
// call did to the shared profile when the call ends. Paths are kept as a
// tree of nodes, so a report costs a map lookup, not a path's hashing.
type ProfileRecorder struct {
	sink   *sandbox.GuestProfile
	nodes  []profileNode // nodes[0] is the root: no function
	child  map[uint64]int32
	cur    int32
	excess int // entries not followed: past MaxProfileDepth or MaxProfilePaths
	fuel   int64
	at     time.Time
	dirty  []int32 // nodes charged since the last flush
}

type profileNode struct {
	parent int32
	depth  int32
	key    string   // the path's function indices, 4 bytes each
	stack  []uint32 // the path, outermost first
	work   sandbox.ProfileWork
	dirty  bool
}

// NewProfileRecorder records into sink.
func NewProfileRecorder(sink *sandbox.GuestProfile) *ProfileRecorder {
	return &ProfileRecorder{sink: sink, nodes: []profileNode{{parent: -1}}, child: map[uint64]int32{}}
}

// begin starts a guest call: its path is empty and it has used no fuel.
func (r *ProfileRecorder) begin() {
	r.cur, r.excess, r.fuel = 0, 0, 0
	r.at = time.Now()
}

// charge gives the fuel up to used, and the time up to now, to the
// current path.
func (r *ProfileRecorder) charge(used int64, now time.Time) {
	n := &r.nodes[r.cur]
	if used > r.fuel {
		n.work.Fuel += uint64(used - r.fuel)
	}
	n.work.Nanos += int64(now.Sub(r.at))
	r.fuel, r.at = max(used, r.fuel), now
	if !n.dirty {
		n.dirty = true
		r.dirty = append(r.dirty, r.cur)
	}
}

// enter: function fn started, having used fuel up to used.
func (r *ProfileRecorder) enter(fn uint32, used int64) {
	r.charge(used, time.Now())
	if r.excess > 0 || r.nodes[r.cur].depth >= sandbox.MaxProfileDepth {
		r.excess++
		return
	}
	k := uint64(uint32(r.cur))<<32 | uint64(fn)
	next, ok := r.child[k]
	if !ok {
		if len(r.nodes) > sandbox.MaxProfilePaths {
			r.excess++
			return
		}
		p := &r.nodes[r.cur]
		next = int32(len(r.nodes))
		key := binary.LittleEndian.AppendUint32([]byte(p.key), fn)
		stack := append(append(make([]uint32, 0, len(p.stack)+1), p.stack...), fn)
		r.nodes = append(r.nodes, profileNode{parent: r.cur, depth: p.depth + 1, key: string(key), stack: stack})
		r.child[k] = next
	}
	r.cur = next
	n := &r.nodes[next]
	n.work.Calls++
	if !n.dirty {
		n.dirty = true
		r.dirty = append(r.dirty, next)
	}
}

// exit: the function on top returned, having used fuel up to used.
func (r *ProfileRecorder) exit(used int64) {
	r.charge(used, time.Now())
	switch {
	case r.excess > 0:
		r.excess--
	case r.cur > 0:
		r.cur = r.nodes[r.cur].parent
	}
}

// end finishes a guest call that used fuel up to used (a floor after a
// trap: FuelMeter.Used), charging the rest to the path where it stopped,
// and adds the call's work to the shared profile.
func (r *ProfileRecorder) end(used int64) {
	r.charge(used, time.Now())
	for _, k := range r.dirty {
		n := &r.nodes[k]
		if k > 0 && n.work != (sandbox.ProfileWork{}) {
			r.sink.Add(n.key, n.stack, n.work)
		}
		n.work, n.dirty = sandbox.ProfileWork{}, false
	}
	r.dirty = r.dirty[:0]
	r.sink.CallEnded()
}

// ProfileEnd ends a profiled guest call (nothing when the instance is not
// profiled): the engines call it once they know the fuel it used.
func (g *GuestState) ProfileEnd(used uint64) {
	if g.Profile != nil {
		g.Profile.end(int64(min(used, 1<<62)))
	}
}

// ProfileEnter is the profiler's entry report: function fn (of the module
// as built) started with the guest's counter at counter.
func (g *GuestState) ProfileEnter(fn uint32, counter int64) {
	if g.Profile != nil {
		g.Profile.enter(fn, g.Fuel.Spent(counter))
	}
}

// ProfileExit is the profiler's exit report: the function on top returned
// with the guest's counter at counter.
func (g *GuestState) ProfileExit(counter int64) {
	if g.Profile != nil {
		g.Profile.exit(g.Fuel.Spent(counter))
	}
}

// ProfileFuncs are the meter's profiler imports (meter.Options.Profile):
// they read the fuel used from the counter value the guest passes.
func ProfileFuncs() []HostFunc {
	return []HostFunc{
		{Module: meter.RefillModule, Name: meter.ProfileEnterName, Params: []sandbox.ValType{sandbox.I32, sandbox.I64},
			Fn: func(g *GuestState, _ []byte, s []uint64) { g.ProfileEnter(uint32(s[0]), int64(s[1])) }},
		{Module: meter.RefillModule, Name: meter.ProfileExitName, Params: []sandbox.ValType{sandbox.I64},
			Fn: func(g *GuestState, _ []byte, s []uint64) { g.ProfileExit(int64(s[0])) }},
	}
}

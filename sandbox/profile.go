package sandbox

import (
	"slices"
	"sync"
	"time"
)

// GuestProfile collects where a profiled module's guest spends its work
// (ModuleConfig.Profile): fuel, wall time and calls, by call path through
// the functions of the module as its author built it.
//
// The meter's rewrite makes every function report its entry and its
// exits to the host, each with the fuel used so far (meter.Options.Profile),
// so the fuel between two reports belongs to the function then on top of
// the path, exactly: fuel is counted per instruction, alike on both
// engines (see docs/SECURITY.md), so a fuel profile is the same on wazero
// and wasmtime and on every machine. Wall time is measured at the same
// reports and includes what a report itself costs (a host call, about
// 0.1-0.3 µs), which makes small, often-called functions look slower than
// they are. Known approximations: an exception that unwinds through
// functions skips their exit reports (the path stays deeper than the
// guest's until the call ends); call paths deeper than MaxProfileDepth or
// past MaxProfilePaths are charged to the deepest path kept; bulk memory
// operations are charged by their fuel (their length), not one unit.
//
// Safe for concurrent use: each instance adds its call's work at the end
// of every call.
type GuestProfile struct {
	mu    sync.Mutex
	paths map[string]*ProfilePath
	calls uint64
	start time.Time
}

// Bounds on what one instance's profile keeps.
const (
	// MaxProfileDepth is the deepest call path kept: deeper calls are
	// charged to the path at this depth.
	MaxProfileDepth = 128
	// MaxProfilePaths is the most distinct call paths one instance keeps.
	MaxProfilePaths = 1 << 14
)

// ProfilePath is the work done on one call path.
type ProfilePath struct {
	// Stack is the path's functions, outermost first, as indices in the
	// module as its author built it.
	Stack []uint32
	ProfileWork
}

// ProfileWork is work charged to the innermost function of a path (its
// self work).
type ProfileWork struct {
	Fuel  uint64 // fuel units (wasm instructions, plus bulk rates)
	Nanos int64  // wall time, in nanoseconds
	Calls uint64 // times the function was entered on this path
}

// Add adds o's work to w.
func (w *ProfileWork) Add(o ProfileWork) {
	w.Fuel += o.Fuel
	w.Nanos += o.Nanos
	w.Calls += o.Calls
}

// NewGuestProfile returns an empty profile.
func NewGuestProfile() *GuestProfile {
	return &GuestProfile{paths: map[string]*ProfilePath{}, start: time.Now()}
}

// Add charges work to a call path; key identifies the path (the engines
// use its functions' indices, 4 bytes each) and stack is its functions,
// outermost first, which the profile keeps without copying: the caller
// must not change it.
func (p *GuestProfile) Add(key string, stack []uint32, w ProfileWork) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.paths[key]
	if !ok {
		e = &ProfilePath{Stack: stack}
		p.paths[key] = e
	}
	e.Add(w)
}

// CallEnded counts one guest call (an export's run) recorded.
func (p *GuestProfile) CallEnded() {
	p.mu.Lock()
	p.calls++
	p.mu.Unlock()
}

// Snapshot returns the paths recorded so far (ordered by path), the
// guest calls they came from and how long the profile has been recording.
func (p *GuestProfile) Snapshot() (paths []ProfilePath, calls uint64, elapsed time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	paths = make([]ProfilePath, 0, len(p.paths))
	for _, e := range p.paths {
		paths = append(paths, ProfilePath{Stack: slices.Clone(e.Stack), ProfileWork: e.ProfileWork})
	}
	slices.SortFunc(paths, func(a, b ProfilePath) int { return slices.Compare(a.Stack, b.Stack) })
	return paths, p.calls, time.Since(p.start)
}

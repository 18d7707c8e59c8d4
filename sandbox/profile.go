package sandbox

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/google/pprof/profile"

	"github.com/seed4b3e0ccb/callbox/sandbox/internal/symbols"
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

func (w *ProfileWork) add(o ProfileWork) {
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
	e.add(w)
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

// ProfileFunc is one function's work, summed over every path.
type ProfileFunc struct {
	Frame             // its name, index and source place (Offset: its body's first byte)
	Self  ProfileWork // work in the function itself
	Total ProfileWork // work in it and everything it called (recursion counted once)
}

// ProfileFuncs sums paths by function, the most fuel first (self, then
// total). wasm is the module as its author built it, which names the
// functions.
func ProfileFuncs(wasm []byte, paths []ProfilePath) []ProfileFunc {
	t := symbols.Read(wasm)
	byIdx := map[uint32]*ProfileFunc{}
	get := func(idx uint32) *ProfileFunc {
		f, ok := byIdx[idx]
		if !ok {
			f = &ProfileFunc{Frame: funcFrame(t, idx)}
			byIdx[idx] = f
		}
		return f
	}
	for _, p := range paths {
		if len(p.Stack) == 0 {
			continue
		}
		get(p.Stack[len(p.Stack)-1]).Self.add(p.ProfileWork)
		seen := map[uint32]bool{}
		for _, idx := range p.Stack {
			if !seen[idx] {
				seen[idx] = true
				get(idx).Total.add(p.ProfileWork)
			}
		}
	}
	out := make([]ProfileFunc, 0, len(byIdx))
	for _, f := range byIdx {
		out = append(out, *f)
	}
	slices.SortFunc(out, func(a, b ProfileFunc) int {
		return cmp.Or(cmp.Compare(b.Self.Fuel, a.Self.Fuel), cmp.Compare(b.Total.Fuel, a.Total.Fuel), cmp.Compare(a.FuncIndex, b.FuncIndex))
	})
	return out
}

// funcFrame names function idx of the module t describes: its name
// (the name section's, else DWARF's, else its export's), the byte offset of its body and the
// first source place inside it, where the module has DWARF.
func funcFrame(t *symbols.Table, idx uint32) Frame {
	f := Frame{FuncIndex: idx, Func: t.Name(idx)}
	if start, ok := t.Body(idx); ok {
		f.Offset = start + t.CodeStart()
		if f.Func == "" {
			f.Func = t.NameAt(start)
		}
		if src, ok := t.BodySource(idx); ok {
			f.File, f.Line, f.Column = src.File, src.Line, src.Column
		}
	}
	if f.Func == "" {
		f.Func = t.ExportName(idx)
	}
	if f.Func == "" {
		f.Func = fmt.Sprintf("func[%d]", idx)
	}
	return f
}

// WritePprof writes paths as a gzipped pprof profile (go tool pprof reads
// it): one sample per call path, with the sample types fuel (the default),
// wall time and calls, and a location per function of the module (wasm,
// as its author built it) carrying its name and, where the module has
// DWARF, its file and first line. elapsed is the time the profile covers.
func WritePprof(w io.Writer, wasm []byte, paths []ProfilePath, elapsed time.Duration) error {
	t := symbols.Read(wasm)
	p := &profile.Profile{
		SampleType: []*profile.ValueType{
			{Type: "fuel", Unit: "count"},
			{Type: "wall", Unit: "nanoseconds"},
			{Type: "calls", Unit: "count"},
		},
		DefaultSampleType: "fuel",
		PeriodType:        &profile.ValueType{Type: "fuel", Unit: "count"},
		Period:            1,
		TimeNanos:         time.Now().Add(-elapsed).UnixNano(),
		DurationNanos:     elapsed.Nanoseconds(),
		Mapping:           []*profile.Mapping{{ID: 1, File: "guest.wasm", HasFunctions: true, HasFilenames: true, HasLineNumbers: true}},
	}
	locs := map[uint32]*profile.Location{}
	loc := func(idx uint32) *profile.Location {
		if l, ok := locs[idx]; ok {
			return l
		}
		fr := funcFrame(t, idx)
		fn := &profile.Function{ID: uint64(len(p.Function) + 1), Name: fr.Func, SystemName: fr.Func, Filename: fr.File, StartLine: int64(fr.Line)}
		p.Function = append(p.Function, fn)
		l := &profile.Location{ID: uint64(len(p.Location) + 1), Mapping: p.Mapping[0], Address: fr.Offset,
			Line: []profile.Line{{Function: fn, Line: int64(fr.Line), Column: int64(fr.Column)}}}
		p.Location = append(p.Location, l)
		locs[idx] = l
		return l
	}
	for _, path := range paths {
		if len(path.Stack) == 0 {
			continue
		}
		s := &profile.Sample{Value: []int64{int64(min(path.Fuel, 1<<62)), path.Nanos, int64(min(path.Calls, 1<<62))}}
		for i := len(path.Stack) - 1; i >= 0; i-- { // pprof lists a sample's locations leaf first
			s.Location = append(s.Location, loc(path.Stack[i]))
		}
		p.Sample = append(p.Sample, s)
	}
	if err := p.CheckValid(); err != nil {
		return fmt.Errorf("guest profile: %w", err)
	}
	return p.Write(w)
}

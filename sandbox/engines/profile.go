package engines

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/google/pprof/profile"

	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/symbols"
)

// The guest profiler's output (sandbox.GuestProfile collects it): its
// paths named from the module as its author built it.

// ProfileFunc is one function's work, summed over every path.
type ProfileFunc struct {
	sandbox.Frame                     // its name, index and source place (Offset: its body's first byte)
	Self          sandbox.ProfileWork // work in the function itself
	Total         sandbox.ProfileWork // work in it and everything it called (recursion counted once)
}

// ProfileFuncs sums paths by function, the most fuel first (self, then
// total). wasm is the module as its author built it, which names the
// functions.
func ProfileFuncs(wasm []byte, paths []sandbox.ProfilePath) []ProfileFunc {
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
		get(p.Stack[len(p.Stack)-1]).Self.Add(p.ProfileWork)
		seen := map[uint32]bool{}
		for _, idx := range p.Stack {
			if !seen[idx] {
				seen[idx] = true
				get(idx).Total.Add(p.ProfileWork)
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

// funcsandbox.Frame names function idx of the module t describes: its name
// (the name section's, else DWARF's, else its export's), the byte offset of its body and the
// first source place inside it, where the module has DWARF.
func funcFrame(t *symbols.Table, idx uint32) sandbox.Frame {
	f := sandbox.Frame{FuncIndex: idx, Func: t.Name(idx)}
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
	return f
}

// WritePprof writes paths as a gzipped pprof profile (go tool pprof reads
// it): one sample per call path, with the sample types fuel (the default),
// wall time and calls, and a location per function of the module (wasm,
// as its author built it) carrying its name and, where the module has
// DWARF, its file and first line. elapsed is the time the profile covers.
func WritePprof(w io.Writer, wasm []byte, paths []sandbox.ProfilePath, elapsed time.Duration) error {
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
		fn := &profile.Function{ID: uint64(len(p.Function) + 1), Name: fr.Name(), SystemName: fr.Name(), Filename: fr.File, StartLine: int64(fr.Line)}
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

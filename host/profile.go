package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

// The guest profiler: where a callback's own functions spend their work.
// The meter's rewrite makes every guest function report its entry and
// exits with the fuel used so far (sandbox.GuestProfile), so a profile
// charges fuel (instructions, counted alike on both engines) and wall time
// to call paths through the functions of the module as its author built
// it, named from its name section and DWARF. Profiled modules are compiled
// separately from the host's own and run in process only.

// WithGuestProfiler compiles every callback the host loads with the guest
// profiler, so that GuestProfile reports where each one's calls spent
// their work since it was loaded. It costs every call: a guest function
// call costs a host call more (about 0.1-0.3 µs; make bench's
// BenchmarkGuestProfiler measures it), and process isolation is refused
// (a load fails: the profiler runs callbacks in process). For one-off
// profiles of a loaded callback, Profile needs no option.
func WithGuestProfiler() Option { return func(h *Host) { h.profiled = true } }

// ProfileWork is work charged to a function.
type ProfileWork struct {
	Fuel  uint64 `json:"fuel"`  // fuel units: wasm instructions, plus bulk rates
	Nanos int64  `json:"nanos"` // wall time, a host call's cost per report included
	Calls uint64 `json:"calls"` // times the function was entered
}

// ProfileFunction is one guest function's work in a profile: Frame names
// it (Offset is its body's first byte in the module, File and Line its
// first source line where the module has DWARF).
type ProfileFunction struct {
	Frame Frame       `json:"frame"`
	Self  ProfileWork `json:"self"`  // in the function itself
	Total ProfileWork `json:"total"` // in it and what it called
}

// GuestProfile is where a callback's guest spent its work over some
// calls (Profile, or GuestProfile with WithGuestProfiler).
type GuestProfile struct {
	Callback string        `json:"callback"`
	Engine   string        `json:"engine"`
	Calls    uint64        `json:"calls"`   // host calls profiled (Profile); guest entries, service exports included (GuestProfile)
	Failed   uint64        `json:"failed"`  // of those, failed ones (Profile)
	Elapsed  time.Duration `json:"elapsed"` // how long the profile recorded
	// Functions, the most self fuel first.
	Functions []ProfileFunction `json:"functions"`

	wasm  []byte
	paths []sandbox.ProfilePath
}

// WritePprof writes the profile in pprof's format (gzipped protocol
// buffers), which `go tool pprof` reads: one sample per call path with
// the sample types fuel (the default), wall (nanoseconds) and calls.
func (p *GuestProfile) WritePprof(w io.Writer) error {
	return engines.WritePprof(w, p.wasm, p.paths, p.Elapsed)
}

func newGuestProfile(c *Callback, prof *sandbox.GuestProfile) *GuestProfile {
	paths, guestCalls, elapsed := prof.Snapshot()
	out := &GuestProfile{Callback: c.name, Engine: c.engine.Name(), Calls: guestCalls, Elapsed: elapsed, wasm: c.wasm, paths: paths}
	for _, f := range engines.ProfileFuncs(c.wasm, paths) {
		out.Functions = append(out.Functions, ProfileFunction{Frame: Frame(f.Frame), Self: ProfileWork(f.Self), Total: ProfileWork(f.Total)})
	}
	return out
}

// GuestProfile reports where a callback's calls spent their work since it
// was loaded, on a host made WithGuestProfiler.
func (h *Host) GuestProfile(name string) (*GuestProfile, error) {
	c, err := h.lookup(name)
	if err != nil {
		return nil, err
	}
	defer c.leave()
	if c.profile == nil {
		return nil, &kindedError{FailedPrecondition, fmt.Sprintf("callback %q: the host was not made WithGuestProfiler (Host.Profile profiles a loaded callback without it)", c.name)}
	}
	return newGuestProfile(c, c.profile), nil
}

// Profile calls a loaded callback calls times with inputs and reports
// where its guest spent their work. The calls run on a separate copy of
// the callback, compiled with the guest profiler and loaded under the
// callback's own config, in process: a callback under isolation: process
// is profiled under isolation: pooled, with the same limits. A failed call
// is counted (Failed) and profiled up to where it stopped; Profile fails
// only when the copy cannot be loaded, or when every call failed (the
// error is the last call's).
func (h *Host) Profile(ctx context.Context, name string, calls int, inputs ...Tensor) (*GuestProfile, error) {
	if calls < 1 {
		return nil, &kindedError{InvalidArgument, fmt.Sprintf("profile of callback %q: calls is %d, want at least 1", name, calls)}
	}
	c, err := h.lookup(name)
	if err != nil {
		return nil, err
	}
	spec, wasm := c.spec, c.wasm
	c.leave()
	if spec.InWorker() {
		spec.Isolation = config.IsolationPooled
	}
	spec.RecordFailures = ""
	prof := sandbox.NewGuestProfile()
	pc, err := h.load(ctx, spec, wasm, prof)
	if err != nil {
		return nil, newLoadError(spec.Name, err)
	}
	defer func() { _ = pc.close(context.WithoutCancel(ctx)) }()
	var failed uint64
	var last error
	began := time.Now()
	for range calls {
		r := request{inputs: inputs}
		if _, cerr := pc.invoke(ctx, &r); cerr != nil {
			failed++
			last = cerr
			if ctx.Err() != nil {
				break
			}
		}
	}
	if failed == uint64(calls) {
		return nil, fmt.Errorf("profile of callback %q: every call failed: %w", name, last)
	}
	if ctx.Err() != nil {
		return nil, errors.Join(ctx.Err(), last)
	}
	out := newGuestProfile(pc, prof)
	out.Calls, out.Failed, out.Elapsed = uint64(calls), failed, time.Since(began)
	return out, nil
}

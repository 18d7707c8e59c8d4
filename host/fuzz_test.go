package host_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

// FuzzGuest runs testdata/hostile/scripted.wat, a guest whose behaviour —
// which frame bytes and guards it overwrites, which pointers it passes to
// callbox.error and callbox.log, whether it traps, grows, spins or
// recurses, which status it returns — is the fuzz input, on every engine.
// For every input the host must return either the outputs or a typed
// *host.CallbackError (never a HostPanic), leave the caller's buffers
// untouched on failure, return within the timeout plus hostileSlack, keep
// serving, and give the same result on wazero and wasmtime: the same kind,
// status and guest message, and the same output bytes. (Results that
// differ only because one engine reached the 100 ms timeout are compared
// again with a 5 s one: timing is the machine's, not the engine's.)
func FuzzGuest(f *testing.F) {
	for _, seed := range [][]byte{
		{1, 0, 0},             // copy, OK
		{1, 0, 3},             // copy, INVALID_ARGUMENT
		{1, 0, 77},            // copy, status 77
		{1, 3, 0, 0, 0},       // overrun into the guard
		{1, 3, 70, 0, 0},      // write past the guard
		{1, 2, 16, 0, 9},      // rewrite the descriptor pointer
		{1, 2, 0xf0, 0xff, 1}, // poke before the frame
		{5, 0, 0, 8, 0, 0, 3}, // error from the frame, then INVALID_ARGUMENT
		{4, 0xf8, 0xff, 0xff, 0xff, 64, 0, 0, 0, 0, 3}, // error outside memory
		{6, 2, 0, 0, 32, 0, 1, 0, 0},                   // log from the frame
		{12, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff},       // log of 4 GiB
		{1, 7},                                         // trap after writing
		{8, 255, 0, 8},                                 // grow to the limit, RESOURCE_EXHAUSTED
		{9, 200, 9, 200, 1, 0, 0},                      // spin within budget
		{10, 0x41, 0, 0},                               // fill the output
		{11, 50, 1, 0, 0},                              // recurse
		{13, 0xa5},                                     // spin forever
		{14, 0},                                        // divide by zero
		{15, 0xa5},                                     // recurse forever
		{5, 0, 0, 0xff, 0xff, 7},                       // message, then abort
	} {
		f.Add(seed, uint8(4))
	}
	src, err := os.ReadFile(filepath.Join("testdata", "hostile", "scripted.wat"))
	if err != nil {
		f.Fatal(err)
	}
	wasm, err := wat.Compile(string(src))
	if err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	h, err := host.New(ctx, nil, host.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = h.Close(ctx) })
	// Each engine's guest is loaded twice: with a short timeout, and with a
	// long one for re-running an input whose results differ only because
	// one engine hit the short timeout (a script of ten thousand imports
	// can come close to it, and a loaded machine pushes it over).
	const timeout, slowTimeout = 100 * time.Millisecond, 5 * time.Second
	// The "fuzzfuel_" callbacks add a fuel budget: fuel is counted the
	// same way on both engines, so even which inputs exhaust it must
	// agree.
	const fuzzFuel = 300_000
	engines := engineNames()
	for _, e := range engines {
		for prefix, d := range map[string]time.Duration{"fuzz_": timeout, "fuzzslow_": slowTimeout, "fuzzfuel_": slowTimeout} {
			cb := config.DefaultCallback()
			cb.Name, cb.Export, cb.Engine = prefix+e, "run", e
			cb.Signature = "(script: u8[k], x: f32[n]) -> f32[n]"
			cb.Isolation = config.IsolationFresh // every input starts from a fresh instance
			cb.MaxInstances = 1
			cb.Limits.Timeout = d
			cb.Limits.MaxMemory = 1 << 20
			if prefix == "fuzzfuel_" {
				cb.Limits.Fuel = fuzzFuel
			}
			if err := h.LoadModule(ctx, cb, wasm); err != nil {
				f.Fatal(err)
			}
		}
	}

	f.Fuzz(func(t *testing.T, script []byte, n uint8) {
		if len(script) > 1<<12 {
			script = script[:1<<12]
		}
		x := make([]float32, n%17)
		for i := range x {
			x[i] = float32(i) + 0.5
		}
		run := func(prefix string, timeout time.Duration) []outcome {
			var results []outcome
			for _, e := range engines {
				results = append(results, runScript(t, h, prefix+e, timeout, script, x))
			}
			return results
		}
		results := run("fuzz_", timeout)
		timing := false
		for i := 1; i < len(results); i++ {
			if results[0].kind != results[i].kind && (results[0].kind == host.Timeout || results[i].kind == host.Timeout) {
				timing = true
			}
		}
		if timing {
			results = run("fuzzslow_", slowTimeout)
		}
		compare := func(what string, results []outcome) {
			for i := 1; i < len(results); i++ {
				a, b := results[0], results[i]
				if a.kind != b.kind || a.status != b.status || a.message != b.message || a.hostMessage != b.hostMessage || !bytes.Equal(a.out, b.out) {
					t.Fatalf("engines differ%s: %s: %s status %v %.200q %q; %s: %s status %v %.200q %q (outputs equal: %v)",
						what, engines[0], a.kind.Ident(), a.status, a.message, a.hostMessage, engines[i], b.kind.Ident(), b.status, b.message, b.hostMessage, bytes.Equal(a.out, b.out))
				}
			}
		}
		compare("", results)
		fueled := run("fuzzfuel_", slowTimeout)
		if !slices.ContainsFunc(fueled, func(o outcome) bool { return o.kind == host.Timeout }) {
			compare(fmt.Sprintf(" with fuel %d", fuzzFuel), fueled)
		}
	})
}

type outcome struct {
	kind        host.Kind
	status      abi.Status
	message     string // the guest's
	hostMessage string // the host's: one per kind, whatever the engine
	out         []byte
}

// runScript runs one script on one callback and checks the invariants
// that hold whatever the script does.
func runScript(t *testing.T, h *host.Host, name string, timeout time.Duration, script []byte, x []float32) outcome {
	ctx := context.Background()
	e := name
	in := []host.Tensor{abi.From(slices.Clone(script)), abi.From(slices.Clone(x))}
	out := abi.From(make([]float32, len(x)))
	for i := range out.Data {
		out.Data[i] = 0x7e
	}
	before := bytes.Clone(out.Data)
	start := time.Now()
	_, err := h.Do(ctx, &host.Request{Callback: name, Inputs: in, Outputs: []host.Tensor{out}})
	if d := time.Since(start); d > timeout+hostileSlack {
		t.Fatalf("%s: call took %v", e, d)
	}
	if !bytes.Equal(in[0].Data, script) || !slices.Equal(abi.MustView[float32](in[1]), x) {
		t.Fatalf("%s: the caller's inputs changed", e)
	}
	o := outcome{out: out.Data}
	if err != nil {
		var ce *host.CallbackError
		if !errors.As(err, &ce) {
			t.Fatalf("%s: untyped error %T: %v", e, err, err)
		}
		if ce.Kind() == host.HostPanic || ce.Kind() == host.OtherTrap || ce.Kind() == host.InvalidArgument {
			t.Fatalf("%s: %v: %v", e, ce.Kind().Ident(), err)
		}
		if ce.Callback != name {
			t.Fatalf("%s: error names %q", e, ce.Callback)
		}
		if !bytes.Equal(out.Data, before) {
			t.Fatalf("%s: a failed call (%v) wrote the output buffer", e, err)
		}
		o.kind, o.status, o.message, o.hostMessage = ce.Kind(), ce.Status, ce.GuestMessage, ce.Message
	}
	// The host keeps serving.
	benign := []host.Tensor{abi.From([]byte{1, 0, 0}), abi.From(slices.Clone(x))}
	outs, err := h.Invoke(ctx, name, benign...)
	if err != nil || !slices.Equal(abi.MustView[float32](outs[0]), x) {
		t.Fatalf("%s: a normal call after the script failed: %v", e, err)
	}
	if st, _ := h.PoolStats(name); st.Live != 0 {
		t.Fatalf("%s: %d instances left alive with fresh isolation", e, st.Live)
	}
	return o
}

// FuzzInspect feeds sandbox.Inspect arbitrary bytes, seeded with every hostile
// module: it must never panic (a module the load check refuses is never
// compiled), and it must agree with Load given the same default limits on
// wazero (Inspect's engine): a module it finds no problem with loads (or
// times out: timing is the machine's), one it finds a problem with is
// refused.
func FuzzInspect(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "hostile", "*.wat"))
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		wasm, err := wat.Compile(string(src))
		if err != nil {
			f.Fatal(p, err)
		}
		f.Add(wasm)
	}
	f.Add([]byte("\x00asm\x01\x00\x00\x00"))
	// A minimum memory above the default max_memory: crashed Inspect.
	f.Add(wat.Must(`(module (memory (export "memory") 1025)
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 1024))
  (func (export "run") (param i32) (result i32) (i32.const 0)))`))
	f.Fuzz(func(t *testing.T, wasm []byte) {
		ctx := context.Background()
		r, err := engines.Inspect(ctx, wasm)
		if err != nil {
			return // not a module
		}
		if len(r.Callbacks) == 0 {
			return
		}
		h, err := host.New(ctx, nil, host.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close(ctx)
		cb := config.DefaultCallback()
		cb.Name, cb.Export = "inspected", r.Callbacks[0].Export
		if r.Callbacks[0].Signature == nil {
			cb.Signature = "(x: f32[n]) -> f32[n]"
		}
		for _, imp := range r.Imports {
			if imp.Module == "wasi_snapshot_preview1" {
				cb.WASI = config.WASIMinimal
			}
		}
		err = h.LoadModule(ctx, cb, wasm)
		switch {
		case len(r.Problems) > 0 && err == nil && !strings.Contains(strings.Join(r.Problems, "\n"), "timeout"):
			t.Fatalf("Inspect found problems %q, but Load accepts the module", r.Problems)
		case len(r.Problems) == 0 && err != nil && !errors.Is(err, host.Timeout):
			t.Fatalf("Inspect found no problem, but Load refuses the module: %v", err)
		}
	})
}

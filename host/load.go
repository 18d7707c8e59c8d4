package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

// Callback is one loaded callback: its module, its resolved signature and
// its instance pool. Resolve one with Host.Lookup (by name or content id)
// once and use it for any number of calls; it stays valid until the host
// closes. Its methods are safe for concurrent use.
type Callback struct {
	h      *Host
	name   string
	id     string
	spec   config.Callback
	sig    *abi.Signature
	sha    string
	engine sandbox.Engine
	mod    sandbox.Module
	pool   *pool
	hasFre bool
	skewed bool
	logger *slog.Logger
	tel    *callbackTelemetry
	logs   callLogs
	// inflight counts the calls admitted on this callback (enter, lookup),
	// so that a Reload that replaced it closes it after the last one.
	inflight sync.WaitGroup
	// retired: a Reload replaced or removed the callback (guarded by the
	// host's mu); it admits no call.
	retired bool
	// closed: its pool and module are closed (tests read it).
	closed atomic.Bool
	// recorder writes replay bundles of failed calls (record_failures).
	recorder *recorder
	// wasm is the module as loaded (Profile compiles it again).
	wasm []byte
	// profile collects the guest profiler's reports (WithGuestProfiler,
	// or the copy Profile loads); nil otherwise.
	profile *sandbox.GuestProfile
	// lastPlan caches the plan of the most recent input types.
	lastPlan atomic.Pointer[callPlan]
	// scratch holds batched calls' output scratch buffers (batch.go).
	scratch sync.Pool
}

func (c *Callback) info() Info {
	return Info{Name: c.name, ID: c.id, Export: c.spec.Export, Signature: c.sig, Engine: c.spec.Engine,
		Module: c.spec.Module, ModuleSHA: c.sha, Isolation: c.spec.Isolation, MaxInstances: c.spec.MaxInstances, Limits: c.spec.Limits,
		WASI: c.spec.WASI == config.WASIMinimal, Batching: c.spec.BatchingRule(),
		CallerStack: engines.CallerStack(c.spec.Engine, c.spec.Limits)}
}

func (c *Callback) close(ctx context.Context) error {
	c.closed.Store(true)
	c.pool.close(ctx)
	return c.mod.Close(ctx)
}

// Load reads the callback's module file and loads it. The entry is checked
// with config's rules first; defaults are not applied (use configfile.Load or
// start from config.DefaultCallback()).
func (h *Host) Load(ctx context.Context, cb config.Callback) error {
	wasm, err := os.ReadFile(cb.Module)
	if err != nil {
		return fmt.Errorf("callback %q: %w", cb.Name, err)
	}
	return h.LoadModule(ctx, cb, wasm)
}

// LoadModule loads a callback from module bytes already in memory (an
// embedded module, say); cb.Module is used only in messages. The host
// keeps wasm while the callback is loaded (failures' frames are named
// from it; Profile compiles it again): do not change it.
func (h *Host) LoadModule(ctx context.Context, cb config.Callback, wasm []byte) error {
	if cb.Export == "" {
		cb.Export = cb.Name
	}
	if cb.Module == "" {
		cb.Module = "<memory>"
	}
	if err := (&config.Config{Callbacks: []config.Callback{cb}}).Validate(); err != nil {
		return err
	}
	c, err := h.load(ctx, cb, wasm, nil)
	if err != nil {
		return newLoadError(cb.Name, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		_ = c.close(ctx)
		return ErrClosed
	}
	if old, dup := h.callbacks[cb.Name]; dup {
		_ = c.close(ctx)
		return fmt.Errorf("callback %q is already loaded (module %s)", cb.Name, old.spec.Module)
	}
	h.callbacks[cb.Name] = c
	h.indexByIDLocked(c)
	return nil
}

// load compiles and probes a callback. prof, when set, profiles it (else
// the host's WithGuestProfiler decides).
func (h *Host) load(ctx context.Context, cb config.Callback, wasm []byte, prof *sandbox.GuestProfile) (*Callback, error) {
	sum := sha256.Sum256(wasm)
	sha := moduleSHA(wasm)
	if cb.SHA256 != "" && !strings.EqualFold(cb.SHA256, sha) {
		return nil, withKind(InvalidArgument, fmt.Errorf("module %s has sha256 %s, but the config expects %s; refusing to load it", cb.Module, sha, cb.SHA256))
	}
	h.mu.Lock()
	eng, err := h.engine(ctx, cb.Engine, cb.InWorker())
	h.mu.Unlock()
	if err != nil {
		return nil, withKind(InvalidArgument, err)
	}
	// The module as its author built it, with the engines' own
	// validators, before the load check reads it and before any rewrite
	// (the table limit, the meter) could turn an invalid module into a
	// valid one; sandbox.Compile validates again (remembered: no second
	// cost).
	if err := eng.Validate(ctx, wasm, sum); err != nil {
		return nil, withKind(InvalidArgument, fmt.Errorf("module %s: %w", cb.Module, err))
	}
	info, err := sandbox.CheckModule(wasm, cb)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", cb.Module, err)
	}
	wasi := cb.WASI == config.WASIMinimal
	// The signature table from the custom section, if any.
	table, err := info.Signatures()
	if err != nil {
		return nil, withKind(ABIViolation, fmt.Errorf("module %s: %w", cb.Module, err))
	}
	embedded := table[cb.Export]

	for _, f := range []struct {
		set  bool
		feat sandbox.Feature
		key  string
	}{{cb.Limits.Fuel != 0, sandbox.FeatureFuel, "fuel"}, {cb.Limits.MaxStack != 0, sandbox.FeatureMaxStack, "max_stack"}} {
		if f.set && !eng.Supports(f.feat) {
			return nil, withKind(InvalidArgument, fmt.Errorf("callbacks.%s.%s: %s is not supported by the %s engine (use engine: wasmtime, or remove it)", cb.Name, f.key, f.key, eng.Name()))
		}
	}
	c := &Callback{h: h, name: cb.Name, spec: cb, sha: sha, engine: eng, skewed: h.skewed, wasm: wasm, profile: prof}
	if prof == nil && h.profiled {
		c.profile = sandbox.NewGuestProfile()
	}
	if cb.RecordFailures != "" {
		c.recorder = &recorder{dir: filepath.Join(cb.RecordFailures, cb.Name), wasm: slices.Clone(wasm)}
	}
	c.hasFre = info.HasExport(abi.ExportFree)
	// The id is known only after the signature is; guest log lines carry
	// it through the logger's lazily bound attribute.
	logger := slog.New(&idHandler{Handler: h.logger.With("callback", cb.Name).Handler(), id: &c.id})
	c.logger = logger
	c.mod, err = sandbox.Compile(ctx, eng, wasm, sandbox.ModuleConfig{
		Name:   cb.Name,
		Limits: cb.Limits,
		WASI:   wasi,
		Logger: logger,
		SHA256: sum,
		// a process-isolated engine sizes its worker's limits by it
		Instances:     cb.MaxInstances,
		Workers:       newWorkerEvents(h.tel, cb.Name, eng.Name()),
		Deterministic: cb.Deterministic,
		Profile:       c.profile,
	})
	if err != nil {
		// The engine refused the module (ABIViolation; InvalidArgument
		// when a validator did), or, under isolation: process, the
		// worker that was to compile it died.
		kind := ABIViolation
		var t *sandbox.Trap
		var inv *sandbox.InvalidModuleError
		switch {
		case errors.As(err, &t) && t.Class == WorkerDied:
			kind = WorkerDied
		case errors.As(err, &inv):
			kind = InvalidArgument
		}
		return nil, withKind(kind, fmt.Errorf("module %s: %w", cb.Module, err))
	}
	c.pool = newPool(c, cb.MaxInstances)

	// A probe instance checks the ABI version, runs _initialize, and reads
	// the signature export when there is no custom section: all of it one
	// guest run against one deadline, as a call is.
	probe, err := c.newGuest(ctx, sandbox.Deadline(time.Now(), cb.Limits.Timeout), true)
	if err != nil {
		_ = c.mod.Close(ctx)
		return nil, fmt.Errorf("module %s: %w", cb.Module, err)
	}
	if embedded == nil {
		if info.HasExport(abi.ExportSignatures) {
			embedded, err = probe.readSignatures(ctx, cb.Export)
			if err != nil {
				probe.close(ctx)
				_ = c.mod.Close(ctx)
				return nil, fmt.Errorf("module %s: %w", cb.Module, err)
			}
		}
	}
	sig, err := cb.ResolveSignature(embedded)
	if err != nil {
		probe.close(ctx)
		_ = c.mod.Close(ctx)
		return nil, withKind(InvalidArgument, err)
	}
	c.sig = sig
	c.id = abi.CallbackID(sum, cb.Export, sig)
	c.tel = newCallbackTelemetry(cb.Name, eng.Name(), c.id)
	if !cb.FreshInstances() {
		c.pool.put(probe)
	} else {
		probe.close(ctx)
	}
	h.logger.Debug("callback loaded", "callback", cb.Name, "callback_id", c.id, "engine", eng.Name(), "signature", sig.String())
	return c, nil
}

// indexByIDLocked makes c findable by its content id, unless another
// callback already has that id with different settings: then the id is
// ambiguous (a call by it could run under either's limits) and is refused.
// h.mu is held.
func (h *Host) indexByIDLocked(c *Callback) {
	if names, ok := h.ambiguous[c.id]; ok {
		if !slices.Contains(names, c.name) {
			names = append(names, c.name)
			sort.Strings(names)
			h.ambiguous[c.id] = names
		}
		return
	}
	first, ok := h.byID[c.id]
	switch {
	case !ok:
		h.byID[c.id] = c
	case !first.interchangeable(c):
		delete(h.byID, c.id)
		var names []string
		for n, o := range h.callbacks {
			if o.id == c.id {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		h.ambiguous[c.id] = names
	}
}

// interchangeable reports whether a call by content id could run on c or
// d alike: the same id (module, export, signature) and the same settings.
func (c *Callback) interchangeable(d *Callback) bool {
	return c.id == d.id && c.spec.SameSettings(d.spec)
}

// moduleSHA is the module bytes' sha256, in lower-case hex.
func moduleSHA(wasm []byte) string {
	sum := sha256.Sum256(wasm)
	return hex.EncodeToString(sum[:])
}

// idHandler adds the callback's id to every record. The id is known only
// once the signature is, after the module has been compiled and probed, so
// it is read at logging time rather than bound when the logger is made.
type idHandler struct {
	slog.Handler
	id *string
}

// Handle implements slog.Handler.
func (h *idHandler) Handle(ctx context.Context, r slog.Record) error {
	if *h.id != "" {
		r.AddAttrs(slog.String("callback_id", *h.id))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h *idHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &idHandler{Handler: h.Handler.WithAttrs(attrs), id: h.id}
}

// WithGroup implements slog.Handler.
func (h *idHandler) WithGroup(name string) slog.Handler {
	return &idHandler{Handler: h.Handler.WithGroup(name), id: h.id}
}

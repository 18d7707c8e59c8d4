package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/internal/tapgroup"
	"github.com/seed4b3e0ccb/callbox/internal/testknob"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

// Tensor is a dense row-major host tensor; see abi.Tensor.
type Tensor = abi.Tensor

// Host loads callback modules and runs calls on them. It is safe for
// concurrent use by many goroutines.
type Host struct {
	logger   *slog.Logger
	cacheDir string
	file     string // config file, for error messages

	mu      sync.RWMutex
	engines map[string]sandbox.Engine // by name, "+process" for isolation: process
	worker  string                    // WithWorker or the config's worker key
	// workerUser: WithWorkerUser or the config's worker_user key.
	workerUser string
	callbacks  map[string]*Callback
	byID       map[string]*Callback
	// ambiguous: content ids that name callbacks with different settings
	// (the same module, export and signature under other limits); a lookup
	// by such an id is refused, naming them.
	ambiguous map[string][]string
	chains    map[string]*Chain
	closed    bool
	inflight  sync.WaitGroup
	// reloadMu serializes Reloads; retiring counts callbacks a Reload
	// replaced that are not closed yet (Close waits for them).
	reloadMu sync.Mutex
	retiring sync.WaitGroup

	taps   tapgroup.Group // the host's unordered taps
	skewed bool
	// instances numbers every instance the host creates (GuestMemory).
	instances atomic.Uint64
	// clock is what calls read the time from (one monotonic read).
	clock monoClock
	// untimed: calls leave Stats.Guest and Wall zero (WithoutCallTiming).
	untimed bool
	// onInstanceClose is called before an instance is closed.
	onInstanceClose func(instance uint64)

	// profiled: every callback is compiled with the guest profiler
	// (WithGuestProfiler).
	profiled bool

	meterProvider  metric.MeterProvider
	tracerProvider trace.TracerProvider
	tel            *telemetry
}

// Option configures a Host.
type Option func(*Host)

// WithLogger sets the logger for host events and guest log lines (default
// slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(h *Host) { h.logger = l } }

// WithCacheDir keeps compiled modules under dir (overriding the config's
// cache_dir), so hosts in the same or later processes skip compilation.
// dir must be the host's user's and writable by no one else (a load
// fails, naming the path, if it or anything in it is not).
func WithCacheDir(dir string) Option { return func(h *Host) { h.cacheDir = dir } }

// WithWorker names the callbox-worker executable that isolation: process
// starts (overriding the config's worker key). Without either, the host
// looks at the CALLBOX_WORKER variable, then uses the program itself when
// it called WorkerMain, then looks for callbox-worker beside the file this
// code runs from (the program, or libcallbox.so inside a Python or BEAM
// process), then beside the running program.
func WithWorker(path string) Option { return func(h *Host) { h.worker = path } }

// WorkerMain makes the program its own worker for isolation: process, so
// that it needs no callbox-worker executable beside it. Call it first
// thing in main, before anything else runs:
//
//	func main() {
//		host.WorkerMain()
//		...
//	}
//
// When a host started the program as its worker, WorkerMain serves that
// host and exits the process (it never returns); otherwise it returns at
// once, and the program's hosts start their workers by running the
// program again. The worker runs the program's package initializers before
// WorkerMain locks it down: one that starts a goroutine making system
// calls later (a background flusher, a file watcher) gets the worker
// killed by its seccomp filter; such a program ships callbox-worker
// instead (docs/SECURITY.md, "A second wall").
func WorkerMain() { engines.WorkerMain() }

// WithWorkerUser says who a host running as root starts its workers as (a
// user name, "UID" or "UID:GID"; overriding the config's worker_user
// key; nobody by default). A host that is not root starts them as its
// own user.
func WithWorkerUser(user string) Option { return func(h *Host) { h.workerUser = user } }

// WithoutCallTiming leaves Stats.Guest and Stats.Wall zero on every call,
// which saves the three clock reads that measure them (about 75 ns of a
// 600 ns tiny call on the development VM, where one read costs ~25 ns).
// For callers that never read them: the C API and the XLA handlers, which
// return no Stats, open their hosts with it. The deadline still starts
// from one clock read at the call's start.
func WithoutCallTiming() Option { return func(h *Host) { h.untimed = true } }

// WithInstanceClose calls fn(instance) just before the host closes an
// instance (discarded after a failed call, with fresh isolation after every
// call, or at Close), on the goroutine closing it: a caller that pinned the
// instance's memory (Call.Memory, GuestMemory.Instance) unpins it here,
// while the memory is still mapped. fn must not call into the host.
func WithInstanceClose(fn func(instance uint64)) Option {
	return func(h *Host) { h.onInstanceClose = fn }
}

// New creates a host and loads every callback of cfg, those its modules
// entries declare included (see ExpandModules). cfg may be nil for a
// host whose callbacks are loaded programmatically with Load or LoadModule.
// A callback that fails to load fails New, naming the config file, the
// callback and the reason.
func New(ctx context.Context, cfg *config.Config, opts ...Option) (*Host, error) {
	h := &Host{engines: map[string]sandbox.Engine{}, callbacks: map[string]*Callback{}, byID: map[string]*Callback{}, ambiguous: map[string][]string{}, chains: map[string]*Chain{}, logger: slog.Default(), clock: newMonoClock()}
	for _, o := range opts {
		o(h)
	}
	h.skewed = testknob.SkewedBuffers(ctx) // the SDK conformance suite's knob (internal/testknob)
	h.tel = newTelemetry(h)
	if h.tel.meterErr != nil {
		h.logger.Warn("callbox: the meter provider refused an instrument; it records nothing", "error", h.tel.meterErr)
	}
	if cfg == nil {
		return h, nil
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if h.cacheDir == "" {
		h.cacheDir = cfg.CacheDir
	}
	if h.worker == "" {
		h.worker = cfg.Worker
	}
	if h.workerUser == "" {
		h.workerUser = cfg.WorkerUser
	}
	h.file = cfg.File
	callbacks, err := expandModules(cfg)
	if err != nil {
		return nil, err
	}
	for _, cb := range callbacks {
		if err := h.Load(ctx, cb); err != nil {
			_ = h.Close(ctx)
			if cfg.File != "" {
				return nil, fmt.Errorf("%s: %w", cfg.File, err)
			}
			return nil, err
		}
	}
	return h, nil
}

// engine returns the named engine, in process or behind process
// isolation, starting it on first use.
func (h *Host) engine(ctx context.Context, name string, process bool) (sandbox.Engine, error) {
	key := name
	if process {
		key += "+" + config.IsolationProcess
	}
	if e, ok := h.engines[key]; ok {
		return e, nil
	}
	var e sandbox.Engine
	var err error
	if process {
		e, err = engines.NewProcess(ctx, name, h.worker, h.workerUser)
	} else {
		e, err = engines.New(ctx, name, engines.Options{CacheDir: h.cacheDir})
	}
	if err != nil {
		return nil, err
	}
	h.engines[key] = e
	return e, nil
}

// Info describes a loaded callback.
type Info struct {
	Name      string
	ID        string // sha256 of module bytes, export name and signature
	Export    string
	Signature *abi.Signature
	Engine    string
	Module    string // module path, or "<memory>" for LoadModule
	ModuleSHA string // sha256 of the module bytes
	Isolation string
	// MaxInstances is the pool's bound (pooled) or the most concurrent
	// calls (fresh).
	MaxInstances int
	Limits       config.Limits
	WASI         bool
	// Batching is the callback's resolved batching rule (config's Batching*
	// names; sequential when unset), whichever config section loaded it.
	Batching string
	// CallerStack is the native stack, in bytes, a thread calling this
	// callback must have: 0 when any thread will do (wazero runs guests on
	// goroutine stacks; wasmtime on Linux, on x86-64 or with glibc,
	// switches to a stack of its own), else about the guest's wasm stack limit plus
	// 1 MiB.
	CallerStack uint64
}

// Callbacks lists the loaded callbacks, sorted by name.
func (h *Host) Callbacks() []Info {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]Info, 0, len(h.callbacks))
	for _, c := range h.callbacks {
		out = append(out, c.info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// loaded is every loaded callback (for the metrics' observer).
func (h *Host) loaded() []*Callback {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]*Callback, 0, len(h.callbacks))
	for _, c := range h.callbacks {
		out = append(out, c)
	}
	return out
}

// Callback describes one loaded callback.
func (h *Host) Callback(name string) (Info, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	c, ok := h.callbacks[name]
	if !ok {
		return Info{}, false
	}
	return c.info(), true
}

// lookup resolves a callback by name or id and admits one call on it;
// the caller must call c.leave when the call is over.
func (h *Host) lookup(nameOrID string) (*Callback, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.closed {
		return nil, ErrClosed
	}
	c, ok := h.callbacks[nameOrID]
	if !ok {
		if c, ok = h.byID[nameOrID]; !ok {
			return nil, h.unknownLocked(nameOrID)
		}
	}
	h.inflight.Add(1)
	c.inflight.Add(1)
	return c, nil
}

// Close waits for calls in flight (until ctx is done), then releases every
// instance, module and engine. Calls made after Close fail with ErrClosed.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.mu.Unlock()

	done := make(chan struct{})
	go func() { h.inflight.Wait(); h.retiring.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("close: calls still in flight: %w", ctx.Err())
	}
	h.taps.Wait(ctx)

	h.tel.close()
	h.mu.Lock()
	defer h.mu.Unlock()
	var errs []error
	for _, c := range h.callbacks {
		errs = append(errs, c.close(ctx))
	}
	for _, e := range h.engines {
		errs = append(errs, e.Close(ctx))
	}
	return errors.Join(errs...)
}

package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/internal/meter"
	"github.com/seed4b3e0ccb/callbox/internal/sandbox"
	"github.com/seed4b3e0ccb/callbox/internal/wasmbin"
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
	// lastPlan caches the plan of the most recent input types.
	lastPlan atomic.Pointer[callPlan]
}

func (c *Callback) info() Info {
	return Info{Name: c.name, ID: c.id, Export: c.spec.Export, Signature: c.sig, Engine: c.spec.Engine,
		Module: c.spec.Module, ModuleSHA: c.sha, Isolation: c.spec.Isolation, Limits: c.spec.Limits,
		WASI: c.spec.WASI == config.WASIMinimal}
}

func (c *Callback) close(ctx context.Context) error {
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
// embedded module, say); cb.Module is used only in messages.
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
	c, err := h.load(ctx, cb, wasm)
	if err != nil {
		return &LoadError{Callback: cb.Name, kind: loadKind(err), Err: err}
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
	h.byID[c.id] = c
	return nil
}

func (h *Host) load(ctx context.Context, cb config.Callback, wasm []byte) (*Callback, error) {
	sum := sha256.Sum256(wasm)
	sha := hex.EncodeToString(sum[:])
	if cb.SHA256 != "" && !strings.EqualFold(cb.SHA256, sha) {
		return nil, withKind(InvalidArgument, fmt.Errorf("module %s has sha256 %s, but the config expects %s; refusing to load it", cb.Module, sha, cb.SHA256))
	}
	info, err := checkLoad(wasm, cb)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", cb.Module, err)
	}
	wasi := cb.WASI == config.WASIMinimal
	// The signature table from the custom section, if any.
	var embedded *abi.Signature
	if secs := info.Custom[abi.SignatureSection]; len(secs) > 0 {
		table, err := abi.ParseSignatureTable(joinSections(secs))
		if err != nil {
			return nil, withKind(ABIViolation, fmt.Errorf("module %s: custom section %s: %w", cb.Module, abi.SignatureSection, err))
		}
		embedded = table[cb.Export]
	}

	h.mu.Lock()
	eng, err := h.engine(ctx, cb.Engine)
	h.mu.Unlock()
	if err != nil {
		return nil, withKind(InvalidArgument, err)
	}
	for _, f := range []struct {
		set  bool
		feat sandbox.Feature
		key  string
	}{{cb.Limits.Fuel != 0, sandbox.FeatureFuel, "fuel"}, {cb.Limits.MaxStack != 0, sandbox.FeatureMaxStack, "max_stack"}} {
		if f.set && !eng.Supports(f.feat) {
			return nil, withKind(InvalidArgument, fmt.Errorf("callbacks.%s.%s: %s is not supported by the %s engine (use engine: wasmtime, or remove it)", cb.Name, f.key, f.key, eng.Name()))
		}
	}
	c := &Callback{h: h, name: cb.Name, spec: cb, sha: sha, engine: eng, skewed: h.skewed}
	_, c.hasFre = info.Export(abi.ExportFree)
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
	})
	if err != nil {
		return nil, withKind(ABIViolation, fmt.Errorf("module %s: %w", cb.Module, err))
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
		if _, ok := info.Export(abi.ExportSignatures); ok {
			embedded, err = probe.readSignatures(ctx, cb.Export)
			if err != nil {
				probe.close(ctx)
				_ = c.mod.Close(ctx)
				return nil, fmt.Errorf("module %s: %w", cb.Module, err)
			}
		}
	}
	sig, err := resolveSignature(cb, embedded)
	if err != nil {
		probe.close(ctx)
		_ = c.mod.Close(ctx)
		return nil, withKind(InvalidArgument, err)
	}
	c.sig = sig
	c.id = abi.CallbackID(sum, cb.Export, sig)
	if cb.Isolation == config.IsolationPooled {
		c.pool.put(probe)
	} else {
		probe.close(ctx)
	}
	h.logger.Debug("callback loaded", "callback", cb.Name, "callback_id", c.id, "engine", eng.Name(), "signature", sig.String())
	return c, nil
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

func joinSections(secs [][]byte) []byte {
	var out []byte
	for _, s := range secs {
		out = append(out, s...)
		out = append(out, '\n')
	}
	return out
}

func resolveSignature(cb config.Callback, embedded *abi.Signature) (*abi.Signature, error) {
	var fromConfig *abi.Signature
	if cb.Signature != "" {
		s, err := abi.ParseSignature(cb.Signature)
		if err != nil {
			return nil, fmt.Errorf("callbacks.%s.signature: %w", cb.Name, err)
		}
		fromConfig = s
	}
	switch {
	case fromConfig != nil && embedded != nil && !fromConfig.Equal(embedded):
		return nil, fmt.Errorf("callbacks.%s.signature %q disagrees with the module's own signature %q for export %s", cb.Name, fromConfig, embedded, cb.Export)
	case fromConfig != nil:
		return fromConfig, nil
	case embedded != nil:
		return embedded, nil
	}
	return nil, fmt.Errorf("callback %q has no signature: give one in the config (signature:) or embed one in the module (%s section or %s export)", cb.Name, abi.SignatureSection, abi.ExportSignatures)
}

// Types of the ABI's exports.
var (
	i32        = sandbox.I32
	exportSigs = map[string][2][]sandbox.ValType{
		abi.ExportVersion:    {nil, {i32}},
		abi.ExportAlloc:      {{i32, i32}, {i32}},
		abi.ExportFree:       {{i32, i32, i32}, nil},
		abi.ExportSignatures: {nil, {i32}},
		abi.ExportInitialize: {nil, nil},
	}
	callbackSig = [2][]sandbox.ValType{{i32}, {i32}}
)

// checkLoad is the load check, the one set of rules every module passes
// before anything compiles or instantiates it, on every path (Load and
// Inspect): it parses the module (bounded: wasmbin) and applies
// checkModule. Its errors carry their Kind.
func checkLoad(wasm []byte, cb config.Callback) (*wasmbin.Module, error) {
	info, err := wasmbin.Parse(wasm)
	if err != nil {
		return nil, withKind(ABIViolation, err)
	}
	if err := checkModule(info, cb, cb.WASI == config.WASIMinimal); err != nil {
		return info, err
	}
	return info, nil
}

// checkModule applies the ABI's load-time rules to a parsed module: the
// required exports with the right types, nothing imported that the host
// does not grant, one 32-bit memory within the limit, bounded tables.
func checkModule(m *wasmbin.Module, cb config.Callback, wasi bool) error {
	var errs []error
	var memErr error // the one problem that is a MemoryLimit rather than an ABIViolation
	provided := map[string]sandbox.HostFunc{}
	for _, hf := range sandbox.HostFuncs(wasi) {
		provided[hf.Module+"."+hf.Name] = hf
	}
	for _, imp := range m.Imports {
		full := imp.Module + "." + imp.Name
		if imp.Kind != wasmbin.KindFunc {
			errs = append(errs, fmt.Errorf("imports %s %s; the host provides only functions", imp.Kind, full))
			continue
		}
		hf, ok := provided[full]
		switch {
		case !ok && imp.Module == sandbox.WASIModule && !wasi:
			errs = append(errs, fmt.Errorf("imports %s, but WASI is not granted to this callback (set wasi: minimal)", full))
			continue
		case !ok && full == "env.abort":
			errs = append(errs, fmt.Errorf("imports %s, which the host does not provide: an AssemblyScript module built without the SDK's abort hook; "+
				"build with the SDK's asconfig.callbox.json or --use abort=<the SDK's host/callboxAbort> (guests/assemblyscript/README.md)", full))
			continue
		case !ok:
			errs = append(errs, fmt.Errorf("imports %s, which the host does not provide", full))
			continue
		}
		if want := (sandbox.FuncType{Params: hf.Params, Results: hf.Results}); imp.Func != nil && !funcType(imp.Func).Equal(want) {
			errs = append(errs, fmt.Errorf("imports %s with type %s, but the host's has type %s", full, funcType(imp.Func), want))
		}
	}
	want := map[string][2][]sandbox.ValType{cb.Export: callbackSig}
	for name, sig := range exportSigs {
		want[name] = sig
	}
	required := []string{abi.ExportVersion, abi.ExportAlloc, cb.Export}
	// In a fixed order, so the message does not vary from load to load.
	for _, name := range slices.Sorted(maps.Keys(want)) {
		sig := want[name]
		e, ok := m.Export(name)
		if !ok {
			continue
		}
		if e.Kind != wasmbin.KindFunc {
			errs = append(errs, fmt.Errorf("export %s is a %s, want a function", name, e.Kind))
			continue
		}
		if e.Func != nil {
			if err := sandbox.CheckExport(name, funcType(e.Func), sandbox.FuncType{Params: sig[0], Results: sig[1]}); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, name := range required {
		if _, ok := m.Export(name); !ok {
			errs = append(errs, fmt.Errorf("missing required export %s", name))
		}
	}
	// The load-time instrumentation adds exports with this prefix; a module
	// that already had one could not be instrumented, and on wazero would
	// run without the meter's stack limit and fuel.
	for _, e := range m.Exports {
		if strings.HasPrefix(e.Name, meter.ExportPrefix) {
			errs = append(errs, fmt.Errorf("export %s uses the prefix %s, which the host reserves", e.Name, meter.ExportPrefix))
		}
	}
	if e, ok := m.Export(abi.ExportMemory); !ok || e.Kind != wasmbin.KindMemory {
		errs = append(errs, fmt.Errorf("missing required export %q (the linear memory)", abi.ExportMemory))
	}
	switch {
	case len(m.Memories) != 1:
		errs = append(errs, fmt.Errorf("has %d memories, want exactly 1", len(m.Memories)))
	default:
		mem := m.Memories[0]
		if mem.Is64 {
			errs = append(errs, errors.New("uses a 64-bit memory; ABI v1 is wasm32"))
		}
		if mem.Shared {
			errs = append(errs, errors.New("uses a shared memory; ABI v1 needs an unshared one"))
		}
		if limit := cb.Limits.MaxMemory; limit != 0 && mem.Min*abi.PageSize > limit {
			memErr = fmt.Errorf("declares a minimum memory of %s, above the callback's max_memory of %s",
				sandbox.FormatBytes(mem.Min*abi.PageSize), sandbox.FormatBytes(limit))
		}
	}
	total := uint64(0)
	for i, t := range m.Tables {
		total += t.Min
		if t.Min > abi.MaxTableElements {
			errs = append(errs, fmt.Errorf("table %d declares %d elements, above the host's limit of %d", i, t.Min, abi.MaxTableElements))
		}
	}
	if total > abi.MaxTableElements && len(m.Tables) > 1 {
		errs = append(errs, fmt.Errorf("its %d tables declare %d elements in all, above the host's limit of %d", len(m.Tables), total, abi.MaxTableElements))
	}
	switch {
	case len(errs) > 0:
		return withKind(ABIViolation, errors.Join(append(errs, memErr)...))
	case memErr != nil:
		return withKind(MemoryLimit, memErr)
	}
	return nil
}

// funcType converts a parsed function type.
func funcType(t *wasmbin.FuncType) sandbox.FuncType {
	ft := sandbox.FuncType{Params: make([]sandbox.ValType, len(t.Params)), Results: make([]sandbox.ValType, len(t.Results))}
	for i, p := range t.Params {
		ft.Params[i] = sandbox.ValType(p)
	}
	for i, r := range t.Results {
		ft.Results[i] = sandbox.ValType(r)
	}
	return ft
}

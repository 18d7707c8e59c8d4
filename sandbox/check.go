package sandbox

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/meter"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/wasmbin"
)

// Types of the ABI's exports.
var (
	i32        = I32
	exportSigs = map[string]FuncType{
		abi.ExportVersion:    {Results: []ValType{i32}},
		abi.ExportAlloc:      {Params: []ValType{i32, i32}, Results: []ValType{i32}},
		abi.ExportFree:       {Params: []ValType{i32, i32, i32}},
		abi.ExportSignatures: {Results: []ValType{i32}},
		abi.ExportInitialize: {},
	}
	callbackSig = FuncType{Params: []ValType{i32}, Results: []ValType{i32}}
)

// CallbackType is the type of every callback export: (i32) -> (i32).
func CallbackType() FuncType { return callbackSig }

// ExportType is the type the ABI gives one of its own exports
// (abi.ExportVersion, abi.ExportAlloc, ...); false for another name.
func ExportType(name string) (FuncType, bool) {
	t, ok := exportSigs[name]
	return t, ok
}

// ModuleError is a module the load check refuses, with the Kind of the
// failure (ABIViolation, or MemoryLimit for a minimum memory above the
// limit). Its text is Err's.
type ModuleError struct {
	Kind abi.Kind
	Err  error
}

func (e *ModuleError) Error() string { return e.Err.Error() }
func (e *ModuleError) Unwrap() error { return e.Err }

// NondeterministicImport reports an import whose results depend on when
// or where a call runs (WASI's clocks, random and sleep): deterministic
// mode (config.Callback.Deterministic) grants none of them.
func NondeterministicImport(module, name string) bool {
	if module != WASIModule {
		return false
	}
	switch name {
	case "clock_time_get", "clock_res_get", "random_get", "poll_oneoff":
		return true
	}
	return false
}

// ModuleInfo is what the load check learned of a module it passed.
type ModuleInfo struct {
	m *wasmbin.Module
}

// HasExport reports whether the module exports name.
func (i *ModuleInfo) HasExport(name string) bool {
	_, ok := i.m.Export(name)
	return ok
}

// Signatures is the table of the module's signature custom section
// (abi.SignatureSection, its parts joined): nil, nil when it has none.
func (i *ModuleInfo) Signatures() (map[string]*abi.Signature, error) {
	return sectionSignatures(i.m)
}

// ImportsWASI reports whether the module imports anything from WASI
// (WASIModule): it needs wasi: minimal to load.
func (i *ModuleInfo) ImportsWASI() bool {
	for _, imp := range i.m.Imports {
		if imp.Module == WASIModule {
			return true
		}
	}
	return false
}

// CallbackExports lists, sorted, the exports of the callback's type
// ((i32) -> i32) that are not the ABI's own: the callbacks a module
// offers.
func (i *ModuleInfo) CallbackExports() []string {
	var out []string
	for _, e := range i.m.Exports {
		if e.Kind != wasmbin.KindFunc || e.Func == nil || !funcType(e.Func).Equal(callbackSig) {
			continue
		}
		if _, abiExport := exportSigs[e.Name]; abiExport {
			continue
		}
		out = append(out, e.Name)
	}
	slices.Sort(out)
	return out
}

// ParseModule parses a module (bounded) without checking it against the
// ABI: what a program that only reads a module's declarations (lowering
// without a host, a test choosing wasi) needs; CheckModule parses and
// checks.
func ParseModule(wasm []byte) (*ModuleInfo, error) {
	m, err := wasmbin.Parse(wasm)
	if err != nil {
		return nil, err
	}
	return &ModuleInfo{m: m}, nil
}

// sectionSignatures joins a module's signature sections, one table.
func sectionSignatures(m *wasmbin.Module) (map[string]*abi.Signature, error) {
	secs := m.Custom[abi.SignatureSection]
	if len(secs) == 0 {
		return nil, nil
	}
	var joined []byte
	for _, s := range secs {
		joined = append(joined, s...)
		joined = append(joined, '\n')
	}
	table, err := abi.ParseSignatureTable(joined)
	if err != nil {
		return nil, fmt.Errorf("custom section %s: %w", abi.SignatureSection, err)
	}
	return table, nil
}

// CheckModule is the load check, the one set of rules every module passes
// before anything compiles or instantiates it, on every path (host's Load,
// and Inspect): it parses the module (bounded: wasmbin) and applies the
// ABI's load-time rules for the callback cb. Its errors are *ModuleError.
func CheckModule(wasm []byte, cb config.Callback) (*ModuleInfo, error) {
	info, err := ParseModule(wasm)
	if err != nil {
		return nil, &ModuleError{Kind: abi.ABIViolation, Err: err}
	}
	return info, checkModule(info.m, cb, cb.WASI == config.WASIMinimal)
}

// checkModule applies the ABI's load-time rules to a parsed module: the
// required exports with the right types, nothing imported that the host
// does not grant, one 32-bit memory within the limit, bounded tables.
func checkModule(m *wasmbin.Module, cb config.Callback, wasi bool) error {
	var errs []error
	var memErr error // the one problem that is a MemoryLimit rather than an ABIViolation
	provided := map[string]Import{}
	for _, imp := range Imports(wasi) {
		provided[imp.Module+"."+imp.Name] = imp
	}
	for _, imp := range m.Imports {
		full := imp.Module + "." + imp.Name
		if imp.Kind != wasmbin.KindFunc {
			errs = append(errs, fmt.Errorf("imports %s %s; the host provides only functions", imp.Kind, full))
			continue
		}
		hf, ok := provided[full]
		switch {
		case ok && cb.Deterministic && NondeterministicImport(imp.Module, imp.Name):
			errs = append(errs, fmt.Errorf("imports %s, which deterministic: true does not grant: its result depends on when or where the call runs", full))
			continue
		case !ok && imp.Module == WASIModule && !wasi:
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
		want := hf.Type
		switch {
		case imp.Func == nil:
			errs = append(errs, fmt.Errorf("imports %s with a type index that names no function type, but the host's has type %s", full, want))
		case !funcType(imp.Func).Equal(want):
			errs = append(errs, fmt.Errorf("imports %s with type %s, but the host's has type %s", full, funcType(imp.Func), want))
		}
	}
	want := map[string]FuncType{cb.Export: callbackSig}
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
		if e.Func == nil {
			errs = append(errs, fmt.Errorf("export %s has no function type (its index names no function of the module), want %s", name, sig))
			continue
		}
		if err := CheckExport(name, funcType(e.Func), sig); err != nil {
			errs = append(errs, err)
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
				config.FormatSize(mem.Min*abi.PageSize), config.FormatSize(limit))
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
		return &ModuleError{Kind: abi.ABIViolation, Err: errors.Join(append(errs, memErr)...)}
	case memErr != nil:
		return &ModuleError{Kind: abi.MemoryLimit, Err: memErr}
	}
	return nil
}

// funcType converts a parsed function type.
func funcType(t *wasmbin.FuncType) FuncType {
	ft := FuncType{Params: make([]ValType, len(t.Params)), Results: make([]ValType, len(t.Results))}
	for i, p := range t.Params {
		ft.Params[i] = ValType(p)
	}
	for i, r := range t.Results {
		ft.Results[i] = ValType(r)
	}
	return ft
}

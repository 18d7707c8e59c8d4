package engines

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/validate"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/wasmbin"
)

// ModuleReport describes a module as `callbox inspect` shows it.
type ModuleReport struct {
	Size    int
	SHA256  string
	Imports []ModuleImport
	Exports []ModuleExport
	Memory  *MemoryDecl // nil when the module has no memory
	// ABIVersion is what callbox_abi_version returned; 0 when it could not
	// be called (see Problems).
	ABIVersion int32
	// Callbacks are the exports with the callback type (i32) -> i32 that are
	// not ABI exports, with their signatures when the module declares them.
	Callbacks []CallbackReport
	// SignatureSource is "custom section", "export" or "" (none).
	SignatureSource string
	// Problems are ABI rule violations found: what would make a load fail.
	Problems []string
	// Stubbed is set when the module could not be instantiated as the host
	// would (it imports something the host does not provide) and
	// ABIVersion and the signatures were read from an instance whose
	// imports are stubs that trap.
	Stubbed bool
}

// ModuleImport is one import of a module.
type ModuleImport struct {
	Module, Name string
	Kind         string // "func", "memory", "table", "global", "tag"
	Type         string // a function's type, "(i32, i32) -> ()"; else Kind
}

// ModuleExport is one export of a module.
type ModuleExport struct {
	Name string
	Kind string // as ModuleImport.Kind
	Type string // as ModuleImport.Type
}

// MemoryDecl is a module's declared linear memory, in 64 KiB pages.
type MemoryDecl struct {
	Min    uint64
	Max    uint64
	HasMax bool
}

// CallbackReport is one callback export of a module.
type CallbackReport struct {
	Export    string
	Signature *abi.Signature // nil when the module does not declare one
}

// Inspect reads a module and, when it passes the engines' validators and
// the load check that host's Load applies (with the default limits, WASI
// granted if the module imports it), asks it in a sandbox for its ABI
// version and signatures. A module that would not load is never compiled
// or run: its problems are listed instead (an invalid module's first). Inspect never fails on an ABI violation, and never panics, on
// any module; it returns an error only for bytes that are not a module.
func Inspect(ctx context.Context, wasm []byte) (*ModuleReport, error) {
	m, err := wasmbin.Parse(wasm)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(wasm)
	r := &ModuleReport{Size: len(wasm), SHA256: hex.EncodeToString(sum[:])}
	for _, imp := range m.Imports {
		typ := imp.Kind.String()
		if imp.Func != nil {
			typ = imp.Func.String()
		}
		r.Imports = append(r.Imports, ModuleImport{Module: imp.Module, Name: imp.Name, Kind: imp.Kind.String(), Type: typ})
	}
	for _, e := range m.Exports {
		typ := e.Kind.String()
		if e.Func != nil {
			typ = e.Func.String()
		}
		r.Exports = append(r.Exports, ModuleExport{Name: e.Name, Kind: e.Kind.String(), Type: typ})
	}
	if len(m.Memories) > 0 {
		mem := m.Memories[0]
		r.Memory = &MemoryDecl{Min: mem.Min, Max: mem.Max, HasMax: mem.HasMax}
	}
	info, err := sandbox.ParseModule(wasm)
	if err != nil {
		return nil, err
	}
	var sigs map[string]*abi.Signature
	if len(m.Custom[abi.SignatureSection]) > 0 {
		r.SignatureSource = "custom section"
		sigs, err = info.Signatures()
		if err != nil {
			r.Problems = append(r.Problems, err.Error())
		}
	}
	exports := info.CallbackExports()

	cb := config.DefaultCallback()
	cb.Name, cb.Module = "inspect", "<inspect>"
	cb.Export = abi.ExportVersion // any export: the check needs one name
	if len(exports) > 0 {
		cb.Export = exports[0]
	}
	if info.ImportsWASI() {
		cb.WASI = config.WASIMinimal
	}
	// The load path's own checks, before anything compiles the module:
	// the engines' validators, then the ABI's rules. An invalid module,
	// or one the check refuses, is never compiled, except a valid one
	// refused only for imports the host does not provide: probe reads its
	// version and signatures with those imports stubbed out.
	v := validate.New()
	invalid := v.Validate(ctx, wasm, sum)
	_ = v.Close(ctx)
	if invalid != nil {
		r.Problems = append(r.Problems, invalid.Error())
	}
	if _, err := sandbox.CheckModule(wasm, cb); err != nil {
		problems := splitErrors(err)
		r.Problems = append(r.Problems, problems...)
		if invalid == nil && onlyUnprovidedImports(problems) {
			r.probe(ctx, wasm, m, cb, true, sigs == nil, &sigs)
		}
	} else if invalid == nil {
		r.probe(ctx, wasm, m, cb, false, sigs == nil, &sigs)
	}
	for _, name := range exports {
		r.Callbacks = append(r.Callbacks, CallbackReport{Export: name, Signature: sigs[name]})
	}
	return r, nil
}

// probe instantiates the module as a call's instance is instantiated, looks
// up the exports a call looks up, and calls callbox_abi_version and, when
// wanted, callbox_signatures. unprovided says the module imports what the
// host does not provide (a problem already listed): its instance then has
// those imports stubbed out.
func (r *ModuleReport) probe(ctx context.Context, wasm []byte, m *wasmbin.Module, cb config.Callback, unprovided, wantSigs bool, sigs *map[string]*abi.Signature) {
	eng, err := New(ctx, config.EngineWazero, Options{})
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
		return
	}
	defer eng.Close(ctx)
	mod, err := sandbox.Compile(ctx, eng, wasm, sandbox.ModuleConfig{Name: "inspect", Limits: cb.Limits, WASI: cb.WASI == config.WASIMinimal})
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
		return
	}
	defer mod.Close(ctx)
	// One deadline for the whole probe, as at load.
	inst, err := mod.Instantiate(ctx, sandbox.Deadline(time.Now(), cb.Limits.Timeout))
	if err != nil && !unprovided {
		r.Problems = append(r.Problems, err.Error())
		return
	}
	if err != nil {
		// Still read the version and signatures when only the imports
		// stand in the way.
		stub, serr := stubbedInstance(ctx, wasm, m, cb)
		if serr != nil {
			r.Problems = append(r.Problems, err.Error())
			return
		}
		inst, r.Stubbed = stub, true
	}
	defer inst.Close(ctx)
	// The engine's own check of the exports every call uses, as a call's
	// instance makes it (the load check read their types from the binary).
	allocType, _ := sandbox.ExportType(abi.ExportAlloc)
	lookups := []struct {
		name string
		typ  sandbox.FuncType
	}{{abi.ExportAlloc, allocType}, {cb.Export, sandbox.CallbackType()}}
	if cb.Export == abi.ExportVersion { // the module has no callback
		lookups = lookups[:1]
	}
	for _, l := range lookups {
		if _, err := inst.Export(l.name, l.typ.Params, l.typ.Results); err != nil && !slices.Contains(r.Problems, err.Error()) {
			r.Problems = append(r.Problems, err.Error())
		}
	}
	var stack [1]uint64
	if init, err := inst.Export(abi.ExportInitialize, nil, nil); err == nil {
		if err := inst.Call(ctx, init, stack[:0]); err != nil {
			r.Problems = append(r.Problems, fmt.Sprintf("%s: %v", abi.ExportInitialize, err))
			return
		}
	}
	if ver, err := inst.Export(abi.ExportVersion, nil, []sandbox.ValType{sandbox.I32}); err == nil {
		if err := inst.Call(ctx, ver, stack[:1]); err != nil {
			r.Problems = append(r.Problems, fmt.Sprintf("%s: %v", abi.ExportVersion, err))
		} else {
			r.ABIVersion = int32(uint32(stack[0]))
			if r.ABIVersion != abi.Version {
				r.Problems = append(r.Problems, fmt.Sprintf("reports ABI version %d, this host implements %d", r.ABIVersion, abi.Version))
			}
		}
	}
	if !wantSigs {
		return
	}
	if _, err := inst.Export(abi.ExportSignatures, nil, []sandbox.ValType{sandbox.I32}); err != nil {
		return
	}
	r.SignatureSource = "export"
	table, err := sandbox.ReadSignatureTable(ctx, inst)
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
		return
	}
	*sigs = table
}

// onlyUnprovidedImports reports load problems that are all imports the
// host does not provide (the load check's wording).
func onlyUnprovidedImports(problems []string) bool {
	for _, p := range problems {
		if !strings.Contains(p, "which the host does not provide") {
			return false
		}
	}
	return len(problems) > 0
}

func splitErrors(err error) []string {
	var me *sandbox.ModuleError
	if errors.As(err, &me) {
		err = me.Err
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, e.Error())
		}
		return out
	}
	return []string{err.Error()}
}

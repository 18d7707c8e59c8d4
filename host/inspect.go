package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/internal/sandbox"
	"github.com/seed4b3e0ccb/callbox/internal/sandbox/wazero"
	"github.com/seed4b3e0ccb/callbox/internal/wasmbin"
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

// Inspect reads a module and, when it passes the load check that Load
// applies (with the default limits, WASI granted if the module imports
// it), asks it in a sandbox for its ABI version and signatures. A module
// that would not load is never compiled or run: its problems are listed
// instead. Inspect never fails on an ABI violation, and never panics, on
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
	wasi := false
	for _, imp := range m.Imports {
		if imp.Module == sandbox.WASIModule {
			wasi = true
		}
	}
	var sigs map[string]*abi.Signature
	if secs := m.Custom[abi.SignatureSection]; len(secs) > 0 {
		r.SignatureSource = "custom section"
		sigs, err = abi.ParseSignatureTable(joinSections(secs))
		if err != nil {
			r.Problems = append(r.Problems, fmt.Sprintf("custom section %s: %v", abi.SignatureSection, err))
		}
	}
	var exports []string
	for _, e := range m.Exports {
		if e.Kind != wasmbin.KindFunc || e.Func == nil || !funcType(e.Func).Equal(sandbox.FuncType{Params: callbackSig[0], Results: callbackSig[1]}) {
			continue
		}
		if _, abiExport := exportSigs[e.Name]; abiExport {
			continue
		}
		exports = append(exports, e.Name)
	}
	sort.Strings(exports)

	cb := config.DefaultCallback()
	cb.Name, cb.Module = "inspect", "<inspect>"
	cb.Export = abi.ExportVersion // any export: checkModule needs one name
	if len(exports) > 0 {
		cb.Export = exports[0]
	}
	if wasi {
		cb.WASI = config.WASIMinimal
	}
	// The load path's own check, before anything compiles the module.
	// A module the check refuses is never compiled, except one refused
	// only for imports the host does not provide: probe reads its version
	// and signatures with those imports stubbed out.
	if _, err := checkLoad(wasm, cb); err != nil {
		problems := splitErrors(err)
		r.Problems = append(r.Problems, problems...)
		if onlyUnprovidedImports(problems) {
			r.probe(ctx, wasm, m, cb, sigs == nil, &sigs)
		}
	} else {
		r.probe(ctx, wasm, m, cb, sigs == nil, &sigs)
	}
	for _, name := range exports {
		r.Callbacks = append(r.Callbacks, CallbackReport{Export: name, Signature: sigs[name]})
	}
	return r, nil
}

// probe instantiates the module to call callbox_abi_version and, when
// wanted, callbox_signatures.
func (r *ModuleReport) probe(ctx context.Context, wasm []byte, m *wasmbin.Module, cb config.Callback, wantSigs bool, sigs *map[string]*abi.Signature) {
	eng, err := wazero.New(ctx, wazero.Options{})
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
	if err != nil {
		// Still read the version and signatures when only the imports
		// stand in the way (the problem is already listed).
		stub, serr := stubbedInstance(ctx, wasm, m, cb)
		if serr != nil {
			r.Problems = append(r.Problems, err.Error())
			return
		}
		inst, r.Stubbed = stub, true
	}
	g := &guest{inst: inst}
	defer g.close(ctx)
	if init, err := inst.Export(abi.ExportInitialize, nil, nil); err == nil {
		if err := inst.Call(ctx, init, g.stack[:0]); err != nil {
			r.Problems = append(r.Problems, fmt.Sprintf("%s: %v", abi.ExportInitialize, err))
			return
		}
	}
	if ver, err := inst.Export(abi.ExportVersion, nil, []sandbox.ValType{i32}); err == nil {
		if err := inst.Call(ctx, ver, g.stack[:1]); err != nil {
			r.Problems = append(r.Problems, fmt.Sprintf("%s: %v", abi.ExportVersion, err))
		} else {
			r.ABIVersion = int32(uint32(g.stack[0]))
			if r.ABIVersion != abi.Version {
				r.Problems = append(r.Problems, fmt.Sprintf("reports ABI version %d, this host implements %d", r.ABIVersion, abi.Version))
			}
		}
	}
	if !wantSigs {
		return
	}
	if _, err := inst.Export(abi.ExportSignatures, nil, []sandbox.ValType{i32}); err != nil {
		return
	}
	r.SignatureSource = "export"
	table, err := g.readSignatureTable(ctx)
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
		return
	}
	*sigs = table
}

// onlyUnprovidedImports reports load problems that are all imports the
// host does not provide (checkModule's wording).
func onlyUnprovidedImports(problems []string) bool {
	for _, p := range problems {
		if !strings.Contains(p, "which the host does not provide") {
			return false
		}
	}
	return len(problems) > 0
}

func splitErrors(err error) []string {
	var ke *kindError
	if errors.As(err, &ke) {
		err = ke.err
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

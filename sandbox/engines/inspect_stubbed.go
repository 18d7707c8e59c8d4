package engines

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/core"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/validate"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/wasmbin"
)

// stubbedInstance instantiates, for Inspect only, a module that the host
// cannot instantiate because it imports something the host does not
// provide (an AssemblyScript module built without the SDK's abort hook
// imports env.abort): every function import is provided by a stub that
// traps when called, so callbox_abi_version and callbox_signatures, which
// do not call imports, can still be read. It runs under the callback
// defaults' memory limit and timeout on wazero's interpreter. It returns
// nil when the module imports something other than functions of known
// type.
func stubbedInstance(ctx context.Context, wasm []byte, m *wasmbin.Module, cb config.Callback) (sandbox.Instance, error) {
	provided := map[string]bool{}
	for _, hf := range core.HostFuncs(cb.WASI == config.WASIMinimal) {
		provided[hf.Module+"."+hf.Name] = true
	}
	missing := false
	for _, imp := range m.Imports {
		if imp.Kind != wasmbin.KindFunc || imp.Func == nil {
			return nil, fmt.Errorf("imports %s.%s, which cannot be stubbed", imp.Module, imp.Name)
		}
		missing = missing || !provided[imp.Module+"."+imp.Name]
	}
	if !missing {
		// The instantiation failed for another reason (a trapping or
		// endless start function): nothing to work around.
		return nil, errors.New("every import is provided")
	}
	rcfg := wazero.NewRuntimeConfigInterpreter().WithCoreFeatures(validate.WazeroFeatures).WithCloseOnContextDone(true)
	if pages := cb.Limits.MaxMemory / abi.PageSize; pages > 0 && pages <= 65536 {
		rcfg = rcfg.WithMemoryLimitPages(uint32(pages))
	}
	rt := wazero.NewRuntimeWithConfig(ctx, rcfg)
	byModule := map[string][]wasmbin.Import{}
	var names []string
	for _, imp := range m.Imports {
		if _, ok := byModule[imp.Module]; !ok {
			names = append(names, imp.Module)
		}
		byModule[imp.Module] = append(byModule[imp.Module], imp)
	}
	slices.Sort(names)
	for _, mod := range names {
		b := rt.NewHostModuleBuilder(mod)
		for _, imp := range byModule[mod] {
			full := imp.Module + "." + imp.Name
			b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) {
				panic(fmt.Errorf("inspect: the module called %s, which inspect stubs out", full))
			}), valueTypes(imp.Func.Params), valueTypes(imp.Func.Results)).Export(imp.Name)
		}
		if _, err := b.Instantiate(ctx); err != nil {
			_ = rt.Close(ctx)
			return nil, err
		}
	}
	ictx := ctx
	if cb.Limits.Timeout > 0 {
		var cancel context.CancelFunc
		ictx, cancel = context.WithTimeout(ctx, cb.Limits.Timeout)
		defer cancel()
	}
	mod, err := instantiateRecovering(ictx, rt, wasm)
	if err != nil {
		_ = rt.Close(ctx)
		return nil, err
	}
	limits := cb.Limits
	return &stubInstance{rt: rt, mod: mod, state: core.NewGuestState(&limits, nil), deadline: sandbox.Deadline(time.Now(), cb.Limits.Timeout)}, nil
}

// instantiateRecovering compiles and instantiates on wazero, a panic in
// either (its validator's, its memory allocator's) being a failure.
func instantiateRecovering(ctx context.Context, rt wazero.Runtime, wasm []byte) (mod api.Module, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("wazero panicked: %v", r)
		}
	}()
	return rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName("inspect").WithStartFunctions())
}

func valueTypes(vs []byte) []api.ValueType {
	out := make([]api.ValueType, len(vs))
	for i, v := range vs {
		out[i] = api.ValueType(v)
	}
	return out
}

// stubInstance is a Instance over a plain wazero module, for
// Inspect's probe calls only.
type stubInstance struct {
	rt       wazero.Runtime
	mod      api.Module
	state    *core.GuestState
	deadline time.Time // one for the whole probe, as at load
}

// SetDeadline implements Instance.
func (s *stubInstance) SetDeadline(d time.Time) { s.deadline = d }

func (s *stubInstance) Export(name string, params, results []sandbox.ValType) (sandbox.Function, error) {
	fn := s.mod.ExportedFunction(name)
	if fn == nil {
		return nil, sandbox.MissingExport(name)
	}
	d := fn.Definition()
	got := sandbox.FuncType{Params: valTypesOf(d.ParamTypes()), Results: valTypesOf(d.ResultTypes())}
	if err := sandbox.CheckExport(name, got, sandbox.FuncType{Params: params, Results: results}); err != nil {
		return nil, err
	}
	return fn, nil
}

func valTypesOf(vs []api.ValueType) []sandbox.ValType {
	out := make([]sandbox.ValType, len(vs))
	for i, v := range vs {
		out[i] = sandbox.ValType(v)
	}
	return out
}

func (s *stubInstance) Call(ctx context.Context, fn sandbox.Function, stack []uint64) error {
	f, ok := fn.(api.Function)
	if !ok {
		return errors.New("not a function of this instance")
	}
	if !s.deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, s.deadline)
		defer cancel()
	}
	return f.CallWithStack(ctx, stack)
}

func (s *stubInstance) Memory() []byte {
	mem := s.mod.Memory()
	if mem == nil {
		return nil
	}
	b, _ := mem.Read(0, mem.Size())
	return b
}

func (s *stubInstance) LastCall() sandbox.CallReport    { return s.state.Report() }
func (s *stubInstance) FuelConsumed() (uint64, bool)    { return 0, false }
func (s *stubInstance) Close(ctx context.Context) error { return s.rt.Close(ctx) }

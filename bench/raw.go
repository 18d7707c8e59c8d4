package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/sandbox"
)

// The raw engines: kernels.wasm instantiated without callbox, called
// through its raw entry points (scale_raw, matmul_raw, softmax_raw) with
// the inputs written into guest memory by hand and the output read back —
// the best an embedder could do without callbox: no call frame, no checks,
// no metering, no timeout.
//
//   - wazero: a plain wazero runtime (no WithCloseOnContextDone, no
//     load-time metering), api.Function.CallWithStack on functions resolved
//     once, memory through the api.Memory.Read view.
//   - wasmtime: callbox's own sandbox/internal/wasmtime Instance.Call, which calls
//     wasmtime_func_call_unchecked through a cgo shim, with no limits set
//     (no timeout, no fuel). It is the cheapest call path into wasmtime we
//     know (wasmtime-go's Func.Call re-reads the function type through cgo
//     and boxes arguments on every call). Its engine has epoch interruption
//     enabled, as every callbox wasmtime engine has, so the compiled code
//     carries the epoch checks callbox's does.
//   - wazero, metered (a diagnostic): the same calls through callbox's
//     sandbox/internal/wazero Instance.Call with no limits, on the module as callbox
//     runs it (rewritten at load for metering): the metering's own cost,
//     without callbox's frame, checks and copies.

// rawKernels are the raw exports, in rawInstance.call's numbering.
var rawKernels = map[string]int{"scale": 0, "matmul": 1, "softmax": 2}

var rawExports = []struct {
	name   string
	params []sandbox.ValType
}{
	{"scale_raw", []sandbox.ValType{sandbox.I32, sandbox.I32, sandbox.I32, sandbox.F32}},
	{"matmul_raw", []sandbox.ValType{sandbox.I32, sandbox.I32, sandbox.I32, sandbox.I32, sandbox.I32, sandbox.I32}},
	{"softmax_raw", []sandbox.ValType{sandbox.I32, sandbox.I32, sandbox.I32, sandbox.I32}},
}

// rawInstance is one instance of kernels.wasm with its raw exports.
type rawInstance interface {
	// call runs raw export k (rawKernels) with stack as its parameters.
	call(ctx context.Context, k int, stack []uint64) error
	// memory is a view of the whole linear memory, valid until the next call.
	memory() []byte
	alloc(ctx context.Context, size uint32) (uint32, error)
	free(ctx context.Context, ptr, size uint32) error
	close(ctx context.Context) error
}

// rawWazero is kernels.wasm on a plain wazero runtime.
type rawWazero struct {
	rt      wazero.Runtime
	mod     api.Module
	mem     api.Memory
	fns     [3]api.Function
	allocFn api.Function
	freeFn  api.Function
	stack   [3]uint64
}

func newRawWazero(ctx context.Context, wasm []byte) (*rawWazero, error) {
	rt := wazero.NewRuntime(ctx)
	r := &rawWazero{rt: rt}
	fail := func(err error) (*rawWazero, error) {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("raw wazero: %w", err)
	}
	// The module's only import; the raw entry points never call it.
	_, err := rt.NewHostModuleBuilder(abi.ImportModule).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) {}),
		[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, nil).Export(abi.ImportError).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) {}),
		[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}, nil).Export(abi.ImportLog).
		Instantiate(ctx)
	if err != nil {
		return fail(err)
	}
	r.mod, err = rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName("kernels"))
	if err != nil {
		return fail(err)
	}
	r.mem = r.mod.Memory()
	for i, e := range rawExports {
		if r.fns[i] = r.mod.ExportedFunction(e.name); r.fns[i] == nil {
			return fail(fmt.Errorf("export %s is missing", e.name))
		}
	}
	r.allocFn, r.freeFn = r.mod.ExportedFunction(abi.ExportAlloc), r.mod.ExportedFunction(abi.ExportFree)
	if r.allocFn == nil || r.freeFn == nil {
		return fail(errors.New("callbox_alloc or callbox_free is missing"))
	}
	return r, nil
}

func (r *rawWazero) call(ctx context.Context, k int, stack []uint64) error {
	return r.fns[k].CallWithStack(ctx, stack)
}

func (r *rawWazero) memory() []byte {
	b, _ := r.mem.Read(0, r.mem.Size())
	return b
}

func (r *rawWazero) alloc(ctx context.Context, size uint32) (uint32, error) {
	r.stack[0], r.stack[1] = uint64(size), abi.DataAlign
	if err := r.allocFn.CallWithStack(ctx, r.stack[:]); err != nil {
		return 0, err
	}
	if r.stack[0] == 0 {
		return 0, fmt.Errorf("callbox_alloc(%d) returned 0", size)
	}
	return uint32(r.stack[0]), nil
}

func (r *rawWazero) free(ctx context.Context, ptr, size uint32) error {
	r.stack[0], r.stack[1], r.stack[2] = uint64(ptr), uint64(size), abi.DataAlign
	return r.freeFn.CallWithStack(ctx, r.stack[:])
}

func (r *rawWazero) close(ctx context.Context) error { return r.rt.Close(ctx) }

// rawSandbox is kernels.wasm on one of callbox's sandbox engines, with no
// limits.
type rawSandbox struct {
	eng     sandbox.Engine
	mod     sandbox.Module
	inst    sandbox.Instance
	fns     [3]sandbox.Function
	allocFn sandbox.Function
	freeFn  sandbox.Function
	stack   [3]uint64
}

// newRawSandbox instantiates kernels.wasm on one of callbox's engines:
// wasmtime for the raw wasmtime variant, wazero for the metered-raw
// diagnostic (the same calls on the load-time metered module).
func newRawSandbox(ctx context.Context, engine string, wasm []byte, cacheDir string) (*rawSandbox, error) {
	eng, err := newEngine(ctx, engine, cacheDir)
	if err != nil {
		return nil, err
	}
	r := &rawSandbox{eng: eng}
	fail := func(err error) (*rawSandbox, error) {
		_ = r.close(ctx)
		return nil, fmt.Errorf("raw %s: %w", engine, err)
	}
	r.mod, err = sandbox.Compile(ctx, eng, wasm, sandbox.ModuleConfig{Name: "kernels", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fail(err)
	}
	if r.inst, err = r.mod.Instantiate(ctx, time.Time{}); err != nil {
		return fail(err)
	}
	for i, e := range rawExports {
		if r.fns[i], err = r.inst.Export(e.name, e.params, nil); err != nil {
			return fail(err)
		}
	}
	i32 := sandbox.I32
	if r.allocFn, err = r.inst.Export(abi.ExportAlloc, []sandbox.ValType{i32, i32}, []sandbox.ValType{i32}); err != nil {
		return fail(err)
	}
	if r.freeFn, err = r.inst.Export(abi.ExportFree, []sandbox.ValType{i32, i32, i32}, nil); err != nil {
		return fail(err)
	}
	return r, nil
}

func (r *rawSandbox) call(ctx context.Context, k int, stack []uint64) error {
	return r.inst.Call(ctx, r.fns[k], stack)
}

func (r *rawSandbox) memory() []byte { return r.inst.Memory() }

func (r *rawSandbox) alloc(ctx context.Context, size uint32) (uint32, error) {
	r.stack[0], r.stack[1] = uint64(size), abi.DataAlign
	if err := r.inst.Call(ctx, r.allocFn, r.stack[:2]); err != nil {
		return 0, err
	}
	if r.stack[0] == 0 {
		return 0, fmt.Errorf("callbox_alloc(%d) returned 0", size)
	}
	return uint32(r.stack[0]), nil
}

func (r *rawSandbox) free(ctx context.Context, ptr, size uint32) error {
	r.stack[0], r.stack[1], r.stack[2] = uint64(ptr), uint64(size), abi.DataAlign
	return r.inst.Call(ctx, r.freeFn, r.stack[:3])
}

func (r *rawSandbox) close(ctx context.Context) error {
	var errs []error
	if r.inst != nil {
		errs = append(errs, r.inst.Close(ctx))
	}
	if r.mod != nil {
		errs = append(errs, r.mod.Close(ctx))
	}
	errs = append(errs, r.eng.Close(ctx))
	return errors.Join(errs...)
}

// rawRunner runs a workload on a raw instance: each call copies the inputs
// into guest buffers, calls the raw export, and copies the output out.
func rawRunner(ctx context.Context, inst rawInstance, d *data) (*runner, error) {
	var regions []abi.Region
	free := func() {
		for _, r := range regions {
			_ = inst.free(ctx, r.Off, r.Len)
		}
	}
	for _, in := range d.inputs {
		off, err := inst.alloc(ctx, uint32(4*len(in)))
		if err != nil {
			free()
			return nil, err
		}
		regions = append(regions, abi.Region{Off: off, Len: uint32(4 * len(in))})
	}
	out := make([]float32, d.outLen())
	outBytes := bytesOf(out)
	outOff, err := inst.alloc(ctx, uint32(len(outBytes)))
	if err != nil {
		free()
		return nil, err
	}
	regions = append(regions, abi.Region{Off: outOff, Len: uint32(len(outBytes))})

	k := rawKernels[d.w.Kernel]
	var stack [6]uint64
	var params []uint64
	switch d.w.Kernel {
	case "scale":
		stack = [6]uint64{uint64(regions[0].Off), uint64(outOff), uint64(d.w.Dims[0]), api.EncodeF32(d.factor)}
		params = stack[:4]
	case "matmul":
		stack = [6]uint64{uint64(regions[0].Off), uint64(regions[1].Off), uint64(outOff), uint64(d.w.Dims[0]), uint64(d.w.Dims[1]), uint64(d.w.Dims[2])}
		params = stack[:6]
	case "softmax":
		stack = [6]uint64{uint64(regions[0].Off), uint64(outOff), uint64(d.w.Dims[0]), uint64(d.w.Dims[1])}
		params = stack[:4]
	}
	call := make([]uint64, len(params))
	one := func() error {
		mem := inst.memory()
		for i, in := range d.inputs {
			copy(mem[regions[i].Off:regions[i].End()], bytesOf(in))
		}
		copy(call, params)
		if err := inst.call(ctx, k, call); err != nil {
			return err
		}
		mem = inst.memory()
		copy(outBytes, mem[outOff:uint64(outOff)+uint64(len(outBytes))])
		return nil
	}
	return &runner{
		op:     repeat(d.w.Calls, one),
		output: func() []float32 { return out },
		close:  free,
	}, nil
}

// repeat runs fn n times, stopping at the first error.
func repeat(n int, fn func() error) func() error {
	if n == 1 {
		return fn
	}
	return func() error {
		for i := 0; i < n; i++ {
			if err := fn(); err != nil {
				return err
			}
		}
		return nil
	}
}

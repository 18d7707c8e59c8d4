//go:build cgo

package bench

import (
	"context"
	"fmt"
	"math"

	wt "github.com/bytecodealliance/wasmtime-go/v39"
)

// rawLoopsWasmtimePlain is loops.wasm on a wasmtime engine with callbox's
// settings (Cranelift at OptLevelSpeed) but without epoch interruption,
// through wasmtime-go: what the loops cost on wasmtime when nothing can
// stop them.
type rawLoopsWasmtimePlain struct {
	eng   *wt.Engine
	store *wt.Store
	inst  *wt.Instance
	mem   *wt.Memory
}

func newRawLoopsWasmtimePlain(wasm []byte) (rawLoopInstance, error) {
	cfg := wt.NewConfig()
	cfg.SetCraneliftOptLevel(wt.OptLevelSpeed)
	eng := wt.NewEngineWithConfig(cfg)
	store := wt.NewStore(eng)
	mod, err := wt.NewModule(eng, wasm)
	if err != nil {
		return nil, fmt.Errorf("raw wasmtime: %w", err)
	}
	inst, err := wt.NewInstance(store, mod, nil)
	if err != nil {
		return nil, fmt.Errorf("raw wasmtime: %w", err)
	}
	ext := inst.GetExport(store, "memory")
	if ext == nil || ext.Memory() == nil {
		return nil, fmt.Errorf("raw wasmtime: no memory export")
	}
	return &rawLoopsWasmtimePlain{eng: eng, store: store, inst: inst, mem: ext.Memory()}, nil
}

func (r *rawLoopsWasmtimePlain) call(_ context.Context, name string, params []uint64) error {
	f := r.inst.GetFunc(r.store, name)
	if f == nil {
		return fmt.Errorf("export %s is missing", name)
	}
	ty := f.Type(r.store).Params()
	args := make([]any, len(params))
	for i, p := range params {
		if ty[i].Kind() == wt.KindF32 {
			args[i] = math.Float32frombits(uint32(p))
		} else {
			args[i] = int32(uint32(p))
		}
	}
	v, err := f.Call(r.store, args...)
	if err != nil {
		return err
	}
	if x, ok := v.(int32); ok && len(params) > 0 {
		params[0] = uint64(uint32(x))
	}
	return nil
}

func (r *rawLoopsWasmtimePlain) memory() []byte { return r.mem.UnsafeData(r.store) }

func (r *rawLoopsWasmtimePlain) close() { r.store.Close(); r.eng.Close() }

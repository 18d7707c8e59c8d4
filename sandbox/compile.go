package sandbox

import (
	"context"
	"fmt"
	"strings"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/wasmbin"
)

// Compile is the one way modules are compiled, on every engine and every
// path (Load, Inspect, the process worker, benchmarks): it validates the
// module as its author built it (Engine.Validate: an invalid module is
// refused here, before any rewrite could make it valid), gives every table
// the module defines a maximum (abi.MaxTableElements in all,
// wasmbin.LimitTables), since wazero has no table limit of its own and
// would let table.grow allocate up to 32 GiB of host memory, then hands the
// bytes to the engine with the original module's sha256, the key of the
// engines' caches. wasm must have passed the host's load check (tables
// within abi.MaxTableElements).
func Compile(ctx context.Context, e Engine, wasm []byte, cfg ModuleConfig) (Module, error) {
	cfg.SHA256 = ModuleSum(wasm, cfg)
	if err := e.Validate(ctx, wasm, cfg.SHA256); err != nil {
		return nil, err
	}
	limited, err := wasmbin.LimitTables(wasm, abi.MaxTableElements)
	if err != nil {
		return nil, err
	}
	return e.Compile(ctx, limited, cfg)
}

// FuncType is a function type in the engine layer's terms.
type FuncType struct {
	Params, Results []ValType
}

func (t FuncType) String() string {
	name := func(vs []ValType) string {
		s := make([]string, len(vs))
		for i, v := range vs {
			s[i] = v.String()
		}
		return strings.Join(s, ", ")
	}
	return "(" + name(t.Params) + ") -> (" + name(t.Results) + ")"
}

// Equal reports whether two function types are the same.
func (t FuncType) Equal(o FuncType) bool {
	return sameVals(t.Params, o.Params) && sameVals(t.Results, o.Results)
}

func sameVals(a, b []ValType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// MemoryLimitMessage is the message of a MemoryLimit failure; then says
// how the guest failed after hitting the limit.
func MemoryLimitMessage(limit uint64, then string) string {
	return fmt.Sprintf("memory limit of %s reached (%s)", config.FormatSize(limit), then)
}

// A guest's log line (callbox.log, WASI stdout or stderr) is a record
// whose message is GuestLogMessage, with GuestSourceKey = GuestSource and
// the guest's text under GuestTextKey.
const (
	GuestLogMessage = "guest log"
	GuestSourceKey  = "source"
	GuestSource     = "guest"
	GuestTextKey    = "text"
)

// CheckExport is the export type check, the same on every engine and in
// the host's load check: nil when export name has type got, else the error
// naming both types.
func CheckExport(name string, got, want FuncType) error {
	if got.Equal(want) {
		return nil
	}
	return fmt.Errorf("export %s has type %s, want %s", name, got, want)
}

// MissingExport is the error of an export the module does not have (or
// has as something other than a function).
func MissingExport(name string) error {
	return fmt.Errorf("export %s is missing", name)
}

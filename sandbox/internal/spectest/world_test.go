package spectest

import (
	"errors"
	"strings"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/meter"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/wasmbin"
)

// world runs one script's commands on one engine configuration: one
// store (or runtime) in which modules are instantiated, registered for
// later modules to import, and invoked.
type world interface {
	// load compiles and instantiates a module, known to later commands
	// by name (a script's $name; "" for none) and importable under as
	// (a register command's name; "" for none). It returns "" when the
	// module loaded, else the failure's outcome.
	load(wasm []byte, name, as string) string
	// compiles reports whether the configuration's rewrite and compile,
	// without callbox's validation, accept wasm.
	compiles(wasm []byte) bool
	// invoke calls an export of the named module ("": the last loaded)
	// and returns its results, or the failure's outcome.
	invoke(module, field string, args []val) ([]val, string)
	// get reads an exported global.
	get(module, field string) (val, string)
	close()
}

// config is one way of running the suite: an engine, with or without
// callbox's rewrites.
type config struct {
	name string
	// rewrite turns a module into what the engine compiles; nil runs it
	// as it is.
	rewrite func([]byte) ([]byte, error)
	open    func(cfg config) world
	// canonicalNaN: the rewrite canonicalizes NaNs (deterministic mode),
	// so a NaN result may differ from the plain engine's by being the
	// canonical NaN.
	canonicalNaN bool
}

// rewriter is engine.Compile's rewrite path for one engine's meter
// options: the table limit, then the meter. runPlainIfUnsupported mirrors
// wasmtime without fuel, which runs a module the meter cannot rewrite as
// it is. A module that imports a table without a maximum gets the meter
// alone: LimitTables refuses it, as callbox's load check refuses every
// module that imports a table (the host provides only functions), and
// the suite's linking scripts need it.
func rewriter(opts meter.Options, runPlainIfUnsupported bool) func([]byte) ([]byte, error) {
	return func(wasm []byte) ([]byte, error) {
		limited, err := wasmbin.LimitTables(wasm, abi.MaxTableElements)
		if err != nil && strings.Contains(err.Error(), "imports a table") {
			limited, err = wasm, nil
		}
		if err != nil {
			return nil, err
		}
		out, err := meter.Instrument(limited, opts)
		if err != nil && runPlainIfUnsupported && errors.Is(err, meter.ErrUnsupported) {
			return limited, nil
		}
		return out, err
	}
}

// The outcome of a failed load or call, by kind; engines name their
// traps differently, so each world maps its own onto these.
const (
	outInvalid     = "invalid"      // refused at compile
	outUnlinkable  = "unlinkable"   // an import could not be satisfied
	outRewrite     = "rewrite-fail" // callbox's rewrite refused a valid module
	outExhaustion  = "trap:stack"
	outMemory      = "trap:memory"
	outTable       = "trap:table"
	outSignature   = "trap:signature"
	outUnreachable = "trap:unreachable"
	outOverflow    = "trap:integer-overflow"
	outDivide      = "trap:divide-by-zero"
	outConversion  = "trap:conversion"
	outOther       = "trap:other"
)

// specTrap is the outcome the script's trap text names.
func specTrap(text string) string {
	switch {
	case strings.HasPrefix(text, "out of bounds memory access"):
		return outMemory
	case strings.HasPrefix(text, "out of bounds table access"), strings.HasPrefix(text, "undefined element"),
		strings.HasPrefix(text, "uninitialized element"):
		return outTable
	case strings.HasPrefix(text, "indirect call type mismatch"):
		return outSignature
	case strings.HasPrefix(text, "unreachable"):
		return outUnreachable
	case strings.HasPrefix(text, "integer overflow"):
		return outOverflow
	case strings.HasPrefix(text, "integer divide by zero"):
		return outDivide
	case strings.HasPrefix(text, "invalid conversion to integer"):
		return outConversion
	case strings.HasPrefix(text, "call stack exhausted"):
		return outExhaustion
	}
	return outOther
}

// The meter's host functions, as a test gives them: the refill grants a
// small slice each time (so long loops refill often), the overflow stops
// the guest, a refused grow is only noted.
const refillSlice = 10_000

func refill(budget int64) int64 {
	if next := budget + refillSlice; next > 0 {
		return next
	}
	return refillSlice
}

// errMeterOverflow is the metered stack's overflow, a stack exhaustion.
var errMeterOverflow = errors.New("spectest: the meter's stack limit")

// spectestModule is the module the suite's scripts import as "spectest".
const spectestModule = `(module
  (global (export "global_i32") i32 (i32.const 666))
  (global (export "global_i64") i64 (i64.const 666))
  (global (export "global_f32") f32 (f32.const 666.6))
  (global (export "global_f64") f64 (f64.const 666.6))
  (table (export "table") 10 20 funcref)
  (memory (export "memory") 1 2)
  (func (export "print"))
  (func (export "print_i32") (param i32))
  (func (export "print_i64") (param i64))
  (func (export "print_f32") (param f32))
  (func (export "print_f64") (param f64))
  (func (export "print_i32_f32") (param i32 f32))
  (func (export "print_f64_f64") (param f64 f64)))`

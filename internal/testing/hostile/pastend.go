package hostile

import (
	"fmt"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
)

// PastEnd is a module that names an item of some kind one past its own:
// a global, a label, a type, a function or a local that callbox's
// rewrites add to every module they meter, or an import of the meter's
// own host functions. As its author built it, the module is invalid (or,
// for the import, asks for what the host does not provide); after the
// meter's rewrite the index would name what the host added, and the
// module would reach, for example, its own budget. Each must be refused
// at load, on every engine, with or without fuel, in every isolation.
type PastEnd struct {
	// Name is the kind of item named ("global", "label", ...).
	Name string
	// What the module does, for messages.
	What string
	// Kind is the load's failure kind: InvalidArgument (the validators
	// refuse it) or ABIViolation (the load check refuses an import).
	Kind abi.Kind
	// Msg is part of the load's message.
	Msg string
	// MeterMakesValid says which rewrite (by its options' Meter flag)
	// would turn the module valid: the evidence that the case reaches
	// something the host added. Unset for the import.
	MeterMakesValid bool
	// Wasm is the module.
	Wasm []byte
}

// pastEndModule is an ABI v1 module with three types (version, alloc,
// callback), one global, one table entry and the callback "run" whose
// body is body (plus extra definitions).
func pastEndModule(extra, body string) []byte {
	return wat.MustUnchecked(fmt.Sprintf(`(module
  (type $version (func (result i32)))
  (type $alloc (func (param i32 i32) (result i32)))
  (type $cb (func (param i32) (result i32)))
  %s
  (memory (export "memory") 1)
  (table 1 funcref)
  (global $g (mut i32) (i32.const 0))
  (func (export "callbox_abi_version") (type $version) (i32.const 1))
  (func (export "callbox_alloc") (type $alloc) (i32.const 1024))
  (func $spin (type $version) (loop $l (br $l)) (i32.const 0))
  (func (export "run") (type $cb)
    %s))`, extra, body))
}

// PastEndCases lists a module for each kind of item the host adds.
func PastEndCases() []PastEnd {
	return []PastEnd{
		{Name: "global", What: "writes the largest i64 into global 1 (the meter's budget once added), then spins",
			Kind: abi.InvalidArgument, Msg: "invalid global index", MeterMakesValid: true,
			Wasm: pastEndModule("", `(global.set 1 (i64.const 0x7fffffffffffffff)) (drop (call $spin)) (i32.const 0)`)},
		{Name: "label", What: "branches one label past its body (the meter's wrapper block once added)",
			Kind: abi.InvalidArgument, Msg: "invalid br operation: index out of range", MeterMakesValid: true,
			Wasm: pastEndModule("", `(i32.const 0) (br 1)`)},
		{Name: "type", What: "call_indirect through type 3 of its 3 (the meter's refill type once added)",
			Kind: abi.InvalidArgument, Msg: "invalid type index at call_indirect: 3", MeterMakesValid: true,
			Wasm: pastEndModule("", `(drop (call_indirect (type 3) (i64.const 1) (i32.const 0))) (i32.const 0)`)},
		{Name: "function", What: "calls function 4 of its 4 (the meter's grow hook once added)",
			Kind: abi.InvalidArgument, Msg: "invalid function index", MeterMakesValid: true,
			Wasm: pastEndModule("", `(call 4 (i32.const 1))`)},
		{Name: "local", What: "reads local 1 of its 1 in a loop (the meter's cached budget once added)",
			Kind: abi.InvalidArgument, Msg: "invalid local index for local.get 1", MeterMakesValid: true,
			Wasm: pastEndModule("", `(loop $l (drop (local.get 1)) (br_if $l (i32.eqz (local.get 0)))) (i32.const 0)`)},
		{Name: "import", What: "imports the meter's refill itself and calls it",
			Kind: abi.ABIViolation, Msg: "imports callbox_meter.refill, which the host does not provide",
			Wasm: wat.Must(`(module
  (import "callbox_meter" "refill" (func $refill (param i64) (result i64)))
  (memory (export "memory") 1)
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 1024))
  (func (export "run") (param i32) (result i32) (drop (call $refill (i64.const 0x7fffffffffffffff))) (i32.const 0)))`)},
	}
}

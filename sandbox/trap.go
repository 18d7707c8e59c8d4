package sandbox

import (
	"errors"
	"fmt"
	"strings"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// Frame is one wasm stack frame of a trap, as far as the engine reports it.
type Frame struct {
	Module    string // module name, if known
	Func      string // function name from the name section, if any
	FuncIndex uint32 // function index in the module
	Offset    uint64 // byte offset of the instruction in the module, if known
}

func (f Frame) String() string {
	name := f.Func
	if name == "" {
		name = fmt.Sprintf("func[%d]", f.FuncIndex)
	}
	if f.Offset != 0 {
		return fmt.Sprintf("%s @0x%x", name, f.Offset)
	}
	return name
}

// Trap is a classified failure from an engine: a kind from the taxonomy, a
// message, and the wasm frames where the engine gives them. Cause is the
// engine's own error, kept for debugging.
type Trap struct {
	Class   abi.Kind
	Message string
	Frames  []Frame
	Cause   error
}

func (t *Trap) Error() string {
	if t.Message == "" {
		return t.Class.String()
	}
	return t.Message
}

// Kind implements abi.Kinder.
func (t *Trap) Kind() abi.Kind { return t.Class }

// Unwrap returns the engine's error.
func (t *Trap) Unwrap() error { return t.Cause }

// Is matches the trap's kind: errors.Is(err, abi.Timeout).
func (t *Trap) Is(target error) bool { return abi.IsKind(t.Class, target) }

// FormatFrames renders frames one per line, innermost first.
func FormatFrames(frames []Frame) string {
	var b strings.Builder
	for i, f := range frames {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("  at " + f.String())
	}
	return b.String()
}

// AsTrap returns the first *Trap in err's chain.
func AsTrap(err error) (*Trap, bool) {
	var t *Trap
	ok := errors.As(err, &t)
	return t, ok
}

// InvalidModuleError is a module an engine's validator refused as its
// author built it: malformed (it does not decode) or invalid (it does not
// type-check under callbox's features). The host refuses it at load as
// InvalidArgument; nothing rewrites or compiles it.
type InvalidModuleError struct {
	// Validator names what refused it: "wazero's validator",
	// "wasmtime's validator", or "callbox's reader" (the bounded parser
	// that keeps decoder bombs from the engines, and refuses what
	// callbox's features leave out that wazero does not check).
	Validator string
	Err       error
}

func (e *InvalidModuleError) Error() string {
	return fmt.Sprintf("not a valid WebAssembly module (%s): %v", e.Validator, e.Err)
}

func (e *InvalidModuleError) Unwrap() error { return e.Err }

// ErrNotStarted is the cause of a WorkerDied trap whose call never
// reached its worker (the worker had died first): nothing of the call
// ran, so the host may run it again on a new worker.
var ErrNotStarted = errors.New("the call did not start")

// Detail keeps an error's text in a chain without its kind: a trap that
// is the cause of another kind's trap (the engine's abort under a
// timeout, the trap after a refused memory.grow under MemoryLimit) is
// kept as a Detail, so that errors.Is matches the outer trap's kind and
// no other. errors.Is and errors.As still reach what the detail wraps,
// past every kind (a context's error, an engine's own error).
type Detail struct {
	text string
	next error
}

func (d *Detail) Error() string { return d.text }

// Unwrap is what the kindless error wrapped, itself kept kindless.
func (d *Detail) Unwrap() error { return d.next }

// Kindless returns err with every kind in its chain turned into a Detail
// (its text kept, its kind gone); err itself when nothing in its chain
// has a kind.
func Kindless(err error) error {
	if err == nil || !hasKind(err) {
		return err
	}
	var next error
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		next = Kindless(u.Unwrap())
	case interface{ Unwrap() []error }:
		var errs []error
		for _, e := range u.Unwrap() {
			errs = append(errs, Kindless(e))
		}
		next = errors.Join(errs...)
	}
	return &Detail{text: err.Error(), next: next}
}

// hasKind reports whether err or anything it wraps carries a kind.
func hasKind(err error) bool {
	if err == nil {
		return false
	}
	switch err.(type) {
	case abi.Kinder, abi.Kind:
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return hasKind(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if hasKind(e) {
				return true
			}
		}
	}
	return false
}

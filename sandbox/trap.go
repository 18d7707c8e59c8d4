package sandbox

import (
	"errors"
	"fmt"
	"strings"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// Frame is one wasm stack frame of a trap, in the module its author
// built: the function index and byte offset are the original module's
// (mapped back through the meter's rewrite), the name is the name
// section's, demangled (Rust, C++), and File, Line and Column are the
// module's DWARF line table's, where it has one. Every field is
// guest-controlled text or a number the engine reported: names and paths
// are cut to a few hundred bytes and made printable.
type Frame struct {
	Module    string // the import module, for a frame in an imported (host) function
	Func      string // function name, if the module names it
	FuncIndex uint32 // function index in the module
	Offset    uint64 // byte offset of the instruction in the module; 0: unknown
	File      string // source file, where the module has DWARF
	Line      uint32 // source line (from 1); 0: unknown
	Column    uint32 // source column (from 1); 0: unknown
}

// Name is the frame's function as printed: its name, else "module.?" for
// an unnamed import, else "func[N]".
func (f Frame) Name() string {
	switch {
	case f.Func != "":
		return f.Func
	case f.Module != "":
		return f.Module + ".?"
	}
	return fmt.Sprintf("func[%d]", f.FuncIndex)
}

// String is "name (file:line:col) @0xOFF", leaving out what is unknown.
func (f Frame) String() string {
	var b strings.Builder
	b.WriteString(f.Name())
	if f.File != "" {
		b.WriteString(" (" + f.File)
		if f.Line > 0 {
			fmt.Fprintf(&b, ":%d", f.Line)
			if f.Column > 0 {
				fmt.Fprintf(&b, ":%d", f.Column)
			}
		}
		b.WriteByte(')')
	}
	if f.Offset != 0 {
		fmt.Fprintf(&b, " @0x%x", f.Offset)
	}
	return b.String()
}

// FramesInMessage is how many of a trap's innermost frames an error
// message shows (Frames has them all).
const FramesInMessage = 3

// FramesSummary is the innermost FramesInMessage frames of the author's
// code on one line, innermost first ("at f (src/lib.rs:3:5) @0x2a <- g
// <- h"), or "". Frames a failure passes through first that are not the
// author's — imported (host) functions, Rust's panic machinery,
// AssemblyScript's abort — are counted, not shown; Frames has them all.
func FramesSummary(frames []Frame) string {
	skip := 0
	for skip < len(frames) && runtimeFrame(frames[skip]) {
		skip++
	}
	if skip == len(frames) {
		skip = 0
	}
	shown := frames[skip:]
	if len(shown) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("at ")
	for i, f := range shown {
		if i == FramesInMessage {
			fmt.Fprintf(&b, " <- ... (%d more)", len(shown)-i)
			break
		}
		if i > 0 {
			b.WriteString(" <- ")
		}
		b.WriteString(f.String())
	}
	if skip > 0 {
		fmt.Fprintf(&b, "; below %d runtime frame%s", skip, map[bool]string{true: "s"}[skip > 1])
	}
	return b.String()
}

// runtimeFrame reports a frame of the machinery a failure passes through
// on its way out rather than of the author's code: an imported function,
// Rust's panic runtime, AssemblyScript's standard library (~lib/) and
// the abort handler of callbox's AssemblyScript SDK.
func runtimeFrame(f Frame) bool {
	if f.Module != "" || strings.HasSuffix(f.Func, "/callboxAbort") {
		return true
	}
	for _, p := range []string{"std::", "core::", "alloc::", "panic_abort::", "rust_panic", "rust_begin_unwind", "__rust_", "~lib/"} {
		if strings.HasPrefix(f.Func, p) {
			return true
		}
	}
	return false
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

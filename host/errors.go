package host

import (
	"errors"
	"fmt"
	"strings"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/sandbox"
)

// Kind classifies a failed call. Every Kind is an error value usable with
// errors.Is: errors.Is(err, host.Timeout).
type Kind = abi.Kind

// The failure kinds. They are the sandbox taxonomy, shared by both engines,
// plus InvalidArgument for calls the host refuses before the guest runs.
const (
	Timeout              = abi.Timeout
	FuelExhausted        = abi.FuelExhausted
	MemoryLimit          = abi.MemoryLimit
	StackOverflow        = abi.StackOverflow
	Unreachable          = abi.Unreachable
	MemoryOutOfBounds    = abi.MemoryOutOfBounds
	DivideByZero         = abi.DivideByZero
	IntegerOverflow      = abi.IntegerOverflow
	InvalidConversion    = abi.InvalidConversion
	TableOutOfBounds     = abi.TableOutOfBounds
	IndirectCallMismatch = abi.IndirectCallMismatch
	GuestError           = abi.GuestError
	ABIViolation         = abi.ABIViolation
	HostPanic            = abi.HostPanic
	Canceled             = abi.Canceled
	OtherTrap            = abi.OtherTrap
	InvalidArgument      = abi.InvalidArgument
	UnknownCallback      = abi.UnknownCallback
	FailedPrecondition   = abi.FailedPrecondition
	Overloaded           = abi.Overloaded
	WorkerDied           = abi.WorkerDied
)

// Frame is one wasm stack frame of a failure, innermost first, in the
// module its author built: its function's index and name (from the name
// section, demangled for Rust and C++), the instruction's byte offset in
// the module, and its source file, line and column where the module has
// DWARF. A frame in an imported (host) function has Module set. Names and
// paths are the guest's: cut to a few hundred bytes and made printable.
type Frame struct {
	Module    string `json:"module,omitempty"` // the import module, for a frame in an imported function
	Func      string `json:"func"`             // function name, if the module names it
	FuncIndex uint32 `json:"func_index"`       // function index in the module
	Offset    uint64 `json:"offset,omitempty"` // byte offset of the instruction in the module; 0: unknown
	File      string `json:"file,omitempty"`   // source file, where the module has DWARF
	Line      uint32 `json:"line,omitempty"`   // source line; 0: unknown
	Column    uint32 `json:"column,omitempty"` // source column; 0: unknown
}

// String is "name (file:line:col) @0xOFF", leaving out what is unknown.
func (f Frame) String() string { return sandbox.Frame(f).String() }

// Name is the frame's function as String prints it: its name, else
// "module.?" for an unnamed import, else "func[N]".
func (f Frame) Name() string { return sandbox.Frame(f).Name() }

// ErrUnknownCallback is returned for a name no loaded callback has. Its
// kind is UnknownCallback.
var ErrUnknownCallback error = &kindedError{UnknownCallback, "unknown callback"}

// ErrClosed is returned by calls on a closed Host. Its kind is
// FailedPrecondition.
var ErrClosed error = &kindedError{FailedPrecondition, "host is closed"}

// kindedError is a sentinel error with a Kind (abi.Kinder): a bridge to
// another runtime reads the kind, and from it the code, with abi.KindOf.
type kindedError struct {
	kind Kind
	msg  string
}

func (e *kindedError) Error() string { return e.msg }

// Kind is the error's kind (abi.Kinder).
func (e *kindedError) Kind() Kind { return e.kind }

// Is matches the error's kind: errors.Is(err, host.UnknownCallback).
func (e *kindedError) Is(target error) bool { return abi.IsKind(e.kind, target) }

// ErrReplaced is returned by calls on a *Callback that a Reload replaced
// or removed; look the callback up again. Its kind is FailedPrecondition.
var ErrReplaced error = &kindedError{FailedPrecondition, "callback was replaced or removed by a reload"}

// replacedError says which callback a reload retired.
func (c *Callback) replacedError() error {
	return fmt.Errorf("callback %q: %w; look it up again (Host.Lookup)", c.name, ErrReplaced)
}

// ErrChainFailed matches (errors.Is) every error of a call that did not run
// because an earlier call on its chain failed.
var ErrChainFailed = errors.New("chain failed")

// CallbackError is every failure of a call: which callback, where in which
// chain, what kind of failure, and what the guest said.
type CallbackError struct {
	Callback string // callback name
	ID       string // the callback's content-addressed id
	Chain    string // chain name; "" for a call outside a chain
	Seq      uint64 // sequence number in the chain, from 1; 0 outside a chain
	// BatchSize is the size of the batched call (Request.Batch) whose
	// element Element (from 0) failed; 0 for a call that is no batch's
	// element (then Element is 0 too).
	BatchSize int
	Element   int
	kind      Kind
	// Message is the host's description ("timeout after 50ms").
	Message string
	// Status is the ABI status the guest returned, for GuestError.
	Status abi.Status
	// GuestMessage is what the guest passed to callbox.error.
	GuestMessage string
	// Frames is the wasm stack where the engine reports it, innermost first.
	Frames []Frame
	// Err is the underlying cause.
	Err error
}

func (e *CallbackError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "callback %q", e.Callback)
	if e.Chain != "" {
		fmt.Fprintf(&b, " (chain %q #%d)", e.Chain, e.Seq)
	}
	if e.BatchSize > 0 {
		fmt.Fprintf(&b, " (batch element %d of %d)", e.Element, e.BatchSize)
	}
	if e.kind == InvalidArgument {
		// Nothing ran: the host refused the call (its inputs, outputs or
		// callback name), so no guest "failed".
		b.WriteString(" refused the call before running it: ")
	} else {
		b.WriteString(" failed: ")
	}
	b.WriteString(e.Message)
	if e.GuestMessage != "" {
		b.WriteString(": ")
		b.WriteString(e.GuestMessage)
	}
	if len(e.Frames) > 0 {
		b.WriteString(" (")
		b.WriteString(e.FramesSummary())
		b.WriteByte(')')
	}
	return b.String()
}

// FramesSummary is the innermost few frames on one line, innermost first
// ("at f (src/lib.rs:3:5) @0x2a <- g <- h"), or "" when the failure has
// none. Error includes it; Frames has them all.
func (e *CallbackError) FramesSummary() string {
	frames := make([]sandbox.Frame, len(e.Frames))
	for i, f := range e.Frames {
		frames[i] = sandbox.Frame(f)
	}
	return sandbox.FramesSummary(frames)
}

// Unwrap returns the cause.
func (e *CallbackError) Unwrap() error { return e.Err }

// Is matches the error's Kind.
func (e *CallbackError) Is(target error) bool { return abi.IsKind(e.kind, target) }

// Kind is the failure's kind (abi.Kinder).
func (e *CallbackError) Kind() Kind { return e.kind }

// ChainError is the error of a call that was not run because its chain had
// already failed. It wraps the first failure.
type ChainError struct {
	Chain    string
	Seq      uint64 // the call that did not run
	Callback string // its callback
	First    *CallbackError
}

func (e *ChainError) Error() string {
	return fmt.Sprintf("chain %q: call #%d (%s) not run: chain failed at #%d: %v", e.Chain, e.Seq, e.Callback, e.First.Seq, e.First)
}

// Unwrap returns the first failure of the chain.
func (e *ChainError) Unwrap() error { return e.First }

// Is matches ErrChainFailed.
func (e *ChainError) Is(target error) bool { return target == ErrChainFailed }

// fail makes the CallbackError of a failure of kind, caused by cause.
// A failure has one kind: errors.Is(err, k) holds for kind and for no
// other k (soleKind).
func (c *Callback) fail(kind Kind, msg string, cause error) *CallbackError {
	return &CallbackError{Callback: c.name, ID: c.id, kind: kind, Message: msg, Err: soleKind(cause, kind)}
}

// soleKind is cause with no kind in its chain but kind: a trap of that
// kind stays (its own causes kindless), anything else keeps its text and
// loses its kind (sandbox.Kindless). The engines' internal causes (the
// abort under a timeout, what a guest did after its memory limit) would
// otherwise make one failure match several kinds.
func soleKind(cause error, kind Kind) error {
	if t, ok := cause.(*sandbox.Trap); ok && t.Class == kind {
		sole := *t
		sole.Cause = sandbox.Kindless(t.Cause)
		return &sole
	}
	if k, ok := cause.(abi.Kinder); ok && k.Kind() == kind {
		return cause // a kinded sentinel of its own kind (ErrUnknownCallback)
	}
	return sandbox.Kindless(cause)
}

// trapError converts a sandbox trap.
func (c *Callback) trapError(t *sandbox.Trap) *CallbackError {
	e := c.fail(t.Class, t.Error(), t)
	for _, f := range t.Frames {
		e.Frames = append(e.Frames, Frame(f))
	}
	return e
}

// LoadError is a callback the host refused to load. Kind says why, in the
// taxonomy calls use: InvalidArgument for a module that is not valid
// WebAssembly as its author built it (malformed, invalid, or beyond
// callbox's features: the validators' reason in the message) and for a
// problem in the callback's config (sha256 mismatch, a signature that
// disagrees with the module's, a limit the engine cannot enforce);
// ABIViolation for a valid module that breaks ABI v1's load-time rules (a
// missing or mistyped export, an import the host does not provide or WASI
// without the grant, the wrong ABI version, a malformed signature table);
// MemoryLimit for a declared memory above max_memory; and the trap's own
// kind (Timeout, Unreachable, MemoryLimit, ...) when the module's start
// function, _initialize, callbox_abi_version or callbox_signatures failed
// on the load-time probe instance. It matches exactly one kind.
type LoadError struct {
	Callback string
	kind     Kind
	Err      error
}

// newLoadError is the LoadError of callback name's failed load (h.load's
// error): its kind from where it arose (loadKind), its cause carrying no
// other kind.
func newLoadError(name string, err error) *LoadError {
	kind := loadKind(err)
	return &LoadError{Callback: name, kind: kind, Err: soleKind(err, kind)}
}

func (e *LoadError) Error() string { return fmt.Sprintf("callback %q: %v", e.Callback, e.Err) }

// Unwrap returns the cause.
func (e *LoadError) Unwrap() error { return e.Err }

// Is matches the error's Kind: errors.Is(err, host.ABIViolation).
func (e *LoadError) Is(target error) bool { return abi.IsKind(e.kind, target) }

// Kind is why the load failed (abi.Kinder).
func (e *LoadError) Kind() Kind { return e.kind }

// kindError tags a load failure with its Kind without changing its text.
type kindError struct {
	kind Kind
	err  error
}

func withKind(k Kind, err error) error { return &kindError{kind: k, err: err} }

func (e *kindError) Error() string { return e.err.Error() }
func (e *kindError) Unwrap() error { return e.err }

// loadKind classifies a load failure: a tag set where it arose, else the
// kind of a trap on the probe instance, else ABIViolation (the probe found
// the module breaking the ABI: wrong version, missing export).
func loadKind(err error) Kind {
	var ke *kindError
	if errors.As(err, &ke) {
		return ke.kind
	}
	var me *sandbox.ModuleError
	if errors.As(err, &me) {
		return me.Kind
	}
	var t *sandbox.Trap
	if errors.As(err, &t) {
		return t.Class
	}
	return ABIViolation
}

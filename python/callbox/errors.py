"""Exceptions: one class per callbox failure kind, all CallbackError, and
ChainError for a chain step that did not run because an earlier one
failed."""

from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Type


class Frame(NamedTuple):
    """One guest frame of a failure inside the guest, in the module as its
    author built it: function name (name section or DWARF, demangled; ""
    if none), import module (for a frame in an imported function, else
    ""), source file, line and column (from the module's DWARF; "" and 0
    if unknown), function index, and the instruction's byte offset in the
    module (0 if unknown)."""

    func: str
    module: str
    file: str
    line: int
    column: int
    func_index: int
    offset: int

    def __str__(self) -> str:
        name = self.func or (self.module + ".?" if self.module else "func[%d]" % self.func_index)
        if self.file:
            name += " (%s%s)" % (self.file, ":%d%s" % (self.line, ":%d" % self.column if self.column else "") if self.line else "")
        return name + (" @0x%x" % self.offset if self.offset else "")


def _kind_code(kind_number: int) -> int:
    """The code of a kind, from the library's table (0 when there is no
    library to ask, or it is older than 1.7)."""
    from . import _lib

    try:
        return _lib.kind_codes().get(kind_number, 0)
    except OSError:
        return 0


class CallbackError(Exception):
    """A failed callbox call (or a refused one: see InvalidArgument).

    Attributes: callback (name, "" when no callback is concerned), kind (the
    kind's name, e.g. "Timeout"), kind_number (CALLBOX_KIND_*), code (the
    absl / XLA error code, e.g. 4 for DEADLINE_EXCEEDED), chain and seq
    (for a call on a chain), message (the host's description),
    guest_message (what the guest reported), guest_status (the ABI status a
    guest returned, for GuestError), batch_size and batch_element (for a
    batched call, Host.call_batch, that failed in one element: the batch's
    size and that element, from 0; else 0 and 0), frames (for a failure
    inside the guest: its frames, innermost first, a list of Frame; the
    message ends in the innermost few; else []).
    """

    kind = "Unknown"
    kind_number = 0

    def __init__(self, text: str, *, callback: str = "", code: Optional[int] = None, chain: str = "", seq: int = 0,
                 message: str = "", guest_message: str = "", guest_status: int = 0) -> None:
        super().__init__(text)
        self.callback = callback
        # An error the binding raises itself takes its kind's code from the
        # library's table (callbox_kinds), as the library's own errors do.
        self.code = code if code is not None else _kind_code(self.kind_number)
        self.chain = chain
        self.seq = seq
        self.message = message or text
        self.guest_message = guest_message
        self.guest_status = guest_status
        self.batch_size = 0
        self.batch_element = 0
        self.frames: List[Frame] = []


def _kind(name: str, number: int, *bases: type, doc: str) -> Type[CallbackError]:
    if not any(issubclass(b, CallbackError) for b in bases):
        bases = (CallbackError,) + bases
    cls = type(name, bases, {"kind": name, "kind_number": number, "__doc__": doc})
    return cls


Timeout = _kind("Timeout", 1, TimeoutError, doc="The call ran past its wall-clock limit.")
FuelExhausted = _kind("FuelExhausted", 2, doc="The call used up its instruction budget.")
MemoryLimit = _kind("MemoryLimit", 3, MemoryError, doc="The guest failed after its memory limit refused to grow.")
StackOverflow = _kind("StackOverflow", 4, doc="The guest exhausted its call stack.")
Unreachable = _kind("Unreachable", 5, doc="""The guest executed unreachable without reporting an error first: a
C abort() or __builtin_trap(), or a Rust panic in a module built without a
callbox SDK. A callbox SDK reports a panic before it aborts, which makes it a
GuestError (see there), not Unreachable.""")
MemoryOutOfBounds = _kind("MemoryOutOfBounds", 6, doc="A load or store outside the guest's memory.")
DivideByZero = _kind("DivideByZero", 7, ZeroDivisionError, doc="Integer division by zero in the guest.")
IntegerOverflow = _kind("IntegerOverflow", 8, OverflowError, doc="INT_MIN / -1, or a float-to-int conversion out of range.")
InvalidConversion = _kind("InvalidConversion", 9, doc="A float-to-int conversion of NaN.")
TableOutOfBounds = _kind("TableOutOfBounds", 10, doc="An indirect call past the table, or through a null entry.")
IndirectCallMismatch = _kind("IndirectCallMismatch", 11, doc="An indirect call with the wrong function type.")
GuestError = _kind("GuestError", 12, doc="""The callback reported an error: it returned an error status
(guest_status, guest_message; code is that status), or it aborted after
passing a message to callbox.error. The second is how the Rust SDK reports
a panic (guests/rust, panic=abort): message "guest aborted", guest_message
"panicked at src/lib.rs:LINE:COL: ...", guest_status 0 and code 13
(INTERNAL).""")
ABIViolation = _kind("ABIViolation", 13, doc="The guest broke the callbox ABI.")
HostPanic = _kind("HostPanic", 14, doc="A bug in callbox itself, caught and contained.")
Canceled = _kind("Canceled", 15, doc="The call was cancelled.")
OtherTrap = _kind("OtherTrap", 16, doc="Any other trap in the guest.")
InvalidArgument = _kind("InvalidArgument", 17, ValueError,
                        doc="callbox refused the call before the guest ran (bad arguments, tensors or attributes).")
# The two kinds of library 1.2 refine what 1.1 reported as InvalidArgument,
# and stay its subclasses, so `except InvalidArgument` still catches them.
UnknownCallback = _kind("UnknownCallback", 18, InvalidArgument, LookupError,
                        doc="No loaded callback has the name or content id (code NOT_FOUND).")
FailedPrecondition = _kind("FailedPrecondition", 19, InvalidArgument,
                           doc="Nothing can serve the call: the host is closed, or no default host is set (code FAILED_PRECONDITION).")

Overloaded = _kind("Overloaded", 20,
                   doc="""Every instance of the callback stayed busy for its max_wait, so the
    call gave up waiting and the guest never ran: the host is short of
    instances, not running away (code RESOURCE_EXHAUSTED).""")

WorkerDied = _kind("WorkerDied", 21,
                   doc="""The callback runs under isolation: process and its worker process died
    during the call (a crash, a seccomp kill, the OOM killer, kill -9); the
    message names the signal. No output was written, and the next call
    starts a new worker.""")

KINDS = {cls.kind_number: cls for cls in (
    Timeout, FuelExhausted, MemoryLimit, StackOverflow, Unreachable, MemoryOutOfBounds, DivideByZero,
    IntegerOverflow, InvalidConversion, TableOutOfBounds, IndirectCallMismatch, GuestError, ABIViolation,
    HostPanic, Canceled, OtherTrap, InvalidArgument, UnknownCallback, FailedPrecondition, Overloaded,
    WorkerDied)}


class ChainError(CallbackError):
    """A chain call (or tap) that did not run because an earlier step of its
    chain had failed; the chain stays failed until Chain.reset(). Go's
    host.ChainError.

    callback and seq name the refused step, chain its chain; first is the
    failure that failed the chain (a CallbackError of its kind, with the
    failed step's callback, seq, message and guest_message). kind, code,
    guest_status and guest_message are the first failure's, and the raised
    exception is also an instance of the first failure's kind class, so
    `except callbox.Timeout` catches a step refused after a timeout, as
    errors.Is(err, host.Timeout) matches a host.ChainError in Go.
    """

    first: CallbackError

    def __init__(self, text: str, *, first: Optional[CallbackError] = None, **kw: Any) -> None:
        super().__init__(text, **kw)
        self.first = first if first is not None else CallbackError(text)

    def __reduce__(self):  # the per-kind classes are made at run time
        return (_chain_error, (self.first.kind_number, self.args[0], self.__dict__))


_chain_classes: Dict[int, Type[ChainError]] = {}


def _chain_class(kind_number: int) -> Type[ChainError]:
    """ChainError combined with the first failure's kind class."""
    cls = _chain_classes.get(kind_number)
    if cls is None:
        base = KINDS.get(kind_number, CallbackError)
        if base is CallbackError:
            cls = ChainError
        else:
            cls = type("ChainError", (ChainError, base), {
                "kind": base.kind, "kind_number": base.kind_number, "__doc__": ChainError.__doc__,
                "__module__": __name__, "__qualname__": "ChainError"})
        _chain_classes[kind_number] = cls
    return cls


def _chain_error(kind_number: int, text: str, state: Dict[str, Any]) -> ChainError:
    exc = _chain_class(kind_number)(text)
    exc.__dict__.update(state)
    return exc


# The end of callbox_error's failed_* fields (library 1.2): errors from an
# older library are shorter, and have none. Likewise batch_* (1.3).
_FAILED_END = 96
_BATCH_END = 112
_FAILED_TEXT_END = 120
_FRAMES_END = 136


def _s(b: Optional[bytes]) -> str:
    return b.decode("utf-8", "replace") if b else ""


def check(lib: Any, err: Any) -> None:
    """Raise the exception for a callbox_error* (and free it); None is success."""
    if not err:
        return
    raise exception(lib, err)


def exception(lib: Any, err: Any) -> CallbackError:
    """The exception for a (non-NULL) callbox_error*, which it frees."""
    try:
        e = err.contents
        cls = KINDS.get(e.kind, CallbackError)
        text, callback, chain, message = _s(e.text), _s(e.callback), _s(e.chain), _s(e.message)
        failed_seq = e.failed_seq if e.struct_size >= _FAILED_END else 0
        if failed_seq:
            # A chain step refused after an earlier one failed: the C error
            # names that step (failed_callback, failed_seq, failed_message;
            # guest_message is its guest's).
            first_cb, first_msg, guest = _s(e.failed_callback), _s(e.failed_message), _s(e.guest_message)
            # The failed step's whole error as the library words it (1.7);
            # an older library gives its description only.
            first_text = _s(e.failed_text) if e.struct_size >= _FAILED_TEXT_END else first_msg
            failure = cls(first_text, callback=first_cb, code=e.code, chain=chain, seq=failed_seq, message=first_msg,
                          guest_message=guest, guest_status=e.guest_status)
            exc: CallbackError = _chain_class(e.kind)(
                text, first=failure, callback=callback, code=e.code, chain=chain, seq=e.seq, message=message,
                guest_message=guest, guest_status=e.guest_status)
        else:
            exc = cls(text, callback=callback, code=e.code, chain=chain, seq=e.seq,
                      message=message, guest_message=_s(e.guest_message), guest_status=e.guest_status)
        if e.struct_size >= _BATCH_END and e.batch_size:
            exc.batch_size, exc.batch_element = e.batch_size, e.batch_element
        if e.struct_size >= _FRAMES_END and e.frame_count and e.frames:
            exc.frames = [Frame(_s(f.func), _s(f.module), _s(f.file), f.line, f.column, f.func_index, f.offset)
                          for f in e.frames[:e.frame_count]]
            first = getattr(exc, "first", None)
            if first is not None:  # a chain step that did not run: the frames are the failed step's
                first.frames = exc.frames
    finally:
        lib.callbox_error_free(err)
    return exc

"""Exceptions: one class per callbox failure kind, all CallbackError."""


class CallbackError(Exception):
    """A failed callbox call (or a refused one: see InvalidArgument).

    Attributes: callback (name, "" when no callback is concerned), kind (the
    kind's name, e.g. "Timeout"), kind_number (CALLBOX_KIND_*), code (the
    absl / XLA error code, e.g. 4 for DEADLINE_EXCEEDED), chain and seq
    (for a call on a chain), message (the host's description),
    guest_message (what the guest reported), guest_status (the ABI status a
    guest returned, for GuestError).
    """

    kind = "Unknown"
    kind_number = 0

    def __init__(self, text, *, callback="", code=13, chain="", seq=0, message="", guest_message="", guest_status=0):
        super().__init__(text)
        self.callback = callback
        self.code = code
        self.chain = chain
        self.seq = seq
        self.message = message or text
        self.guest_message = guest_message
        self.guest_status = guest_status


def _kind(name, number, *bases, doc):
    if not any(issubclass(b, CallbackError) for b in bases):
        bases = (CallbackError,) + bases
    cls = type(name, bases, {"kind": name, "kind_number": number, "__doc__": doc})
    return cls


Timeout = _kind("Timeout", 1, TimeoutError, doc="The call ran past its wall-clock limit.")
FuelExhausted = _kind("FuelExhausted", 2, doc="The call used up its instruction budget.")
MemoryLimit = _kind("MemoryLimit", 3, MemoryError, doc="The guest failed after its memory limit refused to grow.")
StackOverflow = _kind("StackOverflow", 4, doc="The guest exhausted its call stack.")
Unreachable = _kind("Unreachable", 5, doc="The guest executed unreachable (a Rust panic, an abort).")
MemoryOutOfBounds = _kind("MemoryOutOfBounds", 6, doc="A load or store outside the guest's memory.")
DivideByZero = _kind("DivideByZero", 7, ZeroDivisionError, doc="Integer division by zero in the guest.")
IntegerOverflow = _kind("IntegerOverflow", 8, OverflowError, doc="INT_MIN / -1, or a float-to-int conversion out of range.")
InvalidConversion = _kind("InvalidConversion", 9, doc="A float-to-int conversion of NaN.")
TableOutOfBounds = _kind("TableOutOfBounds", 10, doc="An indirect call past the table, or through a null entry.")
IndirectCallMismatch = _kind("IndirectCallMismatch", 11, doc="An indirect call with the wrong function type.")
GuestError = _kind("GuestError", 12, doc="The callback returned an error status.")
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

KINDS = {cls.kind_number: cls for cls in (
    Timeout, FuelExhausted, MemoryLimit, StackOverflow, Unreachable, MemoryOutOfBounds, DivideByZero,
    IntegerOverflow, InvalidConversion, TableOutOfBounds, IndirectCallMismatch, GuestError, ABIViolation,
    HostPanic, Canceled, OtherTrap, InvalidArgument, UnknownCallback, FailedPrecondition)}


def _s(b):
    return b.decode("utf-8", "replace") if b else ""


def check(lib, err):
    """Raise the exception for a callbox_error* (and free it); None is success."""
    if not err:
        return
    try:
        e = err.contents
        cls = KINDS.get(e.kind, CallbackError)
        exc = cls(_s(e.text), callback=_s(e.callback), code=e.code, chain=_s(e.chain), seq=e.seq,
                  message=_s(e.message), guest_message=_s(e.guest_message), guest_status=e.guest_status)
    finally:
        lib.callbox_error_free(err)
    raise exc

"""callbox: run untrusted tensor callbacks (WebAssembly modules) in
sandboxes with hard limits, from NumPy and JAX.

    import numpy as np, callbox
    with callbox.Host("callbox.yaml") as host:
        y = host.call("scale", np.arange(4, dtype=np.float32), np.float32(2))

Failures raise a subclass of CallbackError per kind (Timeout, MemoryLimit,
GuestError, InvalidArgument, ...). callbox.jax has the JAX integration
(import it explicitly; it needs jax).
"""

from ._lib import find_library
from .errors import (
    ABIViolation,
    CallbackError,
    Canceled,
    DivideByZero,
    FuelExhausted,
    GuestError,
    HostPanic,
    IndirectCallMismatch,
    IntegerOverflow,
    InvalidArgument,
    InvalidConversion,
    MemoryLimit,
    MemoryOutOfBounds,
    OtherTrap,
    StackOverflow,
    TableOutOfBounds,
    Timeout,
    Unreachable,
)
from .host import CallbackInfo, Chain, Host

__version__ = "1.0.0"


def library_version():
    """The loaded libcallbox's version, "MAJOR.MINOR.PATCH"."""
    from . import _lib

    return _lib.lib().callbox_version().decode()


__all__ = [
    "Host", "Chain", "CallbackInfo", "CallbackError", "find_library", "library_version",
    "Timeout", "FuelExhausted", "MemoryLimit", "StackOverflow", "Unreachable", "MemoryOutOfBounds",
    "DivideByZero", "IntegerOverflow", "InvalidConversion", "TableOutOfBounds", "IndirectCallMismatch",
    "GuestError", "ABIViolation", "HostPanic", "Canceled", "OtherTrap", "InvalidArgument",
]

"""callbox: run untrusted tensor callbacks (WebAssembly modules) in
sandboxes with hard limits, from NumPy and JAX.

    import numpy as np, callbox
    with callbox.Host("callbox.yaml") as host:
        y = host.call("scale", np.arange(4, dtype=np.float32), np.float32(2))

Failures raise a subclass of CallbackError per kind (Timeout, MemoryLimit,
GuestError, InvalidArgument, ...). callbox.jax has the JAX integration
(import it explicitly; it needs jax).
"""

import ctypes
from typing import Any, Dict, Optional

from ._lib import find_library
from .errors import (
    ABIViolation,
    CallbackError,
    Canceled,
    ChainError,
    DivideByZero,
    Frame,
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
    UnknownCallback,
    FailedPrecondition,
    Overloaded,
    WorkerDied,
)
from .host import CallbackInfo, CallbackLimits, Chain, Host
from .profile import Profile, ProfileFunction, ProfileWork
from .replay import Replay, replay

__version__ = "1.4.0"


def library_version() -> str:
    """The loaded libcallbox's version, "MAJOR.MINOR.PATCH"."""
    from . import _lib

    return _lib.lib().callbox_version().decode()


def cuda_stats() -> Optional[Dict[str, Any]]:
    """The GPU path's counters (callbox_cuda_stats) as a dict: mode, calls,
    pinned_calls, staged_calls, pageable_calls, pins, pin_time_ms, ... for
    the default host; None when no default host is set."""
    import json

    from . import _lib

    lib = _lib.lib()
    buf = ctypes.create_string_buffer(4096)
    n = lib.callbox_cuda_stats(buf, len(buf))
    if n < 0:
        return None
    if n >= len(buf):
        buf = ctypes.create_string_buffer(n + 1)
        lib.callbox_cuda_stats(buf, len(buf))
    return json.loads(buf.value.decode())


__all__ = [
    "Host", "Chain", "CallbackInfo", "CallbackLimits", "CallbackError", "ChainError", "Frame", "find_library", "library_version",
    "cuda_stats", "Replay", "replay", "Profile", "ProfileFunction", "ProfileWork",
    "Timeout", "FuelExhausted", "MemoryLimit", "StackOverflow", "Unreachable", "MemoryOutOfBounds",
    "DivideByZero", "IntegerOverflow", "InvalidConversion", "TableOutOfBounds", "IndirectCallMismatch",
    "GuestError", "ABIViolation", "HostPanic", "Canceled", "OtherTrap", "InvalidArgument",
    "UnknownCallback", "FailedPrecondition", "Overloaded", "WorkerDied",
]

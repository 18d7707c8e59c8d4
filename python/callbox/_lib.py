"""ctypes declarations of libcallbox's C API (include/callbox.h, version 1.x)."""

import atexit
import ctypes
import logging
import os
import pathlib
from typing import Any, Dict, Iterator, List, Optional

MAX_RANK = 32
XLA_HOST_ATTR_SIZE = 64  # CALLBOX_XLA_HOST_ATTR_SIZE


class Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class Tensor(ctypes.Structure):
    """callbox_tensor: DLPack's DLTensor layout."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", Device),
        ("ndim", ctypes.c_int32),
        ("dtype", DType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class Type(ctypes.Structure):
    """callbox_type: a result's dtype and shape."""

    _fields_ = [("dtype", DType), ("ndim", ctypes.c_int32), ("shape", ctypes.c_int64 * MAX_RANK)]


class Frame(ctypes.Structure):
    """callbox_frame (1.12): one guest frame of a failure."""

    _fields_ = [
        ("func", ctypes.c_char_p),
        ("module", ctypes.c_char_p),
        ("file", ctypes.c_char_p),
        ("func_index", ctypes.c_uint32),
        ("line", ctypes.c_uint32),
        ("column", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("offset", ctypes.c_uint64),
    ]


class Error(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("kind", ctypes.c_int32),
        ("code", ctypes.c_int32),
        ("guest_status", ctypes.c_int32),
        ("seq", ctypes.c_uint64),
        ("kind_name", ctypes.c_char_p),
        ("callback", ctypes.c_char_p),
        ("chain", ctypes.c_char_p),
        ("message", ctypes.c_char_p),
        ("guest_message", ctypes.c_char_p),
        ("text", ctypes.c_char_p),
        ("failed_callback", ctypes.c_char_p),
        ("failed_seq", ctypes.c_uint64),
        ("failed_message", ctypes.c_char_p),
        ("batch_size", ctypes.c_uint64),  # 1.3
        ("batch_element", ctypes.c_uint64),
        ("failed_text", ctypes.c_char_p),  # 1.7
        ("frames", ctypes.POINTER(Frame)),  # 1.12
        ("frame_count", ctypes.c_uint64),
    ]


class DTypeInfo(ctypes.Structure):
    """callbox_dtype_info: one dtype callbox has, with its encodings."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dlpack", DType),
        ("xla", ctypes.c_int32),
        ("bytes", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
    ]


class CallbackInfo(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("id", ctypes.c_char_p),
        ("signature", ctypes.c_char_p),
        ("engine", ctypes.c_char_p),
        ("batching", ctypes.c_char_p),
        ("num_inputs", ctypes.c_int32),
        ("num_outputs", ctypes.c_int32),
    ]


class Limits(ctypes.Structure):
    """callbox_limits (1.7): struct_size set before the call; an older
    library fills less and says how much in struct_size."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("timeout_ns", ctypes.c_uint64),
        ("max_memory", ctypes.c_uint64),
        ("fuel", ctypes.c_uint64),
        ("max_stack", ctypes.c_uint64),
        ("max_output", ctypes.c_uint64),
        ("caller_stack", ctypes.c_uint64),
        ("max_wait_ns", ctypes.c_uint64),
        ("max_cpu_ns", ctypes.c_uint64),
    ]


assert ctypes.sizeof(Tensor) == 48, "callbox_tensor must have DLTensor's layout"
assert ctypes.sizeof(Error) == 136 and Error.failed_text.offset == 112, "callbox_error 1.12"
assert ctypes.sizeof(Frame) == 48 and Frame.offset.offset == 40, "callbox_frame 1.12"
assert ctypes.sizeof(Type) == 8 + 8 * MAX_RANK

ErrorP = ctypes.POINTER(Error)
TensorP = ctypes.POINTER(Tensor)
Host = ctypes.c_uint64
CancelToken = ctypes.c_uint64
# callbox_log_fn: (user, level, callback, message).
LogFn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_char_p, ctypes.c_char_p)


def _candidates() -> Iterator[pathlib.Path]:
    env = os.environ.get("CALLBOX_LIB")
    if env:
        yield pathlib.Path(env)
        return
    here = pathlib.Path(__file__).resolve().parent
    yield here / "libcallbox.so"
    # python/callbox/_lib.py -> the repository's build/
    yield here.parent.parent / "build" / "libcallbox.so"


def find_library() -> str:
    """The path of libcallbox.so: CALLBOX_LIB, else next to the package,
    else the repository's build/ directory."""
    tried = []
    for p in _candidates():
        if p.is_file():
            return str(p)
        tried.append(str(p))
    raise OSError(
        "libcallbox.so not found (tried %s): in the callbox repository, `make python-install` "
        "installs the package with the library inside it (or `make lib` builds build/libcallbox.so "
        "for a checkout on PYTHONPATH), or set CALLBOX_LIB to the library's path" % ", ".join(tried)
    )


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    def fn(name: str, *args: Any) -> Any:
        f = getattr(lib, name)
        f.argtypes = list(args)
        f.restype = ErrorP
        return f

    lib.callbox_version.argtypes = []
    lib.callbox_version.restype = ctypes.c_char_p
    lib.callbox_version_number.argtypes = []
    lib.callbox_version_number.restype = ctypes.c_uint32
    lib.callbox_error_free.argtypes = [ErrorP]
    lib.callbox_error_free.restype = None
    lib.callbox_dtypes.argtypes = [ctypes.POINTER(DTypeInfo), ctypes.c_size_t]
    lib.callbox_dtypes.restype = ctypes.c_size_t
    if hasattr(lib, "callbox_kinds"):  # 1.7
        lib.callbox_kinds.argtypes = [ctypes.POINTER(KindInfo), ctypes.c_size_t]
        lib.callbox_kinds.restype = ctypes.c_size_t
    fn("callbox_open", ctypes.c_char_p, ctypes.POINTER(Host))
    fn("callbox_open_config", ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(Host))
    fn("callbox_close", Host)
    if hasattr(lib, "callbox_reload"):  # 1.7
        fn("callbox_reload", Host, ctypes.c_char_p)
        fn("callbox_reload_config", Host, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p)
    fn("callbox_callback_count", Host, ctypes.POINTER(ctypes.c_size_t))
    fn("callbox_callback_at", Host, ctypes.c_size_t, ctypes.POINTER(CallbackInfo))
    fn("callbox_callback_find", Host, ctypes.c_char_p, ctypes.POINTER(CallbackInfo))
    if hasattr(lib, "callbox_callback_limits"):  # 1.5: limits and the caller's stack
        fn("callbox_callback_limits", Host, ctypes.c_char_p, ctypes.POINTER(Limits))
    if hasattr(lib, "callbox_callback_params"):  # 1.7: the signature's parameters
        fn("callbox_callback_params", Host, ctypes.c_char_p, ctypes.POINTER(ParamInfo), ctypes.c_size_t,
           ctypes.POINTER(ctypes.c_size_t))
    if hasattr(lib, "callbox_callback_refusal"):  # 1.9: a refusal in the library's words
        fn("callbox_callback_refusal", Host, ctypes.c_char_p, ctypes.c_char_p)
    fn("callbox_output_types", Host, ctypes.c_char_p, TensorP, ctypes.c_size_t, ctypes.POINTER(Type), ctypes.c_size_t)
    fn("callbox_call", Host, ctypes.c_char_p, TensorP, ctypes.c_size_t, TensorP, ctypes.c_size_t)
    if hasattr(lib, "callbox_profile"):  # 1.13: the guest profiler
        fn("callbox_profile", Host, ctypes.c_char_p, TensorP, ctypes.c_size_t, ctypes.c_int64, ctypes.c_char_p,
           ctypes.POINTER(ctypes.c_void_p))
        lib.callbox_string_free.argtypes = [ctypes.c_void_p]
        lib.callbox_string_free.restype = None
    fn("callbox_tap", Host, ctypes.c_char_p, TensorP, ctypes.c_size_t)
    fn("callbox_barrier", Host)
    fn("callbox_chain_call", Host, ctypes.c_char_p, ctypes.c_char_p, TensorP, ctypes.c_size_t, TensorP, ctypes.c_size_t)
    fn("callbox_chain_tap", Host, ctypes.c_char_p, ctypes.c_char_p, TensorP, ctypes.c_size_t)
    fn("callbox_chain_barrier", Host, ctypes.c_char_p)
    fn("callbox_chain_reset", Host, ctypes.c_char_p)
    fn("callbox_set_default_host", Host)
    fn("callbox_call_cancelable", Host, CancelToken, ctypes.c_char_p, ctypes.c_char_p, TensorP, ctypes.c_size_t,
       TensorP, ctypes.c_size_t)
    if hasattr(lib, "callbox_call_batch"):  # 1.3: batched calls
        fn("callbox_call_batch", Host, CancelToken, ctypes.c_char_p, ctypes.c_char_p, TensorP, ctypes.c_size_t,
           TensorP, ctypes.c_size_t)
    fn("callbox_cancel_token_new", ctypes.POINTER(CancelToken))
    fn("callbox_cancel_token_fire", CancelToken)
    fn("callbox_cancel_token_free", CancelToken)
    fn("callbox_cancel_on_signal", CancelToken, ctypes.c_int)
    if hasattr(lib, "callbox_barrier_cancelable"):  # 1.6
        fn("callbox_barrier_cancelable", Host, CancelToken, ctypes.c_char_p)
    fn("callbox_set_log_callback", LogFn, ctypes.c_void_p, ctypes.c_int32)
    fn("callbox_default_host", ctypes.POINTER(Host))
    lib.callbox_xla_ffi.argtypes = [ctypes.c_void_p]
    lib.callbox_xla_ffi.restype = ctypes.c_void_p
    if hasattr(lib, "callbox_xla_failure"):  # 1.11: XLA failures by token, attribute host
        fn("callbox_xla_failure", ctypes.c_char_p, ctypes.POINTER(ErrorP))
        fn("callbox_xla_host_attr", Host, ctypes.c_char_p, ctypes.c_size_t)
    if hasattr(lib, "callbox_xla_ffi_cuda"):  # 1.1: the GPU entries
        lib.callbox_xla_ffi_cuda.argtypes = [ctypes.c_void_p]
        lib.callbox_xla_ffi_cuda.restype = ctypes.c_void_p
        lib.callbox_cuda_stats.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        lib.callbox_cuda_stats.restype = ctypes.c_int64
    return lib


_lib: Optional[ctypes.CDLL] = None


def lib() -> ctypes.CDLL:
    """The loaded library (loaded on first use). ctypes.CDLL releases the GIL
    during every call. Loading it routes the library's log lines (guest
    log output among them) to Python's logging, logger "callbox"."""
    global _lib
    if _lib is None:
        _lib = _declare(ctypes.CDLL(find_library()))
        v = _lib.callbox_version_number()
        if v // 10000 != 1 or v % 10000 < 200:
            raise OSError("libcallbox version %s is not 1.2 or a later 1.x (rebuild it: make lib)"
                          % _lib.callbox_version().decode())
        _route_logs(_lib)
    return _lib


# ---- logging ----

_LOGGER = logging.getLogger("callbox")


def _py_level(level):
    """A callbox log level (slog's numbers: debug -4, info 0, warn 4, error
    8) as a logging level."""
    if level < 0:
        return logging.DEBUG
    if level < 4:
        return logging.INFO
    if level < 8:
        return logging.WARNING
    return logging.ERROR


@LogFn
def _on_log(user, level, callback, message):
    lvl = _py_level(level)
    if not _LOGGER.isEnabledFor(lvl):
        return
    cb = callback.decode("utf-8", "replace") if callback else ""
    text = message.decode("utf-8", "replace") if message else ""
    _LOGGER.log(lvl, "%s: %s" % (cb, text) if cb else text, extra={"callback": cb})


def _route_logs(l):
    """Send every log line of the library to the "callbox" logger (from any
    thread; the callback takes the GIL). Lines below the logger's level are
    dropped in Python, so set it with logging, e.g.
    logging.getLogger("callbox").setLevel(logging.INFO) to see taps'
    output. Unhooked at interpreter exit, before Python's objects go."""
    err = l.callbox_set_log_callback(_on_log, None, -4)
    if err:
        l.callbox_error_free(err)  # a fork child: nothing to route
        return

    def unhook():
        e = l.callbox_set_log_callback(LogFn(), None, 0)
        if e:
            l.callbox_error_free(e)

    atexit.register(unhook)


class ParamInfo(ctypes.Structure):
    """callbox_param_info: one parameter of a callback's signature (1.7)."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("xla", ctypes.c_int32),
        ("rank", ctypes.c_int32),
    ]


class KindInfo(ctypes.Structure):
    """callbox_kind_info: one failure kind, with its code and name (1.7)."""

    _fields_ = [
        ("kind", ctypes.c_int32),
        ("code", ctypes.c_int32),
        ("name", ctypes.c_char_p),
    ]


_kind_codes: Optional[Dict[int, int]] = None


def kind_codes() -> Dict[int, int]:
    """Each kind's code, by kind number, from the library's one table
    (callbox_kinds, read once); empty from a library before 1.7."""
    global _kind_codes
    if _kind_codes is not None:
        return _kind_codes
    l = lib()
    if not hasattr(l, "callbox_kinds"):
        return {}
    n = l.callbox_kinds(None, 0)
    arr = (KindInfo * n)()
    l.callbox_kinds(arr, n)
    _kind_codes = {k.kind: k.code for k in arr}
    return _kind_codes


def dtypes() -> List[DTypeInfo]:
    """The dtypes the library has (callbox_dtypes): the one table, read
    from the library, never kept here."""
    l = lib()
    n = l.callbox_dtypes(None, 0)
    arr = (DTypeInfo * n)()
    l.callbox_dtypes(arr, n)
    return list(arr)

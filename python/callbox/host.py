"""Hosts, calls and chains over libcallbox's C API."""

import ctypes
import json
import os
import signal
import threading
import weakref
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _lib
from .errors import CallbackError, Canceled, FailedPrecondition, InvalidArgument, check
from .profile import Profile


class Param(NamedTuple):
    """One parameter of a callback's signature, as the library reads it
    (callbox_callback_params): its name ("" when the signature gives none),
    its dtype name ("f32") and its rank."""

    name: str
    dtype: str
    rank: int

ArrayLike = Any
"""What a call takes as an argument: a NumPy array or scalar, a Python
scalar or (nested) sequence, an object with __dlpack__ in host memory
(PyTorch, JAX, CuPy pinned host arrays) or with __array_interface__."""

Result = Union[np.ndarray, Tuple[np.ndarray, ...]]
"""A call's result: one array, or a tuple when the callback has several."""

Out = Union[np.ndarray, Sequence[np.ndarray]]
"""Preallocated results (out=): one array, or a sequence of them."""


class CallbackInfo(NamedTuple):
    """A loaded callback: name, content id ("cb1-..."), signature text,
    engine, batching rule (JAX vmap_method name), and its input and output
    counts."""

    name: str
    id: str
    signature: str
    engine: str
    batching: str
    num_inputs: int
    num_outputs: int


class CallbackLimits(NamedTuple):
    """A callback's limits as its host enforces them (C API 1.5): the call
    timeout in ns (0: none), linear memory and output bytes, fuel per call
    (0: unlimited), the wasm stack (0: the engine's default), and
    caller_stack: the native stack a thread calling it must have (0 when
    any thread will do), and max_wait_ns: how long a call waits for a busy
    callback's instance before failing as Overloaded (0: no bound; 0 too
    from a library before 1.6), and max_cpu_ns: the CPU time one call may
    use (0: none; 0 too from a library before 1.7)."""

    timeout_ns: int
    max_memory: int
    fuel: int
    max_stack: int
    max_output: int
    caller_stack: int
    max_wait_ns: int = 0
    max_cpu_ns: int = 0


# DLPack type codes -> NumPy kinds: DLPack's own encoding. Which (code,
# bits) pairs callbox has is the library's table (callbox_dtypes), read
# once; bfloat16 (code 4) is ml_dtypes' type.
_DL_KINDS = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b"}
_BF16 = 4
_tables = None


def _dtype_tables():
    """({NumPy dtype: (code, bits)}, {(code, bits): NumPy dtype or None for
    bf16}) from the library's dtype table."""
    global _tables
    if _tables is None:
        to_dl, from_dl = {}, {}
        for info in _lib.dtypes():
            key = (info.dlpack.code, info.dlpack.bits)
            if key[0] == _BF16:
                from_dl[key] = None  # ml_dtypes, looked up when used
                continue
            np_dtype = np.dtype(bool) if key[0] == 6 else np.dtype("%s%d" % (_DL_KINDS[key[0]], key[1] // 8))
            to_dl[np_dtype] = key
            from_dl[key] = np_dtype
        _tables = (to_dl, from_dl)
    return _tables


def _bfloat16():
    try:
        import ml_dtypes  # installed with jax
    except ImportError:
        raise InvalidArgument("bf16 tensors need the ml_dtypes package (it comes with jax)") from None
    return np.dtype(ml_dtypes.bfloat16)


def _dl(dtype):
    dtype = np.dtype(dtype)
    to_dl, from_dl = _dtype_tables()
    dl = to_dl.get(dtype)
    if dl is None:
        if dtype.name == "bfloat16":
            return next(k for k in from_dl if k[0] == _BF16)
        names = ", ".join(info.name.decode() for info in _lib.dtypes())
        raise InvalidArgument("dtype %s has no callbox equivalent (%s)" % (dtype, names))
    return dl


def _np_dtype(code, bits):
    d = _dtype_tables()[1][(code, bits)]
    return _bfloat16() if d is None else d


def _c_order(a: np.ndarray) -> np.ndarray:
    """a as a C-contiguous array: no copy when it already is one
    (np.ascontiguousarray would turn a 0-d array into a 1-d one)."""
    if not a.flags.c_contiguous:
        a = np.array(a, order="C")
    return a


def _normalized(a: np.ndarray) -> np.ndarray:
    """a as NumPy reads it, in the form the C API takes: native byte
    order, C-contiguous, bools 0 or 1. `callbox run` reads .npy files by the
    same rule (internal/tensorfile), so an array and the .npy file
    np.save writes from it give a callback the same tensor. No copy when a
    already is in that form."""
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="), order="C")  # one copy: swapped and in C order
    a = _c_order(a)
    if a.dtype == np.bool_ and a.size:
        raw = a.view(np.uint8)
        if (raw > 1).any():  # NumPy reads any non-zero byte as True
            a = raw != 0
    return a


_PY_SCALARS = (bool, int, float, complex)
_HOST_DEVICES = (1, 3)  # CALLBOX_DEVICE_CPU, CALLBOX_DEVICE_CUDA_HOST
_DEVICE_NAMES = {1: "CPU", 2: "CUDA", 3: "CUDA host", 4: "OpenCL", 7: "Vulkan", 8: "Metal", 10: "ROCm",
                 13: "CUDA managed", 14: "oneAPI"}


def _is_python_scalar(a: Any) -> bool:
    # np.float64 and np.complex128 subclass float and complex: they are
    # typed NumPy scalars, not Python ones.
    return isinstance(a, _PY_SCALARS) and not isinstance(a, np.generic)


def _argname(index: int, param: Optional[Param]) -> str:
    if param is not None and param.name:
        return "argument %d (%s)" % (index, param.name)
    return "argument %d" % index


def _as_array(a: Any, index: int, param: Optional[Param]) -> np.ndarray:
    """An argument as a NumPy array without copying where it can be
    viewed: a NumPy array as it is, a __dlpack__ object in host memory
    through np.from_dlpack, an __array_interface__ object through
    np.asarray; anything else (Python scalars and sequences) through
    np.asarray."""
    if isinstance(a, np.ndarray):
        return a
    if hasattr(a, "__dlpack__") and hasattr(a, "__dlpack_device__") and not isinstance(a, np.generic):
        dev = a.__dlpack_device__()
        dev_type = int(dev[0])
        if dev_type not in _HOST_DEVICES:
            raise InvalidArgument(
                "%s is a DLPack tensor in %s memory (device %s): host.call takes host memory; copy it to the "
                "host first (torch: x.cpu(), CuPy: x.get(), JAX: jax.device_get(x)), or call it on the GPU with "
                "callbox.jax (platform=\"cuda\") or the C entry callbox_cuda_call_dlpack"
                % (_argname(index, param), _DEVICE_NAMES.get(dev_type, "device type %d" % dev_type), tuple(dev)),)
        try:
            return np.from_dlpack(a)
        except (TypeError, BufferError, RuntimeError):
            if hasattr(a, "__array_interface__") or hasattr(a, "__array__"):
                return np.asarray(a)
            raise
    arr = np.asarray(a)
    if arr.dtype.kind == "f" and isinstance(a, (list, tuple)):
        # NumPy makes a sequence of Python ints with one past int64 (2**63)
        # float64, losing the values: keep them as Python ints, whose range
        # _convert checks against the parameter's integer dtype.
        exact = np.asarray(a, dtype=object)
        if exact.size and all(type(v) is int for v in exact.ravel()):
            return exact
    return arr


def _np_name(d: np.dtype) -> str:
    if d == np.bool_:
        return "np.bool_"
    if d.name == "bfloat16":
        return "ml_dtypes.bfloat16"
    return "np." + d.name


def _what(a: Any, arr: np.ndarray) -> str:
    if _is_python_scalar(a):
        return "Python %s %r" % (type(a).__name__, a)
    if isinstance(a, (list, tuple)):
        return "a %s of %s values" % (type(a).__name__, arr.dtype)
    if isinstance(a, np.generic):
        return "np.%s %r" % (arr.dtype.name, a.item() if arr.dtype != np.dtype("O") else a)
    return "%s array" % (arr.dtype.name if arr.dtype.isnative else arr.dtype.str)


def _python_ints_fit(arr: np.ndarray, target: np.dtype) -> Optional[str]:
    """None when the Python integers of arr fit target, else why not."""
    info = np.iinfo(target)
    if arr.dtype == np.dtype("O"):
        values = [int(v) for v in arr.ravel()]
        lo, hi = (min(values), max(values)) if values else (0, 0)
    elif arr.size:
        lo, hi = int(arr.min()), int(arr.max())
    else:
        return None
    if lo < info.min or hi > info.max:
        held = "%s holds %d..%d" % (_lib_name(target), info.min, info.max)
        return held if arr.ndim == 0 else "%s; the values span %d..%d" % (held, lo, hi)
    return None


def _convert(a: Any, arr: np.ndarray, target: np.dtype, index: int, param: Param) -> np.ndarray:
    """arr as target, by NumPy's same_kind rule; a lossy cast is refused
    with an error saying what to write."""
    if arr.dtype == target or (not arr.dtype.isnative and arr.dtype.newbyteorder("=") == target):
        return arr
    python = _is_python_scalar(a) or isinstance(a, (list, tuple))
    src = arr.dtype
    if src.kind not in "biufc" and not (python and src == np.dtype("O")):
        _dl(src)  # strings, objects, dates: "dtype <U1 has no callbox equivalent (...)"
    if python and src == np.dtype("O") and all(isinstance(v, int) for v in arr.ravel()):
        src = np.dtype(np.int64)  # Python ints past int64: the range check below decides
    ok = np.can_cast(src, target, casting="same_kind")
    why = None
    if python and src.kind in "iu" and target.kind in "iu":
        # Python integers are untyped: any integer dtype that holds the
        # value takes them (np.uint8(3) is fine; so is 3 for a u8 param).
        ok = True
        why = _python_ints_fit(arr, target)
        if why is not None:
            ok = False
    if not ok:
        name = _lib_name(target)
        what = _what(a, arr)
        if why is not None:
            msg = "%s: got %s, the callback takes %s (%s)" % (_argname(index, param), what, name, why)
        else:
            if _is_python_scalar(a):
                fix = "pass %s(...) to convert it on purpose" % _np_name(target)
            elif isinstance(a, (list, tuple)):
                fix = "pass np.asarray(...).astype(%s) to convert it on purpose" % _np_name(target)
            elif isinstance(a, np.generic):
                fix = "pass %s(...) to convert it on purpose" % _np_name(target)
            else:
                fix = "pass x.astype(%s) to convert it on purpose" % _np_name(target)
            msg = ("%s: got %s, the callback takes %s, and %s -> %s is not a same_kind cast "
                   "(it can lose values): %s" % (_argname(index, param), what, name, src, target, fix))
        raise InvalidArgument(msg)
    return arr.astype(target)


def _lib_name(d: np.dtype) -> str:
    """The callbox name of a NumPy dtype ("f32"), from the library's table."""
    try:
        code, bits = _dl(d)
    except InvalidArgument:
        return str(d)
    for info in _lib.dtypes():
        if (info.dlpack.code, info.dlpack.bits) == (code, bits):
            return info.name.decode()
    return str(d)


def _tensors(arrays: Sequence[np.ndarray]) -> "ctypes.Array[_lib.Tensor]":
    """A callbox_tensor array viewing the NumPy arrays (no copies). The
    shape arrays are kept alive by the returned tensor array."""
    n = len(arrays)
    ts = (_lib.Tensor * max(n, 1))()
    shapes = []
    for i, a in enumerate(arrays):
        t = ts[i]
        code, bits = _dl(a.dtype)
        t.data = a.ctypes.data
        t.device.device_type = 1
        t.ndim = a.ndim
        t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, 1
        if a.ndim:
            shape = (ctypes.c_int64 * a.ndim)(*a.shape)
            shapes.append(shape)
            t.shape = shape
    ts._shapes = shapes
    return ts


class _Meta(NamedTuple):
    """A tensor type without data, for output_types."""
    shape: Tuple[int, ...]
    dtype: np.dtype


def _b(s: Union[str, bytes]) -> bytes:
    return s.encode() if isinstance(s, str) else s


class Host:
    """Loaded callbacks and the sandboxes that run them.

    config is a path to a config file (.yaml, .yml, .toml, .json), a dict
    (the config's content), or config text (YAML or JSON; base_dir resolves
    its relative paths, default the working directory). A Host is safe to
    share between threads; calls release the GIL while they run.

    Arguments (see call) are NumPy arrays, NumPy or Python scalars,
    sequences, and host-memory objects with __dlpack__ or
    __array_interface__. Each is converted to its parameter's dtype by
    NumPy's same_kind rule, read as NumPy reads it (native byte order, C
    order, bools 0 or 1), and passed without a copy where it already is in
    that form.
    """

    def __init__(self, config: Union[str, "os.PathLike[str]", Dict[str, Any], None] = None, *,
                 format: Optional[str] = None, base_dir: Union[str, "os.PathLike[str]", None] = None,
                 _handle: Optional[int] = None) -> None:
        self._lib = _lib.lib()
        self._owned = _handle is None
        self._infos: Dict[str, CallbackInfo] = {}
        self._types: Dict[Any, List[Tuple[Tuple[int, ...], np.dtype]]] = {}
        self._params: Dict[str, Optional[List[Tuple[Param, Optional[np.dtype]]]]] = {}
        if _handle is not None:
            self._handle = _handle
            return
        h = _lib.Host(0)
        if isinstance(config, dict):
            check(self._lib, self._lib.callbox_open_config(
                json.dumps(config).encode(), b"json", _b(os.fspath(base_dir)) if base_dir else None, ctypes.byref(h)))
        elif isinstance(config, (str, os.PathLike)) and (format is None and _looks_like_path(config)):
            check(self._lib, self._lib.callbox_open(os.fsencode(config), ctypes.byref(h)))
        elif isinstance(config, str):
            fmt = format or ("json" if config.lstrip().startswith("{") else "yaml")
            check(self._lib, self._lib.callbox_open_config(
                config.encode(), fmt.encode(), _b(os.fspath(base_dir)) if base_dir else None, ctypes.byref(h)))
        else:
            raise TypeError("config must be a path, a dict or config text, not %r" % type(config).__name__)
        self._handle = h.value
        # A Host dropped without close() is closed when it is collected
        # (not at interpreter exit: the process's end frees everything).
        self._finalizer = weakref.finalize(self, _close_handle, self._lib, self._handle)
        self._finalizer.atexit = False

    @classmethod
    def default(cls) -> "Host":
        """The process's default host: the one the XLA handler uses (set
        with set_default, else opened from CALLBOX_CONFIG)."""
        lib = _lib.lib()
        h = _lib.Host(0)
        check(lib, lib.callbox_default_host(ctypes.byref(h)))
        return cls(_handle=h.value)

    def set_default(self) -> None:
        """Make this host the default host (the one the XLA handler calls)."""
        check(self._lib, self._lib.callbox_set_default_host(self._handle))

    @property
    def handle(self) -> int:
        """The C API handle (callbox_host)."""
        return self._handle

    def reload(self, config: Union[str, "os.PathLike[str]", Dict[str, Any]], *,
               format: Optional[str] = None, base_dir: Union[str, "os.PathLike[str]", None] = None) -> None:
        """Switch the host to a new configuration without closing it
        (config as for Host(); a file's CALLBOX_ environment overrides are
        read again). Callbacks whose module bytes and settings are unchanged
        keep their loaded modules and warm instances, changed ones are loaded
        anew, calls in flight finish on the version they started on, named
        chains carry on. A configuration with any callback that fails to load
        is refused whole (the error names the file and callback) and the old
        one keeps serving. Needs a library of C API 1.7 or later."""
        if not hasattr(self._lib, "callbox_reload"):
            raise NotImplementedError("Host.reload needs libcallbox 1.7 or later (this one is %s)"
                                      % self._lib.callbox_version().decode())
        base = _b(os.fspath(base_dir)) if base_dir else None
        if isinstance(config, dict):
            check(self._lib, self._lib.callbox_reload_config(self._handle, json.dumps(config).encode(), b"json", base))
        elif isinstance(config, (str, os.PathLike)) and (format is None and _looks_like_path(config)):
            check(self._lib, self._lib.callbox_reload(self._handle, os.fsencode(config)))
        elif isinstance(config, str):
            fmt = format or ("json" if config.lstrip().startswith("{") else "yaml")
            check(self._lib, self._lib.callbox_reload_config(self._handle, config.encode(), fmt.encode(), base))
        else:
            raise TypeError("config must be a path, a dict or config text, not %r" % type(config).__name__)
        # What this object remembered of the old callbacks (infos, derived
        # types, parameters) is the old configuration's.
        self._infos.clear()
        self._types.clear()
        self._params.clear()

    def close(self) -> None:
        """Wait for calls in flight and release the host; later calls raise
        FailedPrecondition. Closing twice is allowed. A Host that is dropped
        without close() is closed when it is garbage-collected (keep a
        reference to a host made the default with set_default)."""
        fin = getattr(self, "_finalizer", None)
        if fin is not None:
            fin.detach()
        check(self._lib, self._lib.callbox_close(self._handle))

    def __enter__(self) -> "Host":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- callbacks ----

    def callbacks(self) -> List[CallbackInfo]:
        """Every loaded callback, sorted by name."""
        n = ctypes.c_size_t(0)
        check(self._lib, self._lib.callbox_callback_count(self._handle, ctypes.byref(n)))
        out = []
        for i in range(n.value):
            info = _lib.CallbackInfo()
            check(self._lib, self._lib.callbox_callback_at(self._handle, i, ctypes.byref(info)))
            out.append(_info(info))
        return out

    def callback(self, name_or_id: str) -> CallbackInfo:
        """The callback with this name or content id."""
        info = self._infos.get(name_or_id)
        if info is None:
            c = _lib.CallbackInfo()
            check(self._lib, self._lib.callbox_callback_find(self._handle, _b(name_or_id), ctypes.byref(c)))
            info = self._infos[name_or_id] = _info(c)
        return info

    def limits(self, name_or_id: str) -> CallbackLimits:
        """The limits of the callback with this name or content id (a
        library of C API 1.5 or later)."""
        if not hasattr(self._lib, "callbox_callback_limits"):
            raise NotImplementedError("limits need libcallbox 1.5 or later; this one is %s"
                                      % self._lib.callbox_version().decode())
        c = _lib.Limits(struct_size=ctypes.sizeof(_lib.Limits))
        check(self._lib, self._lib.callbox_callback_limits(self._handle, _b(name_or_id), ctypes.byref(c)))
        # An older library fills less of the struct (struct_size says how
        # much): a field past that is 0, none.
        def filled(field: str) -> int:
            f = getattr(_lib.Limits, field)
            return getattr(c, field) if c.struct_size >= f.offset + f.size else 0
        return CallbackLimits(c.timeout_ns, c.max_memory, c.fuel, c.max_stack, c.max_output, c.caller_stack,
                              filled("max_wait_ns"), filled("max_cpu_ns"))

    def output_types(self, name: str, *inputs: Any) -> List[Tuple[Tuple[int, ...], np.dtype]]:
        """The (shape, dtype) of each result of a call with inputs (arrays,
        or anything with .shape and .dtype), as the signature derives them."""
        key = (name,) + tuple((tuple(a.shape), np.dtype(a.dtype).str) for a in inputs)
        types = self._types.get(key)
        if types is not None:
            return types
        info = self.callback(name)
        ts = (_lib.Tensor * max(len(inputs), 1))()
        keep = []
        for i, a in enumerate(inputs):
            code, bits = _dl(a.dtype)
            ts[i].device.device_type = 1
            ts[i].ndim = len(a.shape)
            ts[i].dtype.code, ts[i].dtype.bits, ts[i].dtype.lanes = code, bits, 1
            if len(a.shape):
                shape = (ctypes.c_int64 * len(a.shape))(*a.shape)
                keep.append(shape)
                ts[i].shape = shape
        outs = (_lib.Type * max(info.num_outputs, 1))()
        check(self._lib, self._lib.callbox_output_types(
            self._handle, _b(name), ts, len(inputs), outs, info.num_outputs))
        types = [(tuple(o.shape[:o.ndim]), _np_dtype(o.dtype.code, o.dtype.bits)) for o in outs[:info.num_outputs]]
        if len(self._types) < 4096:
            self._types[key] = types
        return types

    # ---- calls ----

    def _param_dtypes(self, name: str) -> Optional[List[Tuple[Param, Optional[np.dtype]]]]:
        """Each parameter of the callback's signature, as the library reads
        it (callbox_callback_params), with its NumPy dtype (None where NumPy
        has none here: bf16 without ml_dtypes); None from a library before
        1.7 (the library then checks the unconverted arguments)."""
        if name in self._params:
            return self._params[name]
        out = None
        params = self._params_of(name)
        if params is not None:
            by_name = {info.name.decode(): (info.dlpack.code, info.dlpack.bits) for info in _lib.dtypes()}
            out = []
            for p in params:
                dl = by_name.get(p.dtype)
                d = None
                if dl is not None:
                    try:
                        d = _np_dtype(*dl)
                    except InvalidArgument:  # bf16 without ml_dtypes
                        d = None
                out.append((p, d))
        if len(self._params) < 4096:
            self._params[name] = out
        return out

    def _params_of(self, name: str) -> Optional[List[Param]]:
        """The callback's parameters from the library, or None from a
        library before 1.7."""
        if not hasattr(self._lib, "callbox_callback_params"):
            return None
        n = ctypes.c_size_t(0)
        check(self._lib, self._lib.callbox_callback_params(self._handle, _b(name), None, 0, ctypes.byref(n)))
        arr = (_lib.ParamInfo * max(n.value, 1))()
        check(self._lib, self._lib.callbox_callback_params(self._handle, _b(name), arr, n.value, ctypes.byref(n)))
        xla = {info.xla: info.name.decode() for info in _lib.dtypes()}
        return [Param(p.name.decode(), xla.get(p.xla, ""), p.rank) for p in arr[:n.value]]

    def _refused(self, name: str, e: InvalidArgument) -> CallbackError:
        """e, this package's own refusal of a call's argument (a NumPy
        conversion, an out= array), as the library words its refusals: it
        words it (callbox_callback_refusal), so no message is this
        package's to decide."""
        try:
            check(self._lib, self._lib.callbox_callback_refusal(self._handle, _b(name), _b(str(e))))
        except CallbackError as refusal:
            return refusal
        raise AssertionError("callbox_callback_refusal returned no error")  # the C API says never

    def _inputs(self, name: str, arrays: Sequence[Any]) -> List[np.ndarray]:
        params = self._param_dtypes(name)
        ins = []
        try:
            for i, a in enumerate(arrays):
                p, target = params[i] if params is not None and i < len(params) else (None, None)
                arr = _normalized(_as_array(a, i, p))
                if target is not None:
                    arr = _convert(a, arr, target, i, p)
                ins.append(arr)
        except InvalidArgument as e:
            raise self._refused(name, e) from None
        return ins

    def _prepare(self, name: str, arrays: Sequence[Any],
                 out: Optional[Out] = None) -> Tuple[List[np.ndarray], List[np.ndarray]]:
        ins = self._inputs(name, arrays)
        types = self.output_types(name, *ins)
        if out is None:
            return ins, [np.empty(shape, dtype) for shape, dtype in types]
        try:
            return ins, _check_out(out, types)
        except InvalidArgument as e:
            raise self._refused(name, e) from None

    def call(self, name: str, *arrays: ArrayLike, out: Optional[Out] = None) -> Result:
        """Call a callback (by name or content id). Returns its result, or
        a tuple of results when it has several.

        Each argument is converted to its parameter's dtype (from the
        signature) by NumPy's same_kind rule: a Python float for an f32
        parameter, an int32 array for an f32 one, a Python int for any
        integer dtype that holds it; a lossy cast (float to int, a value out
        of range) raises InvalidArgument saying what to write. Arguments in
        host memory that need no conversion (NumPy arrays, __dlpack__ and
        __array_interface__ objects) are passed by pointer; a big-endian,
        non-contiguous or non-0/1 bool array is copied first, as NumPy
        reads it.

        out: preallocated results (an array, or a tuple of arrays, one per
        result) of exactly the result's dtype and shape, C-contiguous and
        writeable. The results are written into them (nothing is written
        when the call fails) and out is returned."""
        ins, outs = self._prepare(name, arrays, out)
        _invoke(self._lib, self._handle, None, _b(name), ins, outs)
        return _result(outs, out)

    def profile(self, name: str, *arrays: ArrayLike, calls: int = 10,
                pprof: Optional[Union[str, "os.PathLike[str]"]] = None) -> Profile:
        """Profile where a callback's own functions spend their work: call it
        `calls` times with these arguments (converted as for call) on a copy
        compiled with the guest profiler, in process, under its engine and
        limits, and return a Profile: its functions, the most fuel first,
        each with fuel (wasm instructions, the same on both engines), wall
        time and calls, in the function itself (self) and with what it
        called (total). pprof: a path to write the profile to in pprof's
        format (`go tool pprof -top PATH`). A failed call is counted and
        profiled up to where it stopped; when every call fails, the last
        one's exception is raised. Needs library 1.13."""
        if not hasattr(self._lib, "callbox_profile"):
            raise FailedPrecondition("profile needs libcallbox 1.13 or later (rebuild it: make lib)")
        ins = self._inputs(name, arrays)
        summary = ctypes.c_void_p()
        path = os.fsencode(pprof) if pprof is not None else None
        check(self._lib, self._lib.callbox_profile(self._handle, _b(name), _tensors(ins), len(ins), calls, path,
                                                   ctypes.byref(summary)))
        try:
            text = ctypes.string_at(summary.value).decode()
        finally:
            self._lib.callbox_string_free(summary)
        return Profile.from_json(json.loads(text))

    def call_batch(self, name: str, *arrays: ArrayLike, out: Optional[Out] = None,
                   chain: Optional[str] = None) -> Result:
        """A batched call: every argument has one extra leading dimension of
        size B over the callback's parameter (a (64, 16384) array for f32[n],
        a (64,) array for a scalar f32[]: there is no broadcast), and so has
        every result. Element i is the call on each argument's i-th slice.
        A callback whose `batching` is "parallel" runs its elements
        concurrently on pooled instances (at most max_instances, and the
        cores, at once); any other runs them in order, as does a batch on a
        chain (chain: one step of that chain). Limits apply to each element.
        The lowest failing element fails the call: the exception's
        batch_element and batch_size name it, and out holds what it held
        before the call (the library puts back what finished elements
        wrote). Arguments convert as for call; out, when given, is the batched
        results (B first). Needs library 1.3."""
        if not hasattr(self._lib, "callbox_call_batch"):
            raise FailedPrecondition("call_batch needs libcallbox 1.3 or later (rebuild it: make lib)")
        ins = self._inputs(name, arrays)
        tok = _sigint_token(self._lib)
        if not ins or any(a.ndim == 0 for a in ins):
            # No batch dimension to derive the results from: the library
            # refuses the call, in its words (as for every door).
            _check_sigint(self._lib, tok, self._lib.callbox_call_batch(
                self._handle, tok, None if chain is None else _b(chain), _b(name),
                _tensors(ins), len(ins), _tensors([]), 0))
            raise AssertionError("the library ran a batched call without a batch dimension")
        b = ins[0].shape[0]
        types = self.output_types(name, *[_Meta(a.shape[1:], a.dtype) for a in ins])
        types = [((b,) + tuple(shape), dtype) for shape, dtype in types]
        if out is None:
            outs = [np.empty(shape, dtype) for shape, dtype in types]
        else:
            try:
                outs = _check_out(out, types)
            except InvalidArgument as e:
                raise self._refused(name, e) from None
        _check_sigint(self._lib, tok, self._lib.callbox_call_batch(
            self._handle, tok, None if chain is None else _b(chain), _b(name),
            _tensors(ins), len(ins), _tensors(outs), len(outs)))
        return _result(outs, out)

    def tap(self, name: str, *arrays: ArrayLike) -> None:
        """Run a callback for its side effect, asynchronously (inputs are
        copied first, converted as for call); its error is raised by the
        next barrier()."""
        ins = self._inputs(name, arrays)
        check(self._lib, self._lib.callbox_tap(self._handle, _b(name), _tensors(ins), len(ins)))

    def barrier(self) -> None:
        """Wait for every tap; raise the first error among them since the
        previous barrier. From the main thread Ctrl-C ends the wait
        (KeyboardInterrupt; the taps run on), as it ends a call."""
        _barrier(self._lib, self._handle, None)

    def chain(self, name: str) -> "Chain":
        """The ordered chain with this name (the same chain for the same
        name)."""
        return Chain(self, name)


def _invoke(lib, handle, chain, name, ins, outs):
    """One synchronous call (on chain when it is not None). From the main
    thread, while Python's own Ctrl-C handling is in place, the call is
    made with the SIGINT cancel token: Ctrl-C cancels it within
    milliseconds (the guest is interrupted, no output is written) and
    KeyboardInterrupt is raised, instead of waiting for the call's
    timeout."""
    tok = _sigint_token(lib)
    ti, to = _tensors(ins), _tensors(outs)
    if tok:
        _check_sigint(lib, tok, lib.callbox_call_cancelable(handle, tok, chain, name, ti, len(ins), to, len(outs)))
    elif chain is None:
        check(lib, lib.callbox_call(handle, name, ti, len(ins), to, len(outs)))
    else:
        check(lib, lib.callbox_chain_call(handle, chain, name, ti, len(ins), to, len(outs)))


def _barrier(lib, handle, chain):
    """A host's (chain None) or a chain's barrier, under the SIGINT token
    where there is one (a library of C API 1.6 or later)."""
    tok = _sigint_token(lib)
    if tok and hasattr(lib, "callbox_barrier_cancelable"):
        _check_sigint(lib, tok, lib.callbox_barrier_cancelable(handle, tok, chain))
    elif chain is None:
        check(lib, lib.callbox_barrier(handle))
    else:
        check(lib, lib.callbox_chain_barrier(handle, chain))


def _check_sigint(lib, tok, err):
    """check for a call made under the SIGINT token tok (0: none): its
    Canceled is Ctrl-C's, and raises KeyboardInterrupt, as Python's own
    handler would have. (That handler may have run already, and its
    KeyboardInterrupt been lost, inside a log callback the library made
    from this thread during the call.)"""
    try:
        check(lib, err)
    except Canceled:
        if tok:
            raise KeyboardInterrupt from None
        raise


_sigint = {}


def _sigint_token(lib):
    """The process's SIGINT cancel token (made and bound to SIGINT on first
    use), or 0 off the main thread or when the program handles SIGINT
    itself (then a call is not canceled by Ctrl-C)."""
    if threading.current_thread() is not threading.main_thread():
        return 0
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return 0
    tok = _sigint.get(os.getpid())
    if tok is None:
        t = _lib.CancelToken(0)
        check(lib, lib.callbox_cancel_token_new(ctypes.byref(t)))
        tok = _sigint[os.getpid()] = t.value
    # Every time, not once: signal.signal (asyncio.run swaps SIGINT's
    # handler and restores it) replaces the library's C handler while
    # getsignal still reports Python's. The call reinstalls it only when it
    # is not in place (one sigaction query otherwise).
    check(lib, lib.callbox_cancel_on_signal(tok, signal.SIGINT))
    return tok


def _close_handle(lib, handle):
    """A dropped Host's finalizer: close it, ignoring errors (there is no
    caller to raise to)."""
    try:
        err = lib.callbox_close(handle)
        if err:
            lib.callbox_error_free(err)
    except Exception:  # noqa: BLE001 - a finalizer must not raise
        pass


def _check_out(out: Out, types: List[Tuple[Tuple[int, ...], np.dtype]]) -> List[np.ndarray]:
    """The out= arrays as the library is handed them. Their count, dtypes and
    shapes are the library's to judge, in its words, as for every door
    (python/tests/test_doors.py); only what a NumPy array adds is checked
    here: that it is one, in native byte order (which a DLPack tensor
    cannot describe), laid out row-major, and writable."""
    outs = [out] if isinstance(out, np.ndarray) else list(out)
    for i, o in enumerate(outs):
        if not isinstance(o, np.ndarray):
            want = "%s%s" % (_lib_name(types[i][1]), list(types[i][0])) if i < len(types) else "no result"
            raise InvalidArgument("out[%d]: a %s, not a NumPy array (the result is %s)"
                                  % (i, type(o).__name__, want))
        if not o.dtype.isnative:
            raise InvalidArgument("out[%d]: got %s array: results are written in native byte order (allocate it "
                                  "with np.empty(%s, %s))" % (i, o.dtype.str, o.shape, _np_name(o.dtype.newbyteorder("="))),)
        if not o.flags.c_contiguous:
            raise InvalidArgument("out[%d]: not C-contiguous (results are written row-major in place)" % i)
        if not o.flags.writeable:
            raise InvalidArgument("out[%d]: read-only" % i)
    return outs


def _result(outs: List[np.ndarray], out: Optional[Out]) -> Result:
    if out is not None and not isinstance(out, np.ndarray):
        return tuple(outs)
    return outs[0] if len(outs) == 1 else tuple(outs)


def _looks_like_path(config: Union[str, "os.PathLike[str]"]) -> bool:
    s = os.fspath(config)
    if isinstance(s, bytes):
        s = os.fsdecode(s)
    if "\n" in s or s.lstrip().startswith("{"):
        return False
    return os.path.splitext(s)[1].lower() in (".yaml", ".yml", ".toml", ".json") or os.path.exists(s)


def _info(c: _lib.CallbackInfo) -> CallbackInfo:
    return CallbackInfo(c.name.decode(), c.id.decode(), c.signature.decode(), c.engine.decode(),
                        c.batching.decode(), c.num_inputs, c.num_outputs)


class Chain:
    """An ordered chain: its calls and taps run strictly in the order made.
    The first failure fails the chain: later calls raise ChainError naming
    the failed step and the refused one (and taps report it at the
    barrier) until reset()."""

    def __init__(self, host: Host, name: str) -> None:
        if not name:
            raise InvalidArgument("chain: empty name")
        self.host = host
        self.name = name
        self._name = _b(name)

    def call(self, callback: str, *arrays: ArrayLike, out: Optional[Out] = None) -> Result:
        """Run a call as the chain's next step and return its result(s)
        (arguments and out= as for Host.call)."""
        h = self.host
        ins, outs = h._prepare(callback, arrays, out)
        _invoke(h._lib, h._handle, self._name, _b(callback), ins, outs)
        return _result(outs, out)

    def call_batch(self, callback: str, *arrays: ArrayLike, out: Optional[Out] = None) -> Result:
        """A batched call (Host.call_batch) as the chain's next step: its
        elements run in order, whatever the callback's batching; a failing
        element fails the chain."""
        return self.host.call_batch(callback, *arrays, out=out, chain=self.name)

    def tap(self, callback: str, *arrays: ArrayLike) -> None:
        """Queue a side-effect call as the chain's next step; returns at once."""
        h = self.host
        ins = h._inputs(callback, arrays)
        check(h._lib, h._lib.callbox_chain_tap(h._handle, self._name, _b(callback), _tensors(ins), len(ins)))

    def barrier(self) -> None:
        """Wait for every queued step; raise the chain's first failure.
        Ctrl-C ends the wait from the main thread, as Host.barrier."""
        _barrier(self.host._lib, self.host._handle, self._name)

    def reset(self) -> None:
        """Wait for queued steps and clear the chain's failure, so that later
        calls run again (sequence numbers continue)."""
        check(self.host._lib, self.host._lib.callbox_chain_reset(self.host._handle, self._name))

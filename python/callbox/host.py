"""Hosts, calls and chains over libcallbox's C API."""

import collections
import ctypes
import json
import os
import signal
import threading
import weakref

import numpy as np

from . import _lib
from .errors import InvalidArgument, check

CallbackInfo = collections.namedtuple(
    "CallbackInfo", "name id signature engine batching num_inputs num_outputs")
CallbackInfo.__doc__ = """A loaded callback: name, content id ("cb1-..."), signature text, engine,
batching rule (JAX vmap_method name), and its input and output counts."""

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
        raise InvalidArgument("bf16 tensors need the ml_dtypes package (it comes with jax)", code=3) from None
    return np.dtype(ml_dtypes.bfloat16)


def _dl(dtype):
    dtype = np.dtype(dtype)
    to_dl, from_dl = _dtype_tables()
    dl = to_dl.get(dtype)
    if dl is None:
        if dtype.name == "bfloat16":
            return next(k for k in from_dl if k[0] == _BF16)
        names = ", ".join(info.name.decode() for info in _lib.dtypes())
        raise InvalidArgument("dtype %s has no callbox equivalent (%s)" % (dtype, names), code=3)
    return dl


def _np_dtype(code, bits):
    d = _dtype_tables()[1][(code, bits)]
    return _bfloat16() if d is None else d


def _contiguous(a):
    """a as a C-contiguous NumPy array: no copy when it already is one
    (np.ascontiguousarray would turn a 0-d array into a 1-d one)."""
    a = np.asarray(a)
    if not a.flags.c_contiguous:
        a = np.array(a, order="C")
    return a


def _tensors(arrays):
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


def _b(s):
    return s.encode() if isinstance(s, str) else s


class Host:
    """Loaded callbacks and the sandboxes that run them.

    config is a path to a config file (.yaml, .yml, .toml, .json), a dict
    (the config's content), or config text (YAML or JSON; base_dir resolves
    its relative paths, default the working directory). A Host is safe to
    share between threads; calls release the GIL while they run.
    """

    def __init__(self, config=None, *, format=None, base_dir=None, _handle=None):
        self._lib = _lib.lib()
        self._owned = _handle is None
        self._infos = {}
        self._types = {}
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
    def default(cls):
        """The process's default host: the one the XLA handler uses (set
        with set_default, else opened from CALLBOX_CONFIG)."""
        lib = _lib.lib()
        h = _lib.Host(0)
        check(lib, lib.callbox_default_host(ctypes.byref(h)))
        return cls(_handle=h.value)

    def set_default(self):
        """Make this host the default host (the one the XLA handler calls)."""
        check(self._lib, self._lib.callbox_set_default_host(self._handle))

    @property
    def handle(self):
        """The C API handle (callbox_host)."""
        return self._handle

    def close(self):
        """Wait for calls in flight and release the host; later calls raise
        FailedPrecondition. Closing twice is allowed. A Host that is dropped
        without close() is closed when it is garbage-collected (keep a
        reference to a host made the default with set_default)."""
        fin = getattr(self, "_finalizer", None)
        if fin is not None:
            fin.detach()
        check(self._lib, self._lib.callbox_close(self._handle))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- callbacks ----

    def callbacks(self):
        """Every loaded callback, sorted by name."""
        n = ctypes.c_size_t(0)
        check(self._lib, self._lib.callbox_callback_count(self._handle, ctypes.byref(n)))
        out = []
        for i in range(n.value):
            info = _lib.CallbackInfo()
            check(self._lib, self._lib.callbox_callback_at(self._handle, i, ctypes.byref(info)))
            out.append(_info(info))
        return out

    def callback(self, name_or_id):
        """The callback with this name or content id."""
        info = self._infos.get(name_or_id)
        if info is None:
            c = _lib.CallbackInfo()
            check(self._lib, self._lib.callbox_callback_find(self._handle, _b(name_or_id), ctypes.byref(c)))
            info = self._infos[name_or_id] = _info(c)
        return info

    def output_types(self, name, *inputs):
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

    def _prepare(self, name, arrays):
        ins = [_contiguous(a) for a in arrays]
        outs = [np.empty(shape, dtype) for shape, dtype in self.output_types(name, *ins)]
        return ins, outs

    def call(self, name, *arrays):
        """Call a callback (by name or content id) on NumPy arrays. Returns
        its result, or a tuple of results when it has several. Inputs are
        passed by pointer (a non-contiguous one is copied first); results
        are written straight into new arrays."""
        ins, outs = self._prepare(name, arrays)
        _invoke(self._lib, self._handle, None, _b(name), ins, outs)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def tap(self, name, *arrays):
        """Run a callback for its side effect, asynchronously (inputs are
        copied first); its error is raised by the next barrier()."""
        ins = [_contiguous(a) for a in arrays]
        check(self._lib, self._lib.callbox_tap(self._handle, _b(name), _tensors(ins), len(ins)))

    def barrier(self):
        """Wait for every tap; raise the first error among them since the
        previous barrier."""
        check(self._lib, self._lib.callbox_barrier(self._handle))

    def chain(self, name):
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
        check(lib, lib.callbox_call_cancelable(handle, tok, chain, name, ti, len(ins), to, len(outs)))
    elif chain is None:
        check(lib, lib.callbox_call(handle, name, ti, len(ins), to, len(outs)))
    else:
        check(lib, lib.callbox_chain_call(handle, chain, name, ti, len(ins), to, len(outs)))


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
        check(lib, lib.callbox_cancel_on_signal(t, signal.SIGINT))
        tok = _sigint[os.getpid()] = t.value
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


def _looks_like_path(config):
    s = os.fspath(config)
    if isinstance(s, bytes):
        s = os.fsdecode(s)
    if "\n" in s or s.lstrip().startswith("{"):
        return False
    return os.path.splitext(s)[1].lower() in (".yaml", ".yml", ".toml", ".json") or os.path.exists(s)


def _info(c):
    return CallbackInfo(c.name.decode(), c.id.decode(), c.signature.decode(), c.engine.decode(),
                        c.batching.decode(), c.num_inputs, c.num_outputs)


class Chain:
    """An ordered chain: its calls and taps run strictly in the order made.
    The first failure fails the chain: later calls raise an error naming it
    (and taps report it at the barrier) until reset()."""

    def __init__(self, host, name):
        if not name:
            raise InvalidArgument("chain: empty name", code=3)
        self.host = host
        self.name = name
        self._name = _b(name)

    def call(self, callback, *arrays):
        """Run a call as the chain's next step and return its result(s)."""
        h = self.host
        ins, outs = h._prepare(callback, arrays)
        _invoke(h._lib, h._handle, self._name, _b(callback), ins, outs)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def tap(self, callback, *arrays):
        """Queue a side-effect call as the chain's next step; returns at once."""
        h = self.host
        ins = [_contiguous(a) for a in arrays]
        check(h._lib, h._lib.callbox_chain_tap(h._handle, self._name, _b(callback), _tensors(ins), len(ins)))

    def barrier(self):
        """Wait for every queued step; raise the chain's first failure."""
        check(self.host._lib, self.host._lib.callbox_chain_barrier(self.host._handle, self._name))

    def reset(self):
        """Wait for queued steps and clear the chain's failure, so that later
        calls run again (sequence numbers continue)."""
        check(self.host._lib, self.host._lib.callbox_chain_reset(self.host._handle, self._name))

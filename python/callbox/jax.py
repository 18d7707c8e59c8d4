"""callbox inside JAX programs, through XLA's FFI (CPU and GPU).

    import callbox, callbox.jax
    host = callbox.Host("callbox.yaml")
    callbox.jax.register(host)          # the XLA handler calls this host
    f = jax.jit(lambda x: callbox.jax.call("scale", x, 2))
    with callbox.jax.typed_errors():    # callbox.Timeout, not JaxRuntimeError
        y = f(x).block_until_ready()

call() lowers to jax.ffi.ffi_call on the target "callbox" (the C handler
callbox_xla_ffi), with result shapes from the C API and the callback's
content id as the attribute, so an exported program names the exact
module. Under vmap it follows the callback's `batching` config key.
Python scalars and weakly typed JAX values take their parameter's dtype
as JAX's type promotion would give them (see call()). call(..., host=h)
runs on h at execution too (the custom call names it: library 1.11).

A callback's failure inside a program reaches Python as XLA's error,
jax.errors.JaxRuntimeError ("DEADLINE_EXCEEDED: callbox Timeout: ...
[callbox error 5f2c9a1e-17]"; jaxlib 0.7 and 0.10 raise ValueError for
code FAILED_PRECONDITION). typed_errors() (a context manager and a
decorator) raises instead the exception host.call raises for the same
failure (callbox.Timeout, callbox.GuestError, callbox.ChainError, ...),
with every field (kind, code, callback, chain, seq, message,
guest_message), and XLA's error as its __cause__: the library keeps each
failure under the token that ends XLA's message, and gives it back
(callbox_xla_failure). failure(e) gives that exception without raising
it.

call(..., ordered=True) and tap() are ordered the way
io_callback(ordered=True) is: a primitive with an ordered effect whose
lowering threads JAX's effect token through the custom call, so JAX keeps
the calls in program order through jit, cond, while and scan, and a
failing call stops the later ones. Its custom call has the form ffi_call
emits (row-major operand and result layouts, attributes in
mhlo.backend_config). Under vmap an ordered call runs once per batch
element, in order, whatever the callback's `batching` key (io_callback
refuses to vmap ordered callbacks).

Under jax.jit a program with an ordered call takes JAX's slow dispatch
(a token from each execution into the next, through Python);
callbox.jax.jit(f) starts that token inside the program, so the ordered
call costs what an unordered one does, with the order its docstring
states.

Programs lowered by `callbox lower` (lowering/) name the same target,
"callbox": they run in any process where register() was called.
"""

import contextlib
import ctypes
import functools
import inspect
from typing import Any, Callable, List, Optional, TypeVar, Union, overload

import numpy as np

import jax
import jax.numpy as jnp

# JAX's own ordered callbacks are built from these (private) modules; the
# ordered primitive below follows io_callback's recipe.
from jax._src import callback as _callback
from jax._src import core as _core
from jax._src import dispatch as _dispatch
from jax._src import effects as _effects
from jax._src import ffi as _jax_ffi
from jax._src.interpreters import ad as _ad
from jax._src.interpreters import batching as _batching
from jax._src.interpreters import mlir as _mlir
from jax._src.interpreters import partial_eval as _pe
from jax._src.lib.mlir import ir as _ir
from jax._src.lib.mlir.dialects import hlo as _hlo
from jax._src.sharding_impls import SdyArray as _SdyArray
from jax._src.sharding_impls import ShardingContext as _ShardingContext
from jax._src.sharding_impls import SdyArrayList as _SdyArrayList

from . import _lib
from .errors import CallbackError, InvalidArgument, check, exception
from .host import Host, Param, _argname, _is_python_scalar, _lib_name

TARGET = "callbox"

_registered = set()
_default_host = None


def register(host: Optional[Host] = None, *, platform: str = "cpu") -> None:
    """Register the XLA FFI target "callbox" with JAX (once per platform)
    and, when host is given, make it the host the handler calls.

    platform "cpu" registers the CPU handler (callbox_xla_ffi); without a
    host, it opens one from CALLBOX_CONFIG on first use. platform "cuda"
    (or "gpu") registers the GPU handler (callbox_xla_ffi_cuda, library
    1.1): device buffers are copied straight into the sandbox on XLA's
    stream. The GPU handler serves the default host and does not open one
    itself, so without a host the default host is opened now (from
    CALLBOX_CONFIG)."""
    global _default_host
    lib = _lib.lib()
    gpu = platform.lower() in ("cuda", "gpu")
    if host is not None:
        host.set_default()
        _default_host = host
    elif gpu:
        _host(None)
    key = "cuda" if gpu else platform
    if key not in _registered:
        if gpu:
            if not hasattr(lib, "callbox_xla_ffi_cuda"):
                raise OSError("libcallbox %s has no GPU handler (callbox_xla_ffi_cuda needs 1.1)" % lib.callbox_version().decode())
            target = jax.ffi.pycapsule(lib.callbox_xla_ffi_cuda)
        else:
            target = jax.ffi.pycapsule(lib.callbox_xla_ffi)
        jax.ffi.register_ffi_target(TARGET, target, platform="CUDA" if gpu else platform)
        _register_ordered(key)
        _registered.add(key)


def _host(host: Optional[Host]) -> Host:
    global _default_host
    if host is not None:
        return host
    if _default_host is None:
        _default_host = Host.default()
    return _default_host


def call(name: str, *args: Any, ordered: bool = False, chain: Optional[str] = None,
         host: Optional[Host] = None) -> Any:
    """Call callback name (or content id) on JAX arrays inside a traced
    program. Returns its result, or a tuple when it has several.

    Under vmap the callback's `batching` config key decides (JAX's
    vmap_method names): "sequential" (default) runs one call per batch
    element; "expand_dims" and "broadcast_all" make one call on the whole
    batch. For those two the callback's signature describes the batched
    call: every parameter and result has a leading batch dimension, which
    callbox.jax.call adds (size 1) and removes around an unbatched call;
    under vmap an unbatched argument gets a size-1 leading dimension
    (expand_dims) or is broadcast to the batch size (broadcast_all).
    "parallel" makes one call on the whole batch too, but the signature is
    the per-element one: the handler splits the batch along its leading
    dimension and the host runs the elements in parallel on pooled
    instances (attribute batched="true", callbox_call_batch).

    ordered=True orders the call with every other ordered callbox call and
    tap in the program (like io_callback(ordered=True)). Under vmap an
    ordered call with a batched operand runs once per batch element, in
    order (element 0 first), whatever the `batching` key; a callback with a
    leading batch dimension then gets batches of size 1. A call none of
    whose operands is batched is not batched by JAX: it runs once and its
    result is broadcast. An ordered call cannot be differentiated (a clear
    ValueError); wrap a pure call in jax.custom_jvp to give it a derivative.
    In a jit over several devices an ordered call must be made inside
    jax.shard_map (each device calls, in order, on its shard): under
    automatic partitioning XLA's Shardy partitioner cannot place it, and
    the lowering says so. chain names a
    host-side chain: its first failure fails every later call on it, in
    this and later executions, until the chain is reset.

    Arguments are JAX arrays (or anything jnp.asarray takes). A weakly
    typed one (a Python int, float or complex, or a JAX value marked
    weak_type, such as jnp.asarray(2)) takes its parameter's dtype D (from
    the callback's signature; as JAX has it, so f32 for f64 unless
    jax_enable_x64 is set) wherever JAX's type promotion of the two gives
    D, as in x * 2 for an x of dtype D: an int for any numeric D, a float
    for a floating or complex D, a complex for a complex D. Any other (a
    float for an integer parameter, a complex for a real one, an int for
    pred), and a Python int D cannot hold (JAX's OverflowError), is
    refused with InvalidArgument naming the callback and the argument. A
    strongly typed value (a NumPy array or scalar, jnp.float32(2), a
    Python bool, the result of a computation on strong values) must have
    dtype D: the host refuses another ("expected f32[], got s32[]").

    host is the host that runs the call: its result shapes and the content
    id come from it at trace time, and (library 1.11) the custom call names
    it (attribute host), so it runs on it at execution, whatever the
    default host is, without register(host). A program that names its host
    runs only in this process, and only while that host is open: executing
    it after host.close() raises FailedPrecondition (typed_errors()), and
    jax.export'ed or cached programs are for the default host: make them
    without host. Default: the registered host (register(host), else
    CALLBOX_CONFIG's), at trace time and at execution."""
    register()
    h = _host(host)
    info = h.callback(name)
    args = _arguments(h, name, args)
    hattr = _host_attr(host)
    if ordered:
        # A callback whose signature has a leading batch dimension gets one
        # of size 1, as an unordered call does; under vmap an ordered call
        # always runs once per element, in order (see _ordered_batching).
        lead = info.batching in ("expand_dims", "broadcast_all")
        if lead:
            args = [a[None] for a in args]
        types = h.output_types(name, *args)
        avals = tuple(_core.ShapedArray(s, d) for s, d in types)
        outs = _bind_ordered(args, info.name, _key(h, info), chain or "", hattr, avals)
        if lead:
            outs = [o[0] for o in outs]
        return outs[0] if len(outs) == 1 else tuple(outs)
    if info.batching == "parallel":
        return _parallel(h, name, info, chain, hattr)(*args)
    if info.batching not in ("expand_dims", "broadcast_all"):
        outs = _ffi(h, name, info, args, chain, hattr, "sequential")
        return outs[0] if len(outs) == 1 else tuple(outs)
    return _batched(h, name, info, chain, hattr)(*args)


def _host_attr(host: Optional[Host]) -> str:
    """The custom call's attribute host for an explicit host= ("" for
    none, and from a library before 1.11): the library's name for it
    (callbox_xla_host_attr), valid in this process while the host is
    open."""
    if host is None:
        return ""
    lib = host._lib
    if not hasattr(lib, "callbox_xla_host_attr"):
        return ""
    buf = ctypes.create_string_buffer(_lib.XLA_HOST_ATTR_SIZE)
    check(lib, lib.callbox_xla_host_attr(host._handle, buf, len(buf)))
    return buf.value.decode()


def _is_weak(a: Any) -> bool:
    """Whether JAX types a as weakly typed (Python scalars but bool;
    values JAX marks weak_type). NumPy values are strongly typed."""
    if isinstance(a, (np.ndarray, np.generic)):
        return False
    try:
        return bool(jax.typeof(a).weak_type)
    except TypeError:  # not a JAX type (a list, say): jnp.asarray decides
        return False


def _arguments(h: Host, name: str, args: Any) -> List[Any]:
    """The arguments as JAX values: a weakly typed one (_is_weak) as its
    parameter's dtype, by JAX's type promotion (see call()); any other as
    jnp.asarray makes it, checked by the host at trace time."""
    params = h._param_dtypes(name)
    out = []
    for i, a in enumerate(args):
        p, target = params[i] if params is not None and i < len(params) else (None, None)
        if target is None or not _is_weak(a):
            out.append(jnp.asarray(a))
            continue
        out.append(_weak_as(h, name, a, i, p, np.dtype(target)))
    return out


def _weak_as(h: Host, name: str, a: Any, index: int, param: Param, target: np.dtype) -> Any:
    """Weakly typed a as target (JAX's canonical form of it: f32 for f64
    without jax_enable_x64), or the host's refusal of the call when JAX's
    promotion of a with target is not target."""
    d = np.dtype(jax.dtypes.canonicalize_dtype(target))
    promoted = np.dtype(jnp.result_type(d, a))
    python = _is_python_scalar(a)
    what = "Python %s %r" % (type(a).__name__, a) if python else "a weakly typed %s JAX value" % jax.typeof(a).dtype
    if promoted != d:
        fix = ("pass %s(...) to convert it on purpose" % _jnp_name(d) if python
               else "convert it with .astype(%s) on purpose" % _jnp_name(d))
        reason = ("%s: got %s, the callback takes %s, which JAX's type promotion does not make of it (it promotes "
                  "the two to %s): %s" % (_argname(index, param), what, _lib_name(d), _lib_name(promoted), fix))
        raise h._refused(name, InvalidArgument(reason)) from None
    if python:
        try:
            return jnp.asarray(a, dtype=d)
        except OverflowError as e:  # JAX's own refusal of a Python int out of range
            reason = "%s: got %s, the callback takes %s (%s)" % (_argname(index, param), what, _lib_name(d), e)
            raise h._refused(name, InvalidArgument(reason)) from None
    return jax.lax.convert_element_type(a, d)


def _jnp_name(d: np.dtype) -> str:
    """jnp's name of a dtype, for messages ("jnp.float32")."""
    return "jnp." + ("bool_" if d == np.bool_ else d.name)


# ---- typed errors ----

F = TypeVar("F", bound=Callable[..., Any])


def failure(error: BaseException) -> Optional[CallbackError]:
    """The callbox exception for the failure an XLA error reports: the
    exception (a CallbackError subclass per kind, ChainError for a chain
    step refused after an earlier failure) host.call raises for the same
    failure, with its kind, code, callback, chain, seq, message and
    guest_message, read from the library (callbox_xla_failure), which keeps
    each failure of its XLA handlers under the token that ends XLA's
    message. None when error reports no failure of this library's: not a
    callbox failure, a failure in another process, or one the library no
    longer keeps (it keeps its last 1024, fewer when their text passes
    4 MiB), or a library before 1.11. Not raised, and error is not set as
    its __cause__ (typed_errors() does both)."""
    lib = _lib.lib()
    if not hasattr(lib, "callbox_xla_failure"):
        return None
    out = _lib.ErrorP()
    check(lib, lib.callbox_xla_failure(str(error).encode("utf-8", "surrogateescape"), ctypes.byref(out)))
    if not out:
        return None
    return exception(lib, out)


class _TypedErrors(contextlib.ContextDecorator):
    """typed_errors()'s context manager and decorator."""

    def __enter__(self) -> "_TypedErrors":
        return self

    def __exit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> bool:
        # Whatever class JAX gives XLA's error (JaxRuntimeError; ValueError
        # for FAILED_PRECONDITION in jaxlib 0.7 and 0.10): the token decides.
        if not isinstance(exc, Exception) or isinstance(exc, CallbackError):
            return False
        typed = failure(exc)
        if typed is None:
            return False
        raise typed from exc


@overload
def typed_errors() -> _TypedErrors: ...


@overload
def typed_errors(fn: F) -> F: ...


def typed_errors(fn: Optional[F] = None) -> Union[_TypedErrors, F]:
    """Raise callbox failures out of JAX as the exceptions host.call
    raises: a context manager (with callbox.jax.typed_errors(): ...) and a
    decorator (@callbox.jax.typed_errors or @callbox.jax.typed_errors()).

    An exception raised inside whose text reports a callbox failure
    (failure(e): XLA's error, which JAX raises as jax.errors.JaxRuntimeError,
    or as ValueError for code FAILED_PRECONDITION in jaxlib 0.7 and 0.10)
    is raised as that failure's exception (callbox.Timeout,
    callbox.GuestError, callbox.ChainError, ...), with XLA's error as its
    __cause__; any other exception passes unchanged, as does an XLA error
    whose failure the library no longer keeps. JAX
    dispatches asynchronously: a failure is raised where the program's
    results are waited for (block_until_ready, np.asarray, printing them),
    an ordered call's or tap's at the latest by jax.effects_barrier(), so
    put that inside the block too."""
    if fn is None:
        return _TypedErrors()
    return _TypedErrors()(fn)


def _key(h, info):
    """What names the callback in the lowered program: its content id,
    which any host with the same module resolves, unless this host refuses
    that id as ambiguous (callbacks of the same code under different
    settings: abi/ABI.md, section 7); then its name."""
    try:
        h.callback(info.id)
        return info.id
    except InvalidArgument:
        return info.name


def _ffi(h, name, info, args, chain, hattr, vmap_method):
    types = h.output_types(name, *args)
    attrs = {"callback": _key(h, info)}
    if chain:
        attrs["chain"] = chain
    if hattr:
        attrs["host"] = hattr
    result = [jax.ShapeDtypeStruct(s, d) for s, d in types]
    return jax.ffi.ffi_call(TARGET, result, has_side_effect=bool(chain), vmap_method=vmap_method)(*args, **attrs)


def _batched(h, name, info, chain, hattr):
    """A function of the per-element arguments that calls a callback
    whose signature has a leading batch dimension, with a vmap rule that
    makes one call per batch."""

    @jax.custom_batching.custom_vmap
    def per_element(*xs):
        outs = _ffi(h, name, info, [x[None] for x in xs], chain, hattr, "sequential")
        outs = tuple(o[0] for o in outs)
        return outs[0] if len(outs) == 1 else outs

    @per_element.def_vmap
    def rule(axis_size, in_batched, *xs):
        batch = []
        for x, b in zip(xs, in_batched):
            if b:
                batch.append(x)
            elif info.batching == "broadcast_all":
                batch.append(jnp.broadcast_to(x, (axis_size,) + tuple(x.shape)))
            else:
                batch.append(x[None])
        outs = tuple(_ffi(h, name, info, batch, chain, hattr, "sequential"))
        if len(outs) == 1:
            return outs[0], True
        return outs, tuple(True for _ in outs)

    return per_element


def _parallel(h, name, info, chain, hattr):
    """A function of the per-element arguments whose vmap makes one custom
    call on the whole batch with the attribute batched="true": the handler
    splits it along the leading dimension and the host runs the elements
    in parallel on pooled instances (batching "parallel"; in order on a
    chain). An unbatched argument is broadcast to the batch size (the host
    has no broadcast). Under a second vmap JAX loops the outer dimension
    (vmap_method "sequential")."""

    @jax.custom_batching.custom_vmap
    def per_element(*xs):
        outs = tuple(_ffi(h, name, info, list(xs), chain, hattr, "sequential"))
        return outs[0] if len(outs) == 1 else outs

    @per_element.def_vmap
    def rule(axis_size, in_batched, *xs):
        batch = [x if b else jnp.broadcast_to(x, (axis_size,) + tuple(x.shape)) for x, b in zip(xs, in_batched)]
        types = h.output_types(name, *[jax.ShapeDtypeStruct(tuple(x.shape[1:]), x.dtype) for x in batch])
        attrs = {"callback": _key(h, info), "batched": "true"}
        if chain:
            attrs["chain"] = chain
        if hattr:
            attrs["host"] = hattr
        result = [jax.ShapeDtypeStruct((axis_size,) + tuple(s), d) for s, d in types]
        outs = tuple(jax.ffi.ffi_call(TARGET, result, has_side_effect=bool(chain), vmap_method="sequential")(
            *batch, **attrs))
        if len(outs) == 1:
            return outs[0], True
        return outs, tuple(True for _ in outs)

    return per_element


def reset(chain: Optional[str] = None, host: Optional[Host] = None) -> None:
    """Make the next execution with ordered callbox calls start clean
    after one failed.

    JAX threads one token per ordered effect from each execution into the
    next. After a failing execution over several devices (shard_map), JAX
    0.7 to 0.10 keep the errored token and feed it to every later
    execution, so every later ordered callbox call in the process fails
    with the old error (JAX issue 37587; io_callback has the same). reset()
    waits for the failed execution to end, then drops callbox's token in
    this thread (JAX keeps tokens per thread), so the next execution starts
    from a fresh one. On the CPU backend a failure on one device needs no
    reset (JAX does not keep that token); on the GPU backend (jax 0.11.2,
    seen on an H200) it does keep it, even for one device. reset() is
    harmless where nothing was kept, and not needed under callbox.jax.jit,
    which passes no token between executions. With chain, it also
    resets that host chain (Chain.reset), whose failure otherwise refuses
    every later call on it, by design."""
    tokens = _dispatch.runtime_tokens.current_tokens
    token = tokens.get(_effect)
    if token is not None:
        try:
            token.block_until_ready()
        except Exception:  # noqa: BLE001  (the failure it carries was raised already)
            pass
        tokens.pop(_effect, None)
    if chain:
        _host(host).chain(chain).reset()


def tap(name: str, *args: Any, chain: Optional[str] = None, host: Optional[Host] = None) -> Any:
    """Run callback name for its side effect, ordered (like io_callback
    with ordered=True); its results are discarded. Returns args (the first
    one when there is only one), so a tap can be threaded through code."""
    call(name, *args, ordered=True, chain=chain, host=host)
    return args[0] if len(args) == 1 else args


# ---- the ordered primitive ----
#
# Built the way JAX builds io_callback(ordered=True) (jax/_src/callback.py;
# JAX 0.7 to 0.10 tested)
# and lowered the way jax.ffi.ffi_call lowers (jax/_src/ffi.py): the same
# effect registrations, the same token handling, the same custom-call form
# (row-major layouts, attributes in mhlo.backend_config), the same abstract
# eval rule for shardings and varying manual axes.


class CallboxOrderedEffect(_effects.Effect):
    """The ordered effect of callbox calls: one token orders them all."""

    def __str__(self):
        return "CallboxOrdered"

    # One effect, however made: jax.export rebuilds an ordered effect from
    # its class (a nullary constructor that must give an equal object) when
    # it serializes a program with callbox calls.
    def __eq__(self, other):
        return isinstance(other, CallboxOrderedEffect)

    def __hash__(self):
        return hash(CallboxOrderedEffect)


_effect = CallboxOrderedEffect()

# The registries io_callback registers OrderedIOEffect in, and why:
#   ordered_effects: JAX threads a token through every equation with the
#     effect (and through the jitted function and between executions), so
#     calls keep program order and a failing one stops the later ones.
#   lowerable_effects: a jaxpr with the effect may be lowered at all.
#   control_flow_allowed_effects: the effect may appear inside cond, while,
#     scan and fori_loop (their lowering carries the token through).
#   shardable_ordered_effects: JAX does not refuse a jit over several devices
#     with the effect ("ordered effects are not supported for more than 1
#     device"); the lowering below gives the call io_callback's sharding, so
#     under GSPMD it runs once, on the first device, and inside shard_map on
#     each; under Shardy, automatic partitioning is refused at lowering
#     (_check_partitioning).
# Like io_callback, and unlike the unordered ffi_call's FfiEffect, the effect
# is NOT in remat_allowed_effects or custom_derivatives_allowed_effects:
# jax.checkpoint would run an ordered call again when it recomputes the
# forward pass (an extra step on a chain), and the primitive has no JVP, so
# refusing it at trace time is the honest answer.
for _registry in ("ordered_effects", "lowerable_effects", "control_flow_allowed_effects",
                  "shardable_ordered_effects"):
    getattr(_effects, _registry).add_type(CallboxOrderedEffect)

_ordered_p = _core.Primitive("callbox_ordered_call")
_ordered_p.multiple_results = True
_ordered_p.def_impl(functools.partial(_dispatch.apply_primitive, _ordered_p))


def _bind_ordered(args, name, callback, chain, host, result_avals):
    # ffi_call inserts the casts that make its inputs agree on varying manual
    # axes (shard_map) before binding; so do we.
    # (JAX 0.9 and later; before it, ffi_call inserted none either.)
    reshard = getattr(_core, "auto_insert_reshard", None)
    if reshard is not None:
        args = reshard(*args)
    return _ordered_p.bind(*args, name=name, callback=callback, chain=chain, host=host,
                           result_avals=tuple(result_avals))


@_ordered_p.def_effectful_abstract_eval
def _ordered_abstract_eval(*avals, name, callback, chain, host, result_avals):
    # ffi_call's own abstract eval rule, whatever the installed JAX makes it
    # (inputs agreeing on varying manual axes; since JAX 0.8, results without
    # a mesh taking the current mesh's sharding), with our effect instead of
    # ffi_call's: the ordered call's results have exactly an ffi_call's types.
    outs, _ = _jax_ffi.ffi_call_abstract_eval(*avals, result_avals=result_avals, has_side_effect=True)
    return list(outs), {_effect}


def _row_major(aval):
    """XLA's minor-to-major order for a dense row-major array of aval's rank
    (what ffi_call passes when no layout is given); a token has rank 0."""
    return tuple(reversed(range(len(getattr(aval, "shape", ())))))


def _check_partitioning(axis_context, name):
    """Refuses, at lowering, the one placement XLA cannot compile: an
    ordered call under automatic partitioning over several devices with
    the Shardy partitioner (JAX's default since 0.7). Shardy keeps the
    maximal (one-device) sharding that io_callback's recipe gives the call
    only for JAX's own Python-callback targets and drops it for any other
    custom call; XLA then fails with an INTERNAL RET_CHECK ("Side-effect
    HLO must have sharding") that names nothing of the user's. The same
    holds for jax.ffi.ffi_call(has_side_effect=True). Inside shard_map
    (all axes manual) the call runs on each device, in order, and works;
    so does the GSPMD partitioner (jax_use_shardy_partitioner=False)."""
    if not isinstance(axis_context, _ShardingContext) or axis_context.num_devices <= 1:
        return
    if not jax.config.jax_use_shardy_partitioner:
        return
    raise NotImplementedError(
        "callbox: ordered call of callback %r in a jit over %d devices: XLA's Shardy partitioner places a "
        "side-effecting custom call on one device only for JAX's own Python callbacks, so XLA cannot compile "
        "it. Make the ordered calls inside jax.shard_map (each device makes its own calls, in order), jit "
        "the function on one device, or set jax_use_shardy_partitioner=False (GSPMD: the call runs once, "
        "on the first device)." % (name, axis_context.num_devices))


# JAX 0.9 gave mlir.aval_to_ir_type and mlir.set_sharding the module
# context as a first parameter; read once which form the installed JAX has
# (a TypeError caught per call would also hide a real one).
_MLIR_TAKES_MODULE_CONTEXT = "ctx" in inspect.signature(_mlir.set_sharding).parameters


def _ir_type(mctx, aval):
    """aval's MLIR type, in either form of mlir.aval_to_ir_type."""
    return _mlir.aval_to_ir_type(mctx, aval) if _MLIR_TAKES_MODULE_CONTEXT else _mlir.aval_to_ir_type(aval)


def _ordered_lowering(ctx, *operands, name, callback, chain, host, result_avals):
    _check_partitioning(ctx.module_context.axis_context, name)
    token = ctx.tokens_in.get(_effect)
    attrs = {"callback": _ir.StringAttr.get(callback)}
    if chain:
        attrs["chain"] = _ir.StringAttr.get(chain)
    if host:
        attrs["host"] = _ir.StringAttr.get(host)
    mctx = ctx.module_context
    result_types = [_ir_type(mctx, a) for a in ctx.avals_out] + [_hlo.TokenType.get()]
    # Layouts: ffi_call always passes them (row-major, minor-to-major);
    # without them XLA may pick another layout for an operand (a transposed
    # one reaches the handler column-major). The token gets the empty layout,
    # as JAX gives tokens.
    # backend_config: a dict of attributes, as ffi_call passes it. For a dict,
    # mlir.custom_call writes it as mhlo.backend_config beside backend_config
    # = "" and sets api_version 1 (StableHLO's custom_call verifier wants a
    # string backend_config), exactly as for every ffi_call; XLA's StableHLO
    # import turns a dictionary mhlo.backend_config into a typed-FFI call
    # (API_VERSION_TYPED_FFI) with those attributes. So api_version=4 here
    # is what ffi_call passes, and the emitted text is ffi_call's.
    op = _mlir.custom_call(
        TARGET,
        result_types=result_types,
        operands=[*operands, token],
        has_side_effect=True,
        api_version=4,
        backend_config=attrs,
        operand_layouts=[_row_major(a) for a in ctx.avals_in] + [()],
        result_layouts=[_row_major(a) for a in ctx.avals_out] + [()],
    )
    # io_callback's sharding (jax/_src/callback.py _callback_op_sharding):
    # under jit (automatic partitioning, one device or several) a maximal
    # sharding on the first device, so the call runs once; inside shard_map
    # (all axes manual) it runs on each device. Shardy wants one sharding per
    # result: the token's is added, as io_callback adds its token's.
    sharding = _callback._callback_op_sharding(mctx.axis_context, None, ctx.avals_out)
    if sharding is not None:
        if isinstance(sharding, _SdyArrayList):
            first = sharding.shardings[0]
            token_sharding = _SdyArray(mesh_shape=(), dim_shardings=(), logical_device_ids=first.logical_device_ids)
            shardings = list(sharding.shardings)[:len(ctx.avals_out)]
            sharding = _SdyArrayList(tuple(shardings) + (token_sharding,))
        if _MLIR_TAKES_MODULE_CONTEXT:
            _mlir.set_sharding(mctx, op, sharding)
        else:
            _mlir.set_sharding(op, sharding)
    results = list(op.results)
    # Update our token in the set, keep every other effect's (io_callback's
    # pattern): replacing the set would drop the tokens of other ordered
    # effects (io_callback, debug prints) in the same program.
    ctx.set_tokens_out(ctx.tokens_in.update_tokens(_mlir.TokenSet({_effect: results[-1]})))
    return results[:-1]


def _ordered_batching(args, dims, *, name, callback, chain, host, result_avals):
    """vmap of an ordered call: one call per batch element, in order (index
    0 first), each an ordered call of its own, through lax.map (a scan,
    which carries the token). io_callback refuses to vmap ordered callbacks;
    this is ffi_call's "sequential" method with the order kept."""
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    moved = [a if d is None else _batching.moveaxis(a, d, 0) for a, d in zip(args, dims)]
    batched = [d is not None for d in dims]

    def one(xs):
        it = iter(xs)
        merged = [next(it) if b else a for a, b in zip(moved, batched)]
        return _ordered_p.bind(*merged, name=name, callback=callback, chain=chain, host=host,
                               result_avals=result_avals)

    outs = jax.lax.map(one, [a for a, b in zip(moved, batched) if b])
    assert all(o.shape[0] == size for o in outs)
    return list(outs), [0] * len(outs)


def _register_ordered(platform):
    _mlir.register_lowering(_ordered_p, _ordered_lowering, platform=platform)


_batching.primitive_batchers[_ordered_p] = _ordered_batching


def _ordered_jvp(primals, tangents, *, name, **_):
    raise ValueError(
        "callbox: callback %r is called ordered and cannot be differentiated (an ordered call is an effect, which "
        "AD must not run again). Differentiate a pure call (ordered=False) that you wrap in jax.custom_jvp or "
        "jax.custom_vjp with the derivative." % name)


_ad.primitive_jvps[_ordered_p] = _ordered_jvp


# ---- callbox.jax.jit: ordered calls on JAX's fast dispatch ----
#
# JAX leaves its C++ dispatch fast path for any program whose jaxpr has an
# effect at the top (pjit's _get_fastpath_data): ordered effects thread a
# runtime token from each execution into the next through Python. The scope
# below keeps callbox's ordered effect inside the program, where JAX threads
# its token through every equation, cond, while, scan and nested jit, and
# starts that token in the program itself (stablehlo.create_token) instead of
# taking it from the last execution. The program then has no effect at the
# top and dispatches as fast as an unordered call; order between executions
# is XLA's: its CPU client makes each execution on a device wait for the one
# enqueued on that device before it (see jit()).


def jit(fun: Optional[Callable] = None, **jit_kwargs: Any) -> Any:
    """jax.jit for functions with ordered callbox calls: they keep their
    order and the program keeps JAX's fast dispatch (an ordered call costs
    what an unordered one does; under jax.jit each execution with one takes
    JAX's slow path, 10-30x the cost). A decorator (@callbox.jax.jit or
    @callbox.jax.jit(static_argnums=...)) taking jax.jit's keywords.

    The order it keeps:
      - within one execution: program order, through cond, while, scan,
        fori_loop, vmap and nested jit, as under jax.jit; a failing call
        stops the calls after it;
      - between executions on one device dispatched from one thread: the
        order of dispatch (XLA's CPU client starts an execution on a device
        only after the one enqueued there before it has ended, whatever its
        inputs; a GPU runs one device's executions on one stream);
      - from several threads: each execution in program order, executions
        in the order XLA enqueues them; XLA records a device's last
        execution under two separate locks, so two threads dispatching at
        the same instant may each run after the same earlier execution,
        and one thread's next execution may then start before its previous
        one has ended;
      - over several devices: each device in its own order (executions on
        different devices are not ordered, nor an execution over several
        devices with one on a single device).
    Where a program needs exactly io_callback(ordered=True)'s order (a
    token from each execution into the next, per thread, over every device)
    use jax.jit: the same calls there take JAX's ordered effect.

    A failing call raises where the program's results are waited for, as
    an unordered call's does (not at the next execution, as under jax.jit
    with an ordered effect), so a function with ordered calls must return
    an array: callbox.jax.jit refuses one that returns none. Called inside
    another traced function (jit, vmap, grad) the function is traced as
    under jax.jit, so its calls join the enclosing program's order. An
    unordered call on a chain (chain=..., ordered=False) carries JAX's FFI
    effect, which takes the slow path still; make it ordered."""
    if fun is None:
        return lambda f: jit(f, **jit_kwargs)
    return OrderedJit(fun, jit_kwargs)


class OrderedJit:
    """A function compiled by callbox.jax.jit (see jit()): called at the top
    level it runs its scoped program; inside another trace, jax.jit's."""

    def __init__(self, fun: Callable, jit_kwargs: dict):
        functools.update_wrapper(self, fun)
        self._scoped = jax.jit(_scoped(fun), **jit_kwargs)
        self._plain = jax.jit(fun, **jit_kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _core.trace_state_clean():
            return self._scoped(*args, **kwargs)
        return self._plain(*args, **kwargs)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        # A method: bound to its instance, as a jax.jit function is.
        return self if obj is None else functools.partial(self, obj)

    def trace(self, *args: Any, **kwargs: Any) -> Any:
        """The scoped program, traced (jax.jit's trace; jax.export exports
        it: the exported program has no ordered effect)."""
        return self._scoped.trace(*args, **kwargs)

    def lower(self, *args: Any, **kwargs: Any) -> Any:
        """The scoped program, lowered (jax.jit's lower)."""
        return self._scoped.lower(*args, **kwargs)

    def eval_shape(self, *args: Any, **kwargs: Any) -> Any:
        """The result shapes (jax.jit's eval_shape)."""
        return self._plain.eval_shape(*args, **kwargs)


def _scoped(fun):
    """fun, traced into one callbox_ordered_scope equation: the function
    jit() compiles. Arguments that are not traced (static ones) are
    constants of the trace."""

    @functools.wraps(fun)
    def scoped(*args, **kwargs):
        leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
        traced = [i for i, leaf in enumerate(leaves) if isinstance(leaf, _core.Tracer)]

        def flat(*values):
            merged = list(leaves)
            for i, v in zip(traced, values):
                merged[i] = v
            a, k = jax.tree_util.tree_unflatten(tree, merged)
            return fun(*a, **k)

        closed, shapes = jax.make_jaxpr(flat, return_shape=True)(*[leaves[i] for i in traced])
        out_leaves, out_tree = jax.tree_util.tree_flatten(shapes)
        if not out_leaves and _effect in closed.effects:
            raise TypeError(
                "callbox.jax.jit: %s makes ordered callbox calls and returns no array, so a failing call would "
                "be raised nowhere (its failure is raised where the results are waited for). Return an array "
                "(a tap returns its input), or use jax.jit (JAX's ordered effect raises it at the next "
                "execution)." % getattr(fun, "__qualname__", fun))
        jaxpr = _core.ClosedJaxpr(_pe.convert_constvars_jaxpr(closed.jaxpr), ())
        outs = _scope_p.bind(*closed.consts, *[leaves[i] for i in traced], jaxpr=jaxpr)
        return jax.tree_util.tree_unflatten(out_tree, outs)

    return scoped


_scope_p = _core.Primitive("callbox_ordered_scope")
_scope_p.multiple_results = True
_scope_p.def_impl(lambda *args, jaxpr: _core.jaxpr_as_fun(jaxpr)(*args))


@_scope_p.def_effectful_abstract_eval
def _scope_abstract_eval(*avals, jaxpr):
    # Every effect of the body but callbox's ordered one, whose token the
    # scope starts itself (other ordered effects, io_callback's, still take
    # their tokens from outside).
    return jaxpr.out_avals, {e for e in jaxpr.effects if not isinstance(e, CallboxOrderedEffect)}


def _scope_lowering(ctx, *args, jaxpr):
    lower = _mlir.lower_fun(_core.jaxpr_as_fun(jaxpr), multiple_results=True)
    if _effect not in jaxpr.effects:
        return lower(ctx, *args)
    outer = dict(ctx.tokens_in.items())
    inner = ctx.replace(tokens_in=_mlir.TokenSet({**outer, _effect: _mlir.create_token()}))
    outs = lower(inner, *args)
    if outer:
        ctx.set_tokens_out(_mlir.TokenSet({e: inner.tokens_out.get(e) for e in outer}))
    return outs


_mlir.register_lowering(_scope_p, _scope_lowering)
# The scope makes ordered calls: JAX's dead-code elimination must keep it
# even where its results are unused (it drops an equation without effects).
_pe.dce_rules[_scope_p] = lambda used_outputs, eqn: ([True] * len(eqn.invars), eqn)

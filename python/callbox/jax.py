"""callbox inside JAX programs, through XLA's FFI (CPU).

    import callbox, callbox.jax
    host = callbox.Host("callbox.yaml")
    callbox.jax.register(host)          # the XLA handler calls this host
    f = jax.jit(lambda x: callbox.jax.call("scale", x, jnp.float32(2)))

call() lowers to jax.ffi.ffi_call on the target "callbox" (the C handler
callbox_xla_ffi), with result shapes from the C API and the callback's
content id as the attribute, so an exported program names the exact
module. Under vmap it follows the callback's `batching` config key.

call(..., ordered=True) and tap() are ordered the way
io_callback(ordered=True) is: a primitive with an ordered effect whose
lowering threads JAX's effect token through the custom call, so JAX keeps
the calls in program order through jit, cond, while and scan, and a
failing call stops the later ones.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

# JAX's own ordered callbacks are built from these (private) modules; the
# ordered primitive below follows io_callback's recipe.
from jax._src import core as _core
from jax._src import dispatch as _dispatch
from jax._src import effects as _effects
from jax._src.interpreters import mlir as _mlir
from jax._src.lib.mlir import ir as _ir
from jax._src.lib.mlir.dialects import hlo as _hlo

from . import _lib
from .host import Host

TARGET = "callbox"

_registered = set()
_default_host = None


def register(host=None, *, platform="cpu"):
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


def _host(host):
    global _default_host
    if host is not None:
        return host
    if _default_host is None:
        _default_host = Host.default()
    return _default_host


def call(name, *args, ordered=False, chain=None, host=None):
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

    ordered=True orders the call with every other ordered callbox call and
    tap in the program (like io_callback(ordered=True)). chain names a
    host-side chain: its first failure fails every later call on it, in
    this and later executions, until the chain is reset.

    host is where the result shapes and the content id come from (default:
    the registered host). The XLA handler always runs the process's
    default host (register(host) sets it) and finds the callback there by
    content id, so a host that is not the default must hold the same
    module."""
    register()
    h = _host(host)
    info = h.callback(name)
    args = [jnp.asarray(a) for a in args]
    if ordered:
        types = h.output_types(name, *args)
        avals = tuple(_core.ShapedArray(s, d) for s, d in types)
        outs = _ordered_p.bind(*args, callback=info.id, chain=chain or "", result_avals=avals)
        return outs[0] if len(outs) == 1 else tuple(outs)
    if info.batching == "sequential":
        outs = _ffi(h, name, info, args, chain, "sequential")
        return outs[0] if len(outs) == 1 else tuple(outs)
    return _batched(h, name, info, chain)(*args)


def _ffi(h, name, info, args, chain, vmap_method):
    types = h.output_types(name, *args)
    attrs = {"callback": info.id}
    if chain:
        attrs["chain"] = chain
    result = [jax.ShapeDtypeStruct(s, d) for s, d in types]
    return jax.ffi.ffi_call(TARGET, result, has_side_effect=bool(chain), vmap_method=vmap_method)(*args, **attrs)


def _batched(h, name, info, chain):
    """A function of the per-element arguments that calls a callback
    whose signature has a leading batch dimension, with a vmap rule that
    makes one call per batch."""

    @jax.custom_batching.custom_vmap
    def per_element(*xs):
        outs = _ffi(h, name, info, [x[None] for x in xs], chain, "sequential")
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
        outs = tuple(_ffi(h, name, info, batch, chain, "sequential"))
        if len(outs) == 1:
            return outs[0], True
        return outs, tuple(True for _ in outs)

    return per_element


def tap(name, *args, chain=None, host=None):
    """Run callback name for its side effect, ordered (like io_callback
    with ordered=True); its results are discarded. Returns args (the first
    one when there is only one), so a tap can be threaded through code."""
    call(name, *args, ordered=True, chain=chain, host=host)
    return args[0] if len(args) == 1 else args


# ---- the ordered primitive ----



class CallboxOrderedEffect(_effects.Effect):
    """The ordered effect of callbox calls: one token orders them all."""

    def __str__(self):
        return "CallboxOrdered"


_effect = CallboxOrderedEffect()
for _registry in ("ordered_effects", "lowerable_effects", "control_flow_allowed_effects",
                  "custom_derivatives_allowed_effects", "remat_allowed_effects"):
    if hasattr(_effects, _registry):
        getattr(_effects, _registry).add_type(CallboxOrderedEffect)

_ordered_p = _core.Primitive("callbox_ordered_call")
_ordered_p.multiple_results = True
_ordered_p.def_impl(functools.partial(_dispatch.apply_primitive, _ordered_p))


@_ordered_p.def_effectful_abstract_eval
def _ordered_abstract_eval(*avals, callback, chain, result_avals):
    return list(result_avals), {_effect}


def _ir_type(aval):
    try:
        return _mlir.aval_to_ir_type(aval)
    except TypeError:
        return _ir.RankedTensorType.get(list(aval.shape), _mlir.dtype_to_ir_type(np.dtype(aval.dtype)))


def _ordered_lowering(ctx, *operands, callback, chain, result_avals):
    token = ctx.tokens_in.get(_effect)
    config = {"callback": _ir.StringAttr.get(callback)}
    if chain:
        config["chain"] = _ir.StringAttr.get(chain)
    op = _mlir.custom_call(
        TARGET,
        result_types=[_ir_type(a) for a in result_avals] + [_hlo.TokenType.get()],
        operands=[*operands, token],
        has_side_effect=True,
        api_version=4,
        backend_config=config,
    )
    results = list(op.results)
    ctx.set_tokens_out(_mlir.TokenSet({_effect: results[-1]}))
    return results[:-1]


def _register_ordered(platform):
    _mlir.register_lowering(_ordered_p, _ordered_lowering, platform=platform)

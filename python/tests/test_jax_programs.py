"""callbox.jax in whole JAX programs, run by the pinned jaxlib on the CPU
backend (conftest.py: JAX_PLATFORMS=cpu, four CPU devices): operand
layouts through every path, ordered calls in loops with a failing middle
iteration and what comes after it, vmap against a Python loop, grad,
sharded programs over four devices, and jax.export."""

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="jax is not installed: `make test` installs it (python/requirements-jax.txt)")

import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

import callbox  # noqa: E402
import callbox.jax as cbj  # noqa: E402
from conftest import bumps  # noqa: E402


# ---- operands XLA may lay out or alias as it likes ----

_A = np.arange(24, dtype=np.float32).reshape(4, 6)

# name -> (function of a jax array giving the operand, the same in NumPy)
_OPERANDS = {
    "transposed": (lambda x: x.T, lambda a: a.T),
    "sliced": (lambda x: x[1:, ::2], lambda a: a[1:, ::2]),
    "broadcast": (lambda x: jnp.broadcast_to(x[0], (3, 6)), lambda a: np.broadcast_to(a[0], (3, 6))),
    "reversed": (lambda x: x[::-1, ::-1] * 2, lambda a: a[::-1, ::-1] * 2),
}


def _path(kind):
    """A function of a rank-2 operand that runs it through one way of
    calling, and the rank-2 result."""
    if kind == "plain":
        return lambda m: cbj.call("copy_mat", m)
    if kind == "ordered":
        return lambda m: cbj.call("copy_mat", m, ordered=True)
    if kind == "chain":
        return lambda m: cbj.call("copy_mat", m, chain="layouts")
    if kind == "tap":
        return lambda m: cbj.tap("copy_mat", m) + 0
    if kind == "parallel":  # one batched call, split by the host along the rows
        return lambda m: jax.vmap(lambda r: cbj.call("nonneg_par", r))(m)
    if kind == "expand_dims":  # a leading batch dimension in the signature
        return lambda m: jax.vmap(lambda r: cbj.call("copy_rows", r))(m)
    if kind == "vmap_ordered":
        return lambda m: jax.vmap(lambda r: cbj.call("copy_f32", r, ordered=True))(m)
    raise AssertionError(kind)


@pytest.mark.parametrize("operand", sorted(_OPERANDS))
@pytest.mark.parametrize("kind", ["plain", "ordered", "chain", "tap", "parallel", "expand_dims", "vmap_ordered"])
def test_operand_layouts_give_numpys_answer(jhost, operand, kind):
    """A transposed, sliced, broadcast or reversed operand reaches the
    callback in row-major order through every path: the callbacks copy
    their input, so any other element order shows in the result."""
    make, ref = _OPERANDS[operand]
    path = _path(kind)
    got = jax.jit(lambda x: path(make(x)))(_A)
    np.testing.assert_array_equal(np.asarray(got), ref(_A))


# ---- ordered calls in loops: the failing middle iteration and after ----

def _loop(kind, body, n):
    """Runs body(i) -> s32 for i in 0..n-1 under the loop construct kind,
    summing the results."""
    if kind == "fori_loop":
        return lax.fori_loop(0, n, lambda i, c: c + body(i), jnp.int32(0))
    if kind == "scan":
        return lax.scan(lambda c, i: (c + body(i), None), jnp.int32(0), jnp.arange(n))[0]
    if kind == "while_loop":
        return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] + body(c[0])),
                              (jnp.int32(0), jnp.int32(0)))[1]
    if kind == "cond":  # a cond per step, unrolled
        total = jnp.int32(0)
        for i in range(n):
            total = total + body(jnp.int32(i))
        return total
    raise AssertionError(kind)


def _step(x, chain):
    """Iteration i: bump, then nonneg on x - i (the guest refuses a negative
    element, so the iteration where i passes x fails), both ordered."""
    def body(i):
        n = cbj.call("bump", x, ordered=True, chain=chain)
        cbj.call("nonneg_seq", x - i.astype(jnp.float32), ordered=True, chain=chain)
        return n
    return body


@pytest.mark.parametrize("kind", ["fori_loop", "scan", "while_loop", "cond"])
def test_failing_middle_iteration_stops_the_rest_and_the_next_run_works(jhost, kind):
    x = jnp.full(2, 2.5, jnp.float32)  # x - i < 0 first at i = 3 of 0..5

    f = jax.jit(lambda x: _loop(kind, _step(x, None), 6))
    before = bumps(jhost)
    with pytest.raises(Exception, match=r'INVALID_ARGUMENT: callbox GuestError: callback "nonneg_seq"') as e:
        jax.block_until_ready(f(x))
    assert "bad input" in str(e.value)
    # iterations 0..3 bumped (the 4th bump precedes the failing nonneg), then
    # ours: iterations 4 and 5 never ran
    assert bumps(jhost) == before + 4 + 1

    # The next execution of the same program, and of another one with
    # ordered calls, run from a fresh token: the failure does not stick
    # (JAX issue 37587 reported an errored token fed to the next run).
    ok = jnp.full(2, 9.0, jnp.float32)
    before = bumps(jhost)
    np.testing.assert_array_equal(int(f(ok)), sum(before + 1 + k for k in range(6)))
    g = jax.jit(lambda x: cbj.call("bump", x, ordered=True))
    assert int(g(ok)) == before + 7


@pytest.mark.parametrize("kind", ["fori_loop", "scan", "while_loop"])
def test_a_failed_chain_refuses_until_reset(jhost, kind):
    """On a host chain the failure sticks across executions (the chain's
    promise): the next run is refused with ChainError naming the failed
    step; after reset() the next jitted call works."""
    chain = "loop-" + kind
    x = jnp.full(2, 2.5, jnp.float32)
    f = jax.jit(lambda x: _loop(kind, _step(x, chain), 6))
    with pytest.raises(Exception, match=r'callbox GuestError: callback "nonneg_seq"'):
        jax.block_until_ready(f(x))
    ok = jnp.full(2, 9.0, jnp.float32)
    with pytest.raises(Exception, match=r'chain "%s": call #\d+ \(bump\) not run: chain failed at #\d+: callback "nonneg_seq"' % chain):
        jax.block_until_ready(f(ok))
    jhost.chain(chain).reset()
    before = bumps(jhost)
    assert int(f(ok)) == sum(before + 1 + k for k in range(6))


# ---- vmap against a Python loop ----

_XS = np.arange(12, dtype=np.float32).reshape(3, 4)


@pytest.mark.parametrize("how", ["pure", "ordered", "tap", "parallel", "expand_dims"])
def test_vmap_equals_a_python_loop(jhost, how):
    def one(x):
        if how == "pure":
            return cbj.call("copy_f32", x) * 2
        if how == "ordered":
            return cbj.call("copy_f32", x, ordered=True) * 2
        if how == "tap":
            return cbj.tap("copy_f32", x) * 2
        if how == "parallel":
            return cbj.call("nonneg_par", x) * 2
        return cbj.call("copy_rows", x) * 2

    batched = jax.jit(jax.vmap(one))(_XS)
    looped = np.stack([np.asarray(jax.jit(one)(x)) for x in _XS])
    np.testing.assert_array_equal(np.asarray(batched), looped)
    np.testing.assert_array_equal(looped, _XS * 2)


def test_vmap_of_an_ordered_call_with_no_batched_operand_runs_once(jhost):
    """JAX does not batch a primitive none of whose operands is batched:
    the call runs once, and its result is broadcast (what the docstring of
    callbox.jax.call says)."""
    x = jnp.ones(2, jnp.float32)
    before = bumps(jhost)
    out = jax.jit(jax.vmap(lambda _: cbj.call("bump", x, ordered=True)))(jnp.arange(5))
    np.testing.assert_array_equal(np.asarray(out), [before + 1] * 5)
    assert bumps(jhost) == before + 2


def test_vmap_of_ordered_calls_keeps_element_order(jhost):
    before = bumps(jhost)
    out = jax.jit(jax.vmap(lambda x: cbj.call("bump", x, ordered=True)))(jnp.ones((4, 2), jnp.float32))
    np.testing.assert_array_equal(np.asarray(out), before + 1 + np.arange(4))


# ---- grad ----

@jax.custom_jvp
def _sandboxed_square(x):
    """x**2 computed by a sandboxed callback (copy, then squared by JAX on
    its output), with the derivative supplied by the user."""
    y = cbj.call("copy_f32", x)
    return y * y


@_sandboxed_square.defjvp
def _sandboxed_square_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return _sandboxed_square(x), 2 * x * t


def test_grad_through_a_users_custom_jvp(jhost):
    x = jnp.arange(4, dtype=jnp.float32)
    g = jax.jit(jax.grad(lambda x: _sandboxed_square(x).sum()))(x)
    np.testing.assert_allclose(np.asarray(g), 2 * np.arange(4))
    v, jv = jax.jvp(_sandboxed_square, (x,), (jnp.ones(4, jnp.float32),))
    np.testing.assert_allclose(np.asarray(v), np.arange(4) ** 2)
    np.testing.assert_allclose(np.asarray(jv), 2 * np.arange(4))


def test_grad_of_a_call_is_a_clear_error(jhost):
    x = jnp.arange(4, dtype=jnp.float32)
    with pytest.raises(ValueError, match=r"callbox: callback 'copy_f32'.*cannot be differentiated.*custom_jvp"):
        jax.grad(lambda x: cbj.call("copy_f32", x, ordered=True).sum())(x)
    with pytest.raises(ValueError, match=r"cannot be differentiated"):
        jax.grad(lambda x: cbj.call("copy_f32", x).sum())(x)


# ---- four CPU devices ----

def _mesh():
    devices = jax.devices("cpu")
    assert len(devices) >= 4, "conftest sets JAX_NUM_CPU_DEVICES=4; this process has %d" % len(devices)
    return jax.sharding.Mesh(np.array(devices[:4]), ("i",))


def _shard_map():
    sm = getattr(jax, "shard_map", None)
    if sm is None:  # JAX before 0.7
        from jax.experimental.shard_map import shard_map as sm
    return sm


def test_jit_over_four_devices_with_sharded_inputs(jhost):
    """Pure calls in a jit over a 4-device mesh with sharded inputs give
    NumPy's answer; an ordered call there is refused at lowering with a
    message naming the callback and what to do instead (XLA's Shardy
    partitioner cannot place it: see callbox.jax._check_partitioning)."""
    mesh = _mesh()
    x = jax.device_put(jnp.arange(16, dtype=jnp.float32).reshape(4, 4), NamedSharding(mesh, P("i")))
    y = jax.jit(lambda x: cbj.call("copy_mat", x * 2) + 1)(x)
    np.testing.assert_array_equal(np.asarray(y), np.arange(16).reshape(4, 4) * 2 + 1)
    z = jax.jit(jax.vmap(lambda r: cbj.call("nonneg_par", r)))(x)
    np.testing.assert_array_equal(np.asarray(z), np.arange(16).reshape(4, 4))
    if jax.config.jax_use_shardy_partitioner:
        with pytest.raises(NotImplementedError, match=r"callback 'bump' in a jit over 4 devices.*shard_map"):
            jax.jit(lambda x: cbj.call("bump", x[0], ordered=True))(x)


@pytest.mark.parametrize("jit", [jax.jit, cbj.jit], ids=["jax.jit", "callbox.jax.jit"])
def test_shard_map_keeps_each_devices_order(jhost, jit):
    """Inside shard_map each device makes its own ordered calls on its
    shard, in program order: every device's first bump precedes its
    second, the results are right, and all eight bumps ran; under
    callbox.jax.jit too, where the token starts in the program."""
    mesh = _mesh()
    x = jax.device_put(jnp.arange(8, dtype=jnp.float32), NamedSharding(mesh, P("i")))

    def per_device(x):
        a = cbj.call("bump", x, ordered=True)
        y = cbj.call("copy_f32", x * 3, ordered=True)
        b = cbj.call("bump", x, ordered=True)
        return y, jnp.stack([a, b])[None]

    f = jit(_shard_map()(per_device, mesh=mesh, in_specs=P("i"), out_specs=(P("i"), P("i"))))
    before = bumps(jhost)
    y, counts = f(x)
    np.testing.assert_array_equal(np.asarray(y), np.arange(8) * 3)
    counts = np.asarray(counts)
    assert counts.shape == (4, 2)
    assert (counts[:, 0] < counts[:, 1]).all(), counts
    assert sorted(counts.ravel()) == list(range(before + 1, before + 9))
    assert bumps(jhost) == before + 9


@pytest.mark.parametrize("jit", [jax.jit, cbj.jit], ids=["jax.jit", "callbox.jax.jit"])
def test_shard_map_failure_on_one_device_fails_the_program(jhost, jit):
    """Device 2's shard starts with -1, which nonneg refuses: the program
    fails with that error. Under jax.jit JAX keeps the errored token of a
    failed multi-device execution (JAX issue 37587): callbox.jax.reset()
    drops it. Under callbox.jax.jit no token passes between executions, so
    the next ones run without it. Either way the next ordered call, on one
    device or on four, works."""
    mesh = _mesh()
    x = jax.device_put(jnp.array([1, 1, 1, 1, -1, 1, 1, 1], jnp.float32), NamedSharding(mesh, P("i")))
    f = jit(_shard_map()(lambda x: cbj.call("nonneg_seq", x, ordered=True), mesh=mesh, in_specs=P("i"),
                         out_specs=P("i")))
    with pytest.raises(Exception, match=r'callbox GuestError: callback "nonneg_seq"'):
        jax.block_until_ready(f(x))
    if jit is jax.jit:
        cbj.reset()
    np.testing.assert_array_equal(np.asarray(jit(lambda y: cbj.call("copy_f32", y, ordered=True))(jnp.ones(2))),
                                  [1, 1])
    ok = jax.device_put(jnp.ones(8, jnp.float32), NamedSharding(mesh, P("i")))
    np.testing.assert_array_equal(np.asarray(f(ok)), np.ones(8))


def test_reset_after_a_failed_chain_in_a_sharded_program(jhost):
    """The same failure on a host chain: reset(chain) clears both JAX's
    token and the chain's failure, and the program runs again."""
    mesh = _mesh()
    f = jax.jit(_shard_map()(lambda x: cbj.call("nonneg_seq", x, ordered=True, chain="sharded"), mesh=mesh,
                             in_specs=P("i"), out_specs=P("i")))
    bad = jax.device_put(jnp.array([1, 1, -1, 1, 1, 1, 1, 1], jnp.float32), NamedSharding(mesh, P("i")))
    with pytest.raises(Exception, match=r'callback "nonneg_seq"'):
        jax.block_until_ready(f(bad))
    cbj.reset("sharded")
    ok = jax.device_put(jnp.arange(8, dtype=jnp.float32), NamedSharding(mesh, P("i")))
    np.testing.assert_array_equal(np.asarray(f(ok)), np.arange(8))


# ---- jax.export ----

def test_export_serialize_deserialize_runs_with_the_same_config(jhost):
    """A function with pure and ordered callbox calls, exported and
    serialized, deserialized and called: the program names each callback by
    content id, so it runs wherever a host with the same modules and
    limits is registered. The target must be allowed explicitly: jax.export
    refuses custom calls without compatibility guarantees."""
    from jax import export

    def f(x):
        y = cbj.call("copy_f32", x) * 2
        return cbj.call("copy_f32", y, ordered=True) + 1

    x = jnp.arange(4, dtype=jnp.float32)
    with pytest.raises(ValueError, match="callbox"):
        export.export(jax.jit(f))(x)
    exp = export.export(jax.jit(f), disabled_checks=[export.DisabledSafetyCheck.custom_call(cbj.TARGET)])(x)
    blob = exp.serialize()
    back = export.deserialize(blob)
    np.testing.assert_array_equal(np.asarray(back.call(x)), np.arange(4) * 2 + 1)
    assert jhost.callback("copy_f32").id in exp.mlir_module()


def test_exported_program_on_a_host_without_the_module_fails_clearly(jhost, tmp_path, guest_dir):
    """Run against a registered host that lacks the exported callback's
    module: the call fails naming the content id it could not find."""
    from jax import export

    x = jnp.arange(4, dtype=jnp.float32)
    exp = export.export(jax.jit(lambda x: cbj.call("copy_f32", x)),
                        disabled_checks=[export.DisabledSafetyCheck.custom_call(cbj.TARGET)])(x)
    back = export.deserialize(exp.serialize())
    cid = jhost.callback("copy_f32").id
    cfg = tmp_path / "other.yaml"
    cfg.write_text("callbacks:\n  other:\n    module: %s\n    export: copy\n    signature: '(x: s32[n]) -> s32[n]'\n"
                   % (guest_dir / "kit.wasm"))
    other = callbox.Host(str(cfg))
    try:
        cbj.register(other)
        with pytest.raises(Exception, match=cid):
            jax.block_until_ready(back.call(x))
    finally:
        cbj.register(jhost)
        other.close()

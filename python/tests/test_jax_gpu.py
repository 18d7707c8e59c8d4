"""callbox.jax on a GPU (the CUDA handler, callbox_xla_ffi_cuda, registered
as "callbox" by callbox.jax.register(platform="cuda")). Skips without jax
or without a GPU backend; conftest.py pins JAX_PLATFORMS=cpu unless the
environment sets it, so scripts/device-check.sh runs this file alone with
JAX_PLATFORMS=cuda,cpu."""

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="jax is not installed: the JAX tests run where it is (scripts/device-check.sh)")

import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

import callbox.jax as cbj  # noqa: E402
from conftest import bumps  # noqa: E402


def _gpu():
    try:
        return jax.devices("gpu")[0]
    except RuntimeError:
        return None


@pytest.fixture(scope="module")
def gpu(host):
    dev = _gpu()
    if dev is None:
        pytest.skip("no GPU backend here (JAX_PLATFORMS=%s): scripts/device-check.sh runs this file on a GPU machine"
                    % __import__("os").environ.get("JAX_PLATFORMS", ""))
    cbj.register(host, platform="cuda")
    return dev


@pytest.mark.parametrize("ordered", [False, True])
def test_gpu_call_and_transposed_operand(host, gpu, ordered):
    a = np.arange(15, dtype=np.float32).reshape(3, 5)
    x = jax.device_put(a, gpu)
    y = jax.jit(lambda x: cbj.call("copy_f32", x.reshape(-1), ordered=ordered))(x)
    np.testing.assert_array_equal(np.asarray(y), a.reshape(-1))
    t = jax.jit(lambda x: cbj.call("copy_mat", x.T, ordered=ordered))(x)
    np.testing.assert_array_equal(np.asarray(t), a.T)


def test_gpu_ordered_loop_stops_at_a_failing_middle_iteration(host, gpu):
    x = jax.device_put(np.ones(2, np.float32), gpu)

    def step(i, c):
        return c + lax.cond(i == 2, lambda x: cbj.call("fail", x, ordered=True)[0].astype(jnp.int32),
                            lambda x: cbj.call("bump", x, ordered=True), x)

    before = bumps(host)
    with pytest.raises(Exception, match=r'INVALID_ARGUMENT: .*callback "fail"'):
        jax.block_until_ready(jax.jit(lambda x: lax.fori_loop(0, 5, step, jnp.int32(0)))(x))
    assert bumps(host) == before + 3
    # On the GPU backend (jax 0.11.2, one device) JAX keeps the errored
    # ordered token and feeds it to the next execution, which then fails
    # with this error before running; callbox.jax.reset() drops it, and the
    # next ordered call runs.
    cbj.reset()
    y = jax.jit(lambda x: cbj.call("copy_f32", x, ordered=True))(x)
    np.testing.assert_array_equal(np.asarray(y), np.ones(2, np.float32))


def test_gpu_vmap_of_ordered_calls(host, gpu):
    xs = jax.device_put(np.ones((4, 2), np.float32), gpu)
    before = bumps(host)
    counts = jax.jit(jax.vmap(lambda x: cbj.call("bump", x, ordered=True)))(xs)
    np.testing.assert_array_equal(np.asarray(counts), before + 1 + np.arange(4))


def test_gpu_errors_keep_their_code(host, gpu):
    x = jax.device_put(np.ones(3, np.float32), gpu)
    with pytest.raises(Exception, match=r'DEADLINE_EXCEEDED: .*callback "spin"'):
        jax.jit(lambda x: cbj.call("spin", x))(x).block_until_ready()


def test_gpu_scoped_ordered_calls_keep_dispatch_order(host, gpu):
    """callbox.jax.jit on the GPU: a program's ordered calls in program
    order, a failure raised where its results are waited for (with no token
    kept for the next execution, so no reset), and 100 executions in a row
    running their calls in dispatch order (one device's executions run on
    one stream)."""
    x = jax.device_put(np.ones(2, np.float32), gpu)
    f = cbj.jit(lambda x: (cbj.call("bump", x, ordered=True), cbj.call("bump", x, ordered=True)))
    before = bumps(host)
    a, b = f(x)
    assert (int(a), int(b)) == (before + 1, before + 2)
    fails = cbj.jit(lambda x: cbj.call("fail", x, ordered=True))
    with pytest.raises(Exception, match=r'INVALID_ARGUMENT: .*callback "fail"'):
        jax.block_until_ready(fails(x))
    before = bumps(host)
    outs = [f(x) for _ in range(100)]
    seen = [int(v) for pair in outs for v in pair]
    assert seen == list(range(before + 1, before + 201))

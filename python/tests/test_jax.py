"""callbox.jax with real JAX (CPU). JAX cannot be installed on the
development machines: there these tests skip; scripts/device-check.sh runs
them where jax is present."""

import os

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="jax is not installed: the JAX tests run where it is (scripts/device-check.sh)")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax.numpy as jnp  # noqa: E402

import callbox  # noqa: E402
import callbox.jax as cbj  # noqa: E402


@pytest.fixture(scope="module")
def jhost(host):
    cbj.register(host)
    return host


def test_jit_call(jhost):
    x = jnp.arange(8, dtype=jnp.float32)
    y = jax.jit(lambda x: cbj.call("copy_f32", x) * 2)(x)
    np.testing.assert_array_equal(np.asarray(y), np.arange(8) * 2)


def test_content_id_in_the_program(jhost):
    info = jhost.callback("copy_f32")
    text = jax.jit(lambda x: cbj.call("copy_f32", x)).lower(jnp.ones(3, jnp.float32)).as_text()
    assert info.id in text


def test_every_dtype_and_shapes(jhost):
    for name, x in [("copy_s64", np.arange(5, dtype=np.int64)), ("copy_c64", np.arange(3).astype(np.complex64)),
                    ("copy_scalar", np.float64(1.5)), ("copy_f32", np.zeros(0, np.float32))]:
        np.testing.assert_array_equal(np.asarray(jax.jit(lambda x, n=name: cbj.call(n, x))(x)), x)


def test_vmap_sequential_equals_loop(jhost):
    xs = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    batched = jax.vmap(lambda x: cbj.call("copy_f32", x))(xs)
    looped = jnp.stack([cbj.call("copy_f32", x) for x in xs])
    np.testing.assert_array_equal(np.asarray(batched), np.asarray(looped))


def test_vmap_expand_dims_equals_loop(jhost):
    xs = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    batched = jax.jit(jax.vmap(lambda x: cbj.call("copy_rows", x)))(xs)
    looped = jnp.stack([cbj.call("copy_rows", x) for x in xs])
    np.testing.assert_array_equal(np.asarray(batched), np.asarray(looped))


def test_errors_keep_their_code(jhost):
    with pytest.raises(Exception, match=r'DEADLINE_EXCEEDED: callbox Timeout: callback "spin"'):
        jax.jit(lambda x: cbj.call("spin", x))(jnp.ones(3, jnp.float32)).block_until_ready()
    with pytest.raises(Exception, match=r'INVALID_ARGUMENT: callbox GuestError: callback "fail"'):
        jax.jit(lambda x: cbj.call("fail", x))(jnp.ones(3, jnp.float32)).block_until_ready()


def _bumps(host):
    return int(host.call("bump", np.ones(1, np.float32)))


def test_ordered_calls_run_in_order_and_stop_at_a_failure(jhost):
    x = jnp.ones(2, jnp.float32)

    @jax.jit
    def three(x):
        cbj.call("bump", x, ordered=True)
        cbj.call("fail", x, ordered=True)
        cbj.call("bump", x, ordered=True)  # no data dependence: the token alone orders it
        return x

    before = _bumps(jhost)
    with pytest.raises(Exception, match="callbox GuestError"):
        jax.block_until_ready(three(x))
    assert _bumps(jhost) == before + 2  # one bump in the program ran, then ours


def test_ordered_in_loops_and_cond(jhost):
    x = jnp.ones(2, jnp.float32)
    before = _bumps(jhost)

    @jax.jit
    def loop(x):
        def body(i, c):
            return c + cbj.call("bump", x, ordered=True)
        return jax.lax.fori_loop(0, 3, body, jnp.int32(0))

    jax.block_until_ready(loop(x))
    assert _bumps(jhost) == before + 4

    @jax.jit
    def cond(p, x):
        return jax.lax.cond(p, lambda x: cbj.call("bump", x, ordered=True), lambda x: jnp.int32(0), x)

    before = _bumps(jhost)
    jax.block_until_ready(cond(False, x))
    jax.block_until_ready(cond(True, x))
    assert _bumps(jhost) == before + 2


def test_tap(jhost):
    x = jnp.ones(2, jnp.float32)
    before = _bumps(jhost)
    y = jax.jit(lambda x: cbj.tap("bump", x) * 3)(x)
    np.testing.assert_array_equal(np.asarray(y), [3, 3])
    assert _bumps(jhost) == before + 2


def test_readme_jax_example(jhost, guest_dir, tmp_path, monkeypatch):
    """The README's JAX example runs as written, against a callbox.yaml
    with its two callbacks."""
    from conftest import ROOT
    from test_host import _readme_python_blocks

    blocks = [b for b in _readme_python_blocks() if "callbox.jax" in b]
    assert blocks
    (tmp_path / "callbox.yaml").write_text(
        "callbacks:\n  scale:\n    module: %s\n  log:\n    module: %s\n    export: copy\n"
        "    signature: '(x: f32[n]) -> f32[n]'\n" % (ROOT / "guests/build/rust/scale.wasm", guest_dir / "kit.wasm"))
    monkeypatch.chdir(tmp_path)
    env = {}
    try:
        exec(compile(blocks[0], "README.md", "exec"), env)
        y = env["f"](jnp.arange(4, dtype=jnp.float32))
        np.testing.assert_allclose(np.asarray(y), np.arange(4))
    finally:
        if "host" in env:
            env["host"].close()
        cbj.register(jhost)

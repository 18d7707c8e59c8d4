"""callbox.jax.jit: ordered callbox calls on JAX's fast dispatch, with the
order they keep checked where a reordering would show: within one
execution (through control flow, with a failing middle call), across many
executions in a row that XLA runs asynchronously, behind a slow first
execution, from two threads and over four devices. Real JAX on the CPU
backend (conftest.py sets four CPU devices)."""

import threading

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="jax is not installed: `make test` installs it (python/requirements-jax.txt)")

import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
from jax.experimental import io_callback  # noqa: E402

import callbox  # noqa: E402
import callbox.jax as cbj  # noqa: E402
from conftest import bumps  # noqa: E402


def _busy(m):
    """A few million flops, so that XLA's CPU client runs the execution on
    its thread pool (asynchronously) instead of inline in the caller."""
    return (m @ m)[0, :2]


M = np.ones((128, 128), np.float32)


# ---- the program ----

def test_the_program_takes_no_token_from_the_last_execution(jhost):
    """What keeps JAX's fast dispatch: the scoped program's main function
    has no token parameter or result (JAX passes runtime tokens through
    those for ordered effects, through its Python dispatch); the token
    starts in the program. Under jax.jit the same function has them."""
    x = jnp.ones(2, jnp.float32)

    def f(x):
        return cbj.call("bump", x, ordered=True) + cbj.call("bump", x, ordered=True)

    scoped = cbj.jit(f).lower(x).as_text()
    main = next(line for line in scoped.splitlines() if "func.func public @main" in line)
    assert "token" not in main, main
    assert "stablehlo.create_token" in scoped
    assert scoped.count("stablehlo.custom_call @callbox") == 2
    plain = jax.jit(f).lower(x).as_text()
    assert "!stablehlo.token" in next(line for line in plain.splitlines() if "func.func public @main" in line)
    before = bumps(jhost)
    assert int(cbj.jit(f)(x)) == 2 * before + 3  # (before+1) + (before+2)


def test_static_arguments_and_keywords(jhost):
    f = cbj.jit(lambda x, n, *, scale: cbj.call("copy_f32", x * scale, ordered=True) + n, static_argnums=1)
    x = jnp.arange(3, dtype=jnp.float32)
    np.testing.assert_array_equal(np.asarray(f(x, 2, scale=jnp.float32(3))), np.arange(3) * 3 + 2)


def test_a_function_returning_nothing_is_refused(jhost):
    @cbj.jit
    def log(x):
        cbj.tap("bump", x)

    with pytest.raises(TypeError, match="returns no array"):
        log(jnp.ones(2, jnp.float32))


def test_export_and_methods(jhost):
    """jax.export takes a callbox.jax.jit function (the exported program
    has no ordered effect: its token starts inside), and a decorated method
    binds its instance as a jax.jit one does (self a static argument)."""
    from jax import export

    f = cbj.jit(lambda x: cbj.call("copy_f32", x, ordered=True) + 1)
    x = jnp.arange(4, dtype=jnp.float32)
    exp = export.export(f, disabled_checks=[export.DisabledSafetyCheck.custom_call(cbj.TARGET)])(x)
    assert not exp.ordered_effects and not exp.unordered_effects
    back = export.deserialize(exp.serialize())
    np.testing.assert_array_equal(np.asarray(back.call(x)), np.arange(4) + 1)

    class Model:
        scale = 3

        @cbj.jit(static_argnums=0)  # self static, as jax.jit needs it
        def step(self, x):
            return cbj.call("copy_f32", x * self.scale, ordered=True)

    np.testing.assert_array_equal(np.asarray(Model().step(x)), np.arange(4) * 3)


# ---- within one execution ----

def test_calls_in_one_execution_run_in_order_and_stop_at_a_failure(jhost):
    x = jnp.ones(2, jnp.float32)

    @cbj.jit
    def three(x):
        a = cbj.call("bump", x, ordered=True)
        cbj.call("fail", x, ordered=True)
        cbj.call("bump", x, ordered=True)  # no data dependence: the token alone orders it
        return a

    before = bumps(jhost)
    with pytest.raises(callbox.GuestError):
        with cbj.typed_errors():
            jax.block_until_ready(three(x))
    assert bumps(jhost) == before + 2  # one bump in the program ran, then ours
    # the next execution is not held back by the failure
    assert int(cbj.jit(lambda x: cbj.call("bump", x, ordered=True))(x)) == before + 3


@pytest.mark.parametrize("loop", ["fori_loop", "scan", "while_loop"])
def test_loops_keep_order_and_stop_at_a_failing_middle_iteration(jhost, loop):
    x = jnp.ones(2, jnp.float32)

    def step(i, bad):
        return lax.cond(i == bad, lambda x: cbj.call("fail", x, ordered=True)[0].astype(jnp.int32),
                        lambda x: cbj.call("bump", x, ordered=True), x)

    @cbj.jit
    def f(x, bad):
        if loop == "fori_loop":
            seen = lax.fori_loop(0, 5, lambda i, s: s.at[i].set(step(i, bad)), jnp.zeros(5, jnp.int32))
        elif loop == "scan":
            seen = lax.scan(lambda c, i: (c, step(i, bad)), 0, jnp.arange(5))[1]
        else:
            seen = lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1].at[c[0]].set(step(c[0], bad))),
                                  (jnp.int32(0), jnp.zeros(5, jnp.int32)))[1]
        return seen, cbj.call("bump", x, ordered=True)  # after the loop in program order, not in data

    before = bumps(jhost)
    seen, last = f(x, -1)
    np.testing.assert_array_equal(np.asarray(seen), before + 1 + np.arange(5))
    assert int(last) == before + 6
    before = bumps(jhost)
    with pytest.raises(Exception, match=r'callbox GuestError: callback "fail"'):
        jax.block_until_ready(f(x, 2))
    assert bumps(jhost) == before + 3  # iterations 0 and 1 bumped, then ours; the rest never ran


def test_vmap_inside_keeps_element_order(jhost):
    xs = jnp.ones((4, 2), jnp.float32)
    before = bumps(jhost)
    counts = cbj.jit(jax.vmap(lambda x: cbj.call("bump", x, ordered=True)))(xs)
    np.testing.assert_array_equal(np.asarray(counts), before + 1 + np.arange(4))


def test_inside_jax_jit_it_joins_the_outer_programs_order(jhost):
    """Called inside another jit, the function is traced as under jax.jit:
    its calls take the outer program's token, after the outer call before
    them. (Scoped, they would start a token of their own, ordered against
    nothing outside.)"""
    inner = cbj.jit(lambda x: cbj.call("bump", x, ordered=True))
    x = jnp.ones(2, jnp.float32)

    @jax.jit
    def outer(x):
        a = cbj.call("bump", x, ordered=True)
        return a, inner(x), cbj.call("bump", x, ordered=True)

    before = bumps(jhost)
    assert [int(v) for v in outer(x)] == [before + 1, before + 2, before + 3]
    assert int(inner(x)) == before + 4  # and scoped again at the top level


# ---- between executions ----

def test_many_executions_in_a_row_keep_dispatch_order(jhost):
    """200 executions with no data dependence between them, each busy
    enough to run on XLA's thread pool: their calls run in dispatch order."""
    f = cbj.jit(lambda x, m: (cbj.call("bump", x, ordered=True), _busy(m)))
    x, m = jnp.ones(2, jnp.float32), jnp.asarray(M)
    jax.block_until_ready(f(x, m))
    before = bumps(jhost)
    outs, pending = [], 0
    for _ in range(200):
        n, _busy_out = f(x, m)
        pending += not n.is_ready()
        outs.append(n)
    assert [int(n) for n in outs] == list(range(before + 1, before + 201))
    assert pending > 0, "every execution had ended when dispatch returned: the asynchronous path was not tested"


def test_a_slow_execution_holds_back_later_ones_on_its_device(jhost):
    """Execution A waits for an input that a long computation is still
    producing; B, dispatched after it on the same device with its input
    ready and cheap enough for XLA to run at once, runs after A. C, the
    same on another device, runs at once, before A: the reordering this
    test would see on one device (executions on two devices are not
    ordered). The producer's work doubles until it is seen still running
    when B and C have been dispatched (what makes the check a real one on a
    loaded machine)."""
    dev0, dev1 = jax.devices()[:2]
    f = cbj.jit(lambda x: cbj.call("bump", x, ordered=True))
    ready0 = jax.device_put(jnp.ones(2, jnp.float32), dev0)
    ready1 = jax.device_put(jnp.ones(2, jnp.float32), dev1)
    m = jax.device_put(jnp.asarray(np.full((256, 256), 1e-3, np.float32)), dev0)
    produce = jax.jit(lambda m, k: lax.fori_loop(0, k, lambda i, a: jnp.tanh(a @ m), m)[0, :2])
    jax.block_until_ready((f(ready0), f(ready1), produce(m, 1)))
    for steps in (16, 64, 256, 1024, 4096):
        slow_input = produce(m, steps)
        a = f(slow_input)
        b = f(ready0)
        c = f(ready1)
        observed = not slow_input.is_ready()  # A's input still being produced after B and C were dispatched
        a, b, c = int(a), int(b), int(c)
        assert a < b, "B ran before A on the same device: %d, %d" % (a, b)
        if observed:
            assert c < a, "C on another device waited for A (%d, %d): the test would not see a reordering" % (c, a)
            return
    pytest.fail("the producer had always ended before B and C were dispatched: nothing was tested")


def test_two_threads(jhost):
    """Two threads dispatching at once: each execution's three calls run in
    program order, every call runs once. (Which thread's execution runs
    first is XLA's choice; see callbox.jax.jit.)"""
    f = cbj.jit(lambda x, m: (cbj.call("bump", x, ordered=True), cbj.call("bump", x, ordered=True),
                              cbj.call("bump", x, ordered=True), _busy(m)))
    x, m = jnp.ones(2, jnp.float32), jnp.asarray(M)
    jax.block_until_ready(f(x, m))
    results = {0: [], 1: []}
    start = threading.Barrier(2)

    def run(k):
        start.wait()
        results[k] = [f(x, m)[:3] for _ in range(50)]

    before = bumps(jhost)
    threads = [threading.Thread(target=run, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seen = []
    for k in (0, 1):
        for a, b, c in results[k]:
            a, b, c = int(a), int(b), int(c)
            assert a < b < c, (k, a, b, c)
            seen += [a, b, c]
    assert sorted(seen) == list(range(before + 1, before + 301))


def test_four_devices_each_keep_their_order(jhost):
    """Executions dispatched round-robin over four devices from one thread:
    on each device its calls run in dispatch order."""
    devices = jax.devices()[:4]
    assert len(devices) == 4
    f = cbj.jit(lambda x, m: (cbj.call("bump", x, ordered=True), _busy(m)))
    args = [(jax.device_put(jnp.ones(2, jnp.float32), d), jax.device_put(M, d)) for d in devices]
    jax.block_until_ready([f(*a) for a in args])
    before = bumps(jhost)
    outs = {i: [] for i in range(4)}
    for _ in range(40):
        for i, a in enumerate(args):
            outs[i].append(f(*a)[0])
    seen = []
    for i in range(4):
        values = [int(n) for n in outs[i]]
        assert values == sorted(values), (devices[i], values)
        seen += values
    assert sorted(seen) == list(range(before + 1, before + 161))

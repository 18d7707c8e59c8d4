"""callbox.jax with real JAX on the CPU backend: `make test` runs these
under the pinned JAX (python/requirements-jax.txt) and the oldest one
supported (python/requirements-jax-oldest.txt), and fails if any skips.
conftest.py sets JAX_PLATFORMS=cpu and four CPU devices before anything
imports jax."""

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="jax is not installed: `make test` installs it (python/requirements-jax.txt)")

import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
from jax.experimental import io_callback  # noqa: E402

import callbox  # noqa: E402
import callbox.jax as cbj  # noqa: E402
from conftest import ENGINES, HOSTILE, ROOT, bumps, hostile_name  # noqa: E402


def _x64():
    """A context in which JAX keeps 64-bit dtypes (off by default: int64 and
    float64 inputs would become int32 and float32)."""
    if hasattr(jax, "enable_x64"):  # jax 0.11: a config state, callable as a context manager
        return jax.enable_x64(True)
    from jax.experimental import enable_x64
    return enable_x64()


def test_jit_call(jhost):
    x = jnp.arange(8, dtype=jnp.float32)
    y = jax.jit(lambda x: cbj.call("copy_f32", x) * 2)(x)
    np.testing.assert_array_equal(np.asarray(y), np.arange(8) * 2)


def test_content_id_in_the_program(jhost):
    info = jhost.callback("copy_f32")
    text = jax.jit(lambda x: cbj.call("copy_f32", x)).lower(jnp.ones(3, jnp.float32)).as_text()
    assert info.id in text


@pytest.mark.parametrize("ordered", [False, True])
def test_every_dtype_and_shapes(jhost, ordered):
    cases = [("copy_s64", np.arange(5, dtype=np.int64)), ("copy_scalar", np.float64(1.5)),
             ("copy_c64", np.arange(3).astype(np.complex64)), ("copy_f32", np.zeros(0, np.float32)),
             ("copy_u8", np.arange(4, dtype=np.uint8)), ("copy_pred", np.array([True, False])),
             ("copy_c128", np.arange(2).astype(np.complex128)), ("copy_f64", np.arange(3, dtype=np.float64))]
    with _x64():  # the s64/f64/c128 signatures need 64-bit dtypes kept
        for name, x in cases:
            y = jax.jit(lambda x, n=name: cbj.call(n, x, ordered=ordered))(x)
            assert y.dtype == np.asarray(x).dtype, name
            np.testing.assert_array_equal(np.asarray(y), x)


def test_vmap_sequential_equals_loop(jhost):
    xs = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    batched = jax.vmap(lambda x: cbj.call("copy_f32", x))(xs)
    looped = jnp.stack([cbj.call("copy_f32", x) for x in xs])
    np.testing.assert_array_equal(np.asarray(batched), np.asarray(looped))
    np.testing.assert_array_equal(np.asarray(batched), np.asarray(xs))  # what the callback computes: a copy


def test_vmap_expand_dims_equals_loop(jhost):
    xs = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    batched = jax.jit(jax.vmap(lambda x: cbj.call("copy_rows", x)))(xs)
    looped = jnp.stack([cbj.call("copy_rows", x) for x in xs])
    np.testing.assert_array_equal(np.asarray(batched), np.asarray(looped))
    np.testing.assert_array_equal(np.asarray(batched), np.asarray(xs))  # what the callback computes: a copy


def test_vmap_parallel_is_one_batched_call(jhost):
    xs = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    f = jax.jit(jax.vmap(lambda x: cbj.call("nonneg_par", x)))
    assert "batched" in f.lower(xs).as_text()  # one custom call on the batch, not a loop
    np.testing.assert_array_equal(np.asarray(f(xs)), xs)
    # unbatched (no vmap): the per-element signature, a plain call
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda x: cbj.call("nonneg_par", x))(xs[1])), xs[1])
    # a failing element fails the call, naming it
    with pytest.raises(Exception, match=r"batch element 2 of 3"):
        f(xs.at[2, 0].set(-1)).block_until_ready()


def test_errors_keep_their_code(jhost):
    with pytest.raises(Exception, match=r'DEADLINE_EXCEEDED: callbox Timeout: callback "spin"'):
        jax.jit(lambda x: cbj.call("spin", x))(jnp.ones(3, jnp.float32)).block_until_ready()
    with pytest.raises(Exception, match=r'INVALID_ARGUMENT: callbox GuestError: callback "fail"'):
        jax.jit(lambda x: cbj.call("fail", x))(jnp.ones(3, jnp.float32)).block_until_ready()


def test_ordered_calls_run_in_order_and_stop_at_a_failure(jhost):
    x = jnp.ones(2, jnp.float32)

    @jax.jit
    def three(x):
        cbj.call("bump", x, ordered=True)
        cbj.call("fail", x, ordered=True)
        cbj.call("bump", x, ordered=True)  # no data dependence: the token alone orders it
        return x

    before = bumps(jhost)
    with pytest.raises(Exception, match="callbox GuestError"):
        jax.block_until_ready(three(x))
    assert bumps(jhost) == before + 2  # one bump in the program ran, then ours


# ---- the custom call has ffi_call's form ----

_modules = []


def _custom_calls(lowered):
    """The stablehlo.custom_call operations of a lowered program that call
    the target "callbox" (nested functions and regions included). The
    module is kept alive: an operation outlives its module only in some
    JAX versions (0.8's bindings crash reading a dead module's ops)."""
    found = []
    module = lowered.compiler_ir("stablehlo")
    _modules.append(module)

    def walk(op):
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    op = inner.operation
                    if op.name == "stablehlo.custom_call" and str(op.attributes["call_target_name"]) == '"callbox"':
                        found.append(op)
                    walk(inner.operation)

    walk(module.operation)
    return found


def _attr_strings(op, name):
    return [str(a) for a in op.attributes[name]] if name in op.attributes else None


def test_ordered_custom_call_has_ffi_calls_form(jhost):
    """The ordered custom call carries what ffi_call's does: row-major
    operand and result layouts (tokens: empty ones), the attributes in
    mhlo.backend_config, the same api_version; only the token and
    has_side_effect differ."""
    x = jnp.arange(15, dtype=jnp.float32).reshape(3, 5)
    [plain] = _custom_calls(jax.jit(lambda x: cbj.call("copy_mat", x)).lower(x))
    [ordered] = _custom_calls(jax.jit(lambda x: cbj.call("copy_mat", x, ordered=True)).lower(x))
    for op in (plain, ordered):
        assert str(op.attributes["call_target_name"]) == '"callbox"'
    assert _attr_strings(plain, "operand_layouts") is not None, "ffi_call passes operand layouts"
    assert _attr_strings(ordered, "operand_layouts") is not None, "the ordered call passes no operand layouts"
    assert _attr_strings(ordered, "result_layouts") is not None, "the ordered call passes no result layouts"
    empty = str(_attr_strings(ordered, "operand_layouts")[-1])
    assert "tensor<0xindex>" in empty, "the token's layout is not empty: %s" % empty
    assert _attr_strings(ordered, "operand_layouts")[:-1] == _attr_strings(plain, "operand_layouts")
    assert _attr_strings(ordered, "result_layouts")[:-1] == _attr_strings(plain, "result_layouts")
    assert _attr_strings(ordered, "result_layouts")[-1] == empty
    assert str(ordered.attributes["mhlo.backend_config"]) == str(plain.attributes["mhlo.backend_config"])
    assert str(ordered.attributes["backend_config"]) == str(plain.attributes["backend_config"])
    assert str(ordered.attributes["api_version"]) == str(plain.attributes["api_version"])
    assert "dense<[1, 0]>" in _attr_strings(ordered, "operand_layouts")[0]  # row-major, minor-to-major


@pytest.mark.parametrize("ordered", [False, True])
def test_transposed_operand_arrives_row_major(jhost, ordered):
    """A transposed operand (XLA may give a transpose a column-major layout
    instead of moving data) reaches the handler in row-major order: copy's
    output depends on element order, so a column-major operand would give a
    permuted result."""
    a = np.arange(15, dtype=np.float32).reshape(3, 5)

    @jax.jit
    def f(x):
        y = cbj.call("copy_mat", x.T, ordered=ordered)          # 5x3
        z = cbj.call("copy_mat", (x * 2).T + 1, ordered=ordered)  # a fused producer
        return y, z

    y, z = f(a)
    np.testing.assert_array_equal(np.asarray(y), a.T)
    np.testing.assert_array_equal(np.asarray(z), (a * 2).T + 1)


@pytest.mark.parametrize("jit", [jax.jit, cbj.jit], ids=["jax.jit", "callbox.jax.jit"])
@pytest.mark.parametrize("cached", [True, False])
def test_other_ordered_effects_keep_their_tokens(jhost, monkeypatch, cached, jit):
    """An ordered callbox call between two ordered io_callbacks: each
    effect's token is threaded, none dropped. JAX gives each ordered effect
    its own token and nothing orders two chains, so only this is asserted:
    the io_callbacks run in their order, and each of the three calls runs
    exactly once (each reads or bumps the shared counter: three distinct
    consecutive values). cached=False lowers the primitive inline, as JAX
    lowers an uncacheable one (io_callback is): the rule then sees every
    effect's token and must update its own, not replace the set. Under
    callbox.jax.jit the io_callbacks' effect stays on the program (JAX
    threads its token between executions) and callbox's is scoped."""
    uncacheable = getattr(cbj._mlir, "_uncacheable_primitives", None)
    if not cached:
        assert uncacheable is not None, "this JAX has no _uncacheable_primitives: the inline case checks nothing"
        monkeypatch.setattr(cbj._mlir, "_uncacheable_primitives", uncacheable | {cbj._ordered_p})
    seen = []

    def read(x):
        seen.append(bumps(jhost))
        return np.int32(0)

    @jit
    def f(x):
        io_callback(read, jax.ShapeDtypeStruct((), jnp.int32), x, ordered=True)
        n = cbj.call("bump", x, ordered=True)
        io_callback(read, jax.ShapeDtypeStruct((), jnp.int32), x, ordered=True)
        return n

    before = bumps(jhost)
    n = int(f(jnp.ones(2, jnp.float32)))
    assert len(seen) == 2 and seen[0] < seen[1], seen
    assert sorted(seen + [n]) == [before + 1, before + 2, before + 3], (seen, n)


# ---- order through control flow, with a failing middle call ----

def _fails_at(i, x, bad):
    """An ordered call that fails (callback "fail") when i == bad, else
    bumps; returns an s32."""
    return lax.cond(i == bad, lambda x: cbj.call("fail", x, ordered=True)[0].astype(jnp.int32),
                    lambda x: cbj.call("bump", x, ordered=True), x)


@pytest.mark.parametrize("loop", ["fori_loop", "scan", "while_loop"])
def test_loops_stop_at_a_failing_middle_iteration(jhost, loop):
    x = jnp.ones(2, jnp.float32)

    @jax.jit
    def f(x):
        if loop == "fori_loop":
            return lax.fori_loop(0, 5, lambda i, c: c + _fails_at(i, x, 2), jnp.int32(0))
        if loop == "scan":
            return lax.scan(lambda c, i: (c + _fails_at(i, x, 2), None), jnp.int32(0), jnp.arange(5))[0]
        return lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] + _fails_at(c[0], x, 2)),
                              (jnp.int32(0), jnp.int32(0)))[1]

    before = bumps(jhost)
    with pytest.raises(Exception, match=r'INVALID_ARGUMENT: callbox GuestError: callback "fail"'):
        jax.block_until_ready(f(x))
    assert bumps(jhost) == before + 3  # iterations 0 and 1 bumped, then ours; 3 and 4 never ran


def test_ordered_in_loops_and_cond(jhost):
    x = jnp.ones(2, jnp.float32)
    before = bumps(jhost)

    @jax.jit
    def loop(x):
        def body(i, c):
            return c + cbj.call("bump", x, ordered=True)
        return jax.lax.fori_loop(0, 3, body, jnp.int32(0))

    jax.block_until_ready(loop(x))
    assert bumps(jhost) == before + 4

    @jax.jit
    def cond(p, x):
        return jax.lax.cond(p, lambda x: cbj.call("bump", x, ordered=True), lambda x: jnp.int32(0), x)

    before = bumps(jhost)
    jax.block_until_ready(cond(False, x))
    jax.block_until_ready(cond(True, x))
    assert bumps(jhost) == before + 2

    @jax.jit
    def chain(p, x):
        a = cbj.call("bump", x, ordered=True)
        b = lax.cond(p, lambda x: cbj.call("fail", x, ordered=True)[0].astype(jnp.int32),
                     lambda x: jnp.int32(0), x)
        return a + b + cbj.call("bump", x, ordered=True)

    before = bumps(jhost)
    with pytest.raises(Exception, match="callbox GuestError"):
        jax.block_until_ready(chain(True, x))
    assert bumps(jhost) == before + 2  # the first bump, then ours; the last never ran


def test_tap(jhost):
    x = jnp.ones(2, jnp.float32)
    before = bumps(jhost)
    y = jax.jit(lambda x: cbj.tap("bump", x) * 3)(x)
    np.testing.assert_array_equal(np.asarray(y), [3, 3])
    assert bumps(jhost) == before + 2


# ---- vmap ----

def test_vmap_of_ordered_calls_runs_each_element_in_order(jhost):
    xs = jnp.ones((4, 2), jnp.float32)
    before = bumps(jhost)
    counts = jax.jit(jax.vmap(lambda x: cbj.call("bump", x, ordered=True)))(xs)
    np.testing.assert_array_equal(np.asarray(counts), before + 1 + np.arange(4))  # element 0 first
    assert bumps(jhost) == before + 5

    ys = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    np.testing.assert_array_equal(np.asarray(jax.vmap(lambda y: cbj.call("copy_f32", y, ordered=True))(ys)), ys)
    # an unbatched argument beside a batched one, and a batched axis that is not the first
    out = jax.vmap(lambda a, b: cbj.call("copy2", a, b, ordered=True), in_axes=(1, None))(
        jnp.arange(6, dtype=jnp.int16).reshape(2, 3), jnp.arange(2, dtype=jnp.float32))
    np.testing.assert_array_equal(np.asarray(out[0]), np.arange(6).reshape(2, 3).T)
    np.testing.assert_array_equal(np.asarray(out[1]), np.tile(np.arange(2), (3, 1)))
    # a callback with a leading batch dimension, ordered: batches of one, in order
    np.testing.assert_array_equal(np.asarray(jax.vmap(lambda y: cbj.call("copy_rows", y, ordered=True))(ys)), ys)
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda y: cbj.call("copy_rows", y, ordered=True))(ys[0])), ys[0])


def test_vmap_of_tap_and_pure_calls_together(jhost):
    xs = jnp.arange(6, dtype=jnp.float32).reshape(3, 2)
    before = bumps(jhost)

    def f(x):
        cbj.tap("bump", x)
        return cbj.call("copy_f32", x) + 1

    np.testing.assert_array_equal(np.asarray(jax.jit(jax.vmap(f))(xs)), xs + 1)
    assert bumps(jhost) == before + 4


# ---- effect registrations, as io_callback's ----

def test_multi_device_jit_with_an_ordered_call_under_gspmd(jhost):
    """Shardable-ordered as io_callback: with the GSPMD partitioner a jit
    over four devices is not refused and the call runs once (maximal
    sharding on the first device). Under Shardy, JAX's default, the
    lowering refuses it with a clear message (test_jax_programs.py)."""
    devices = jax.devices("cpu")
    assert len(devices) >= 4, "conftest sets JAX_NUM_CPU_DEVICES=4"
    mesh = jax.sharding.Mesh(np.array(devices[:4]), ("i",))
    sharded = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("i"))
    x = jax.device_put(jnp.arange(8, dtype=jnp.float32), sharded)
    was = jax.config.jax_use_shardy_partitioner
    jax.config.update("jax_use_shardy_partitioner", False)
    try:
        before = bumps(jhost)
        y, n = jax.jit(lambda x: (cbj.call("copy_f32", x, ordered=True), cbj.call("bump", x, ordered=True)))(x)
        np.testing.assert_array_equal(np.asarray(y), np.arange(8))
        assert int(n) == before + 1
        assert bumps(jhost) == before + 2
    finally:
        jax.config.update("jax_use_shardy_partitioner", was)


def _outcome(run):
    try:
        run()
    except Exception as e:  # noqa: BLE001  (the outcome is what is compared)
        return type(e).__name__
    return None


@pytest.mark.parametrize("transform", ["checkpoint", "custom_jvp"])
def test_transforms_treat_it_as_ordered_io_callback(jhost, transform):
    """Not remat-allowed nor custom-derivatives-allowed, as io_callback:
    JAX refuses (or accepts) an ordered callbox call exactly where it
    refuses (or accepts) an ordered io_callback. Under checkpoint the
    refusal comes from AD's partial evaluation (recomputing the forward
    pass would run the ordered call again): a gradient with respect to an
    argument the call does not touch; custom_jvp's from the jaxpr checks."""
    x = jnp.ones(2, jnp.float32)

    def io(x):
        return io_callback(lambda x: x, jax.ShapeDtypeStruct(x.shape, x.dtype), x, ordered=True)

    def cb(x):
        return cbj.call("copy_f32", x, ordered=True)

    def under(effect):
        if transform == "checkpoint":
            def g(x, y):
                _, b = jax.checkpoint(lambda x, y: (effect(x), y * 2))(x, y)
                return b.sum()
            return lambda: jax.grad(g, argnums=1)(x, x)

        @jax.custom_jvp
        def h(x):
            return effect(x)

        h.defjvp(lambda primals, tangents: (h(*primals), tangents[0]))

        def run():
            with jax.enable_checks(True):
                jax.make_jaxpr(h)(x)
        return run

    io_outcome = _outcome(under(io))
    assert io_outcome is not None, "JAX accepts an ordered io_callback under %s here: this test checks nothing" % transform
    assert _outcome(under(cb)) == io_outcome


def test_result_types_match_ffi_call_under_a_mesh(jhost):
    """ffi_call's abstract eval rule: with a mesh set, results carry its
    sharding; the ordered call's results must have the same type as the
    unordered (ffi_call) ones."""
    mesh = jax.make_mesh((1,), ("i",), axis_types=(jax.sharding.AxisType.Explicit,), devices=jax.devices("cpu")[:1])
    x = jnp.arange(4, dtype=jnp.float32)
    seen = {}

    def f(x):
        a = cbj.call("copy_f32", x)
        b = cbj.call("copy_f32", x, ordered=True)
        seen["types"] = (jax.typeof(a), jax.typeof(b))
        return a + b

    with jax.set_mesh(mesh):
        jax.make_jaxpr(f)(x)
    plain, ordered = seen["types"]
    assert plain == ordered, (plain, ordered)
    assert plain.sharding == ordered.sharding  # the mesh's, since JAX 0.8; none before


# ---- a program from `callbox lower`, compiled by XLA ----

def test_lowered_programs_run_under_xla(jhost):
    """The StableHLO `callbox lower` wrote at build time (make xla-check:
    build/xla-check) compiles and runs under jaxlib with the target that
    callbox.jax.register registers, and agrees with callbox's evaluator."""
    prepared = ROOT / "build" / "xla-check"
    if not (prepared / "pipeline.mlir").is_file():
        pytest.skip("build/xla-check is missing: run `make xla-check` (needs Go) and carry build/")
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "xla_check_lowering.py"), "--expected", str(prepared)],
                       capture_output=True, text=True, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert r.returncode == 0, r.stdout + r.stderr


def test_readme_jax_example(jhost, readme_root, monkeypatch, capsys):
    """The README's JAX example runs as written, from the repository root,
    on the shipped python/examples/callbox.yaml: it prints what its
    comment says, and vmap of it works, as the README says."""
    from test_host import _readme_python_blocks

    blocks = [b for b in _readme_python_blocks() if "callbox.jax" in b]
    assert blocks
    monkeypatch.chdir(readme_root)
    env = {}
    try:
        exec(compile(blocks[0], "README.md", "exec"), env)
        assert "[0. 1. 2. 3.]" in capsys.readouterr().out
        y = env["f"](jnp.arange(4, dtype=jnp.float32))
        np.testing.assert_allclose(np.asarray(y), np.arange(4))
        xs = jnp.arange(8, dtype=jnp.float32).reshape(2, 4)
        np.testing.assert_allclose(np.asarray(jax.vmap(env["f"])(xs)), xs)  # the README says vmap works
    finally:
        if "host" in env:
            env["host"].close()
        cbj.register(jhost)


# ---- typed errors: callbox's exceptions out of jitted programs ----

def _direct(fn):
    """The callbox exception fn raises."""
    with pytest.raises(callbox.CallbackError) as e:
        fn()
    return e.value


def _through_jax(fn):
    """The exception fn raises under callbox.jax.typed_errors(): a callbox
    exception, raised from XLA's error."""
    with pytest.raises(callbox.CallbackError) as e:
        with cbj.typed_errors():
            fn()
    return e.value


def _same_failure(via_jax, direct):
    """via_jax, raised out of a jitted program, is the exception host.call
    raised for the same failure: same class, every field, and XLA's error
    as its cause."""
    assert type(via_jax) is type(direct), (type(via_jax), type(direct))
    for field in ("kind", "kind_number", "code", "callback", "chain", "seq", "message", "guest_message",
                  "guest_status", "batch_size", "batch_element", "frames"):
        assert getattr(via_jax, field) == getattr(direct, field), field
    assert str(via_jax) == str(direct)
    if isinstance(direct, callbox.ChainError):  # the failure that failed the chain, too
        assert type(via_jax.first) is type(direct.first)
        assert vars(via_jax.first) == vars(direct.first)
    assert isinstance(via_jax.__cause__, _XLA_ERRORS), type(via_jax.__cause__)
    assert str(via_jax.__cause__).endswith("]") and "[callbox error " in str(via_jax.__cause__)


# What XLA's errors reach Python as: jaxlib 0.7 and 0.10 raise ValueError
# for FAILED_PRECONDITION, JaxRuntimeError for the codes of every other kind.
_XLA_ERRORS = (jax.errors.JaxRuntimeError, ValueError)


@pytest.mark.parametrize("ordered", [False, True])
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("module,export,kind,code,extra", HOSTILE, ids=[h[1] + "-" + h[2] for h in HOSTILE])
def test_every_hostile_kind_is_typed_out_of_jit(jhost, engine, module, export, kind, code, extra, ordered):
    """Every kind of the hostile suite (conftest.HOSTILE), on both engines,
    plain and ordered: a jitted program's failure is raised by
    typed_errors() as the kind's class with the fields host.call gives."""
    name = hostile_name(export, kind, engine)
    x = np.zeros(4, np.float32)  # the hostile suite's guests expect zeros
    direct = _direct(lambda: jhost.call(name, x))
    assert direct.kind == kind and direct.code == code  # the suite's own check, so this test checks something
    if kind in ("Unreachable", "DivideByZero", "MemoryOutOfBounds", "StackOverflow"):
        assert direct.frames, "a trap inside the guest says where (C API 1.12)"
    via_jax = _through_jax(lambda: jax.block_until_ready(jax.jit(lambda x: cbj.call(name, x, ordered=ordered))(x)))
    _same_failure(via_jax, direct)
    assert isinstance(via_jax, getattr(callbox, kind))


def test_typed_errors_is_a_decorator_and_passes_other_errors(jhost):
    x = jnp.ones(3, jnp.float32)
    f = jax.jit(lambda x: cbj.call("fail", x))

    @cbj.typed_errors
    def bare():
        return f(x).block_until_ready()

    @cbj.typed_errors()
    def called():
        return f(x).block_until_ready()

    direct = _direct(lambda: jhost.call("fail", np.ones(3, np.float32)))
    for run in (bare, called):
        _same_failure(_through_jax(run), direct)
        assert _through_jax(run).guest_message == "bad input"
    # Anything else passes unchanged: a trace-time refusal (already callbox's),
    # and XLA errors that report no callbox failure.
    with pytest.raises(callbox.UnknownCallback):
        with cbj.typed_errors():
            jax.jit(lambda x: cbj.call("nope", x))(x)
    with pytest.raises(ZeroDivisionError):
        with cbj.typed_errors():
            1 / 0
    with cbj.typed_errors():
        np.testing.assert_array_equal(np.asarray(jax.jit(lambda x: cbj.call("copy_f32", x))(x)), np.ones(3))
    # Without typed_errors, XLA's error as before; failure() reads it.
    with pytest.raises(jax.errors.JaxRuntimeError) as raw:
        f(x).block_until_ready()
    got = cbj.failure(raw.value)
    assert type(got) is type(direct) and str(got) == str(direct) and got.__cause__ is None
    assert cbj.failure(RuntimeError("INTERNAL: something else")) is None
    assert cbj.failure(RuntimeError(str(raw.value).replace("[callbox error ", "[callbox error 0"))) is None


def test_tap_and_chain_failures_are_typed(jhost):
    """A tap's failure, raised at the effects barrier, and a chain whose
    first failure refuses the next step (ChainError, also the failure's
    class), as host.call raises them on a chain of its own."""
    x = np.full(3, 2.0, np.float32)
    with pytest.raises(callbox.GuestError) as e:
        with cbj.typed_errors():
            jax.jit(lambda x: cbj.tap("fail", x) * 2)(x)
            jax.effects_barrier()
    assert e.value.callback == "fail" and e.value.guest_message == "bad input"
    assert isinstance(e.value.__cause__, jax.errors.JaxRuntimeError)

    direct_chain = jhost.chain("typed-direct")
    steps = ["fail", "copy_f32"]  # the second is refused: the chain failed at the first
    direct = [_direct(lambda: direct_chain.call(cb, x)) for cb in steps]
    assert isinstance(direct[1], callbox.ChainError)
    via_jax = []
    for cb in steps:
        f = jax.jit(lambda x, cb=cb: cbj.call(cb, x, chain="typed-jax"))
        via_jax.append(_through_jax(lambda: f(x).block_until_ready()))
    for got, want in zip(via_jax, direct):
        # the same failures, but on another chain: compare with the name swapped
        assert got.chain == "typed-jax"
        got.chain = want.chain
        for field in ("kind", "code", "callback", "seq", "guest_message"):
            assert getattr(got, field) == getattr(want, field), field
        assert str(got) == str(want).replace("typed-direct", "typed-jax")
        assert type(got) is type(want)
    chain_error = via_jax[1]
    assert isinstance(chain_error, callbox.ChainError) and isinstance(chain_error, callbox.GuestError)
    assert (chain_error.first.callback, chain_error.first.seq, chain_error.seq) == ("fail", 1, 2)
    jhost.chain("typed-direct").reset()
    jhost.chain("typed-jax").reset()


# The door-conformance table's requests that fail at execution, through
# JAX (test_doors.py runs them through host.call): each on a host of its
# own (host=), and through host.call on another host of the same config,
# so that chains count alike.
_DOOR_IDS = ["guest_error", "timeout", "proc_guest_error", "proc_timeout", "max_output", "chain_guest_error",
             "chain_after_failure", "batch_element"]


@pytest.fixture
def door_hosts(guest_dir):
    from test_doors import TABLE, WORKER

    config = TABLE["config"].replace("{dir}", str(guest_dir)).replace(
        "{scale}", str(ROOT / "guests" / "prebuilt" / "rust-scale.wasm")).replace("{worker}", str(WORKER))
    if not WORKER.exists():
        pytest.skip("%s is missing: isolation: process cannot run here (make lib builds it)" % WORKER)
    direct, via = callbox.Host(config), callbox.Host(config)
    yield direct, via
    direct.close()
    via.close()


def test_door_table_failures_are_typed_out_of_jit(door_hosts):
    from test_doors import TABLE, make

    direct_host, jax_host = door_hosts
    cases = {c["id"]: c for c in TABLE["cases"]}
    kinds = set()
    for cid in _DOOR_IDS:
        case, want = cases[cid], TABLE["want"][cid]
        args = [make(t) for t in case["inputs"]]
        name, chain = case["callback"], case.get("chain") or None
        if case.get("batch"):
            direct = _direct(lambda: direct_host.call_batch(name, *args, chain=chain))
            f = jax.jit(jax.vmap(lambda *a: cbj.call(name, *a, chain=chain, host=jax_host)))
        else:
            direct = _direct(lambda: (direct_host.chain(chain) if chain else direct_host).call(name, *args))
            f = jax.jit(lambda *a: cbj.call(name, *a, chain=chain, host=jax_host))
        assert (direct.kind, str(direct)) == (want["kind"], want["kind"] + ": " + want["message"]), cid
        _same_failure(_through_jax(lambda: jax.block_until_ready(f(*args))), direct)
        kinds.add(direct.kind)
    assert kinds == {"GuestError", "Timeout", "InvalidArgument"}


# ---- weak types: Python scalars take their parameter's dtype ----

@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_python_scalars_take_the_parameters_dtype(jhost, demo, jit):
    run = jax.jit if jit else (lambda f: f)
    x = jnp.arange(4, dtype=jnp.float32)
    for factor in (2, 2.5, jnp.asarray(2), jnp.asarray(2.5)):
        assert jax.typeof(factor).weak_type
        y = run(lambda x, k=factor: cbj.call("scale", x, k, host=demo))(x)
        assert y.dtype == jnp.float32
        np.testing.assert_allclose(np.asarray(y), np.arange(4) * float(factor))
    # a weakly typed traced argument, and under vmap
    y = jax.jit(lambda x, k: cbj.call("scale", x, k, host=demo))(x, 3)
    np.testing.assert_allclose(np.asarray(y), np.arange(4) * 3)
    xs = jnp.arange(8, dtype=jnp.float32).reshape(2, 4)
    np.testing.assert_allclose(np.asarray(run(jax.vmap(lambda x: cbj.call("scale", x, 2, host=demo)))(xs)), xs * 2)

    # strongly typed values keep the strict check, as before
    for strong in (jnp.int32(2), np.int32(2), jnp.asarray(2, dtype=jnp.int32)):
        with pytest.raises(callbox.InvalidArgument, match=r"argument 1 \(factor\): expected f32\[\], got s32\[\]"):
            run(lambda x, k=strong: cbj.call("scale", x, k, host=demo))(x)
    with pytest.raises(callbox.InvalidArgument, match=r"expected f32\[\], got pred\[\]"):
        run(lambda x: cbj.call("scale", x, True, host=demo))(x)  # a Python bool is strongly typed in JAX


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_weak_scalars_follow_jax_promotion(jhost, jit):
    run = jax.jit if jit else (lambda f: f)

    def call(name, v):
        return run(lambda: cbj.call(name, v))()

    assert call("scalar_s8", 5).dtype == jnp.int8 and int(call("scalar_s8", 5)) == 5
    assert call("scalar_u8", 255).dtype == jnp.uint8
    assert call("scalar_c64", 2.0).dtype == jnp.complex64 and complex(call("scalar_c64", 2)) == 2
    assert call("scalar_f32", 3).dtype == jnp.float32
    assert call("scalar_s8", jnp.asarray(7)).dtype == jnp.int8  # a weak JAX value
    refusals = [
        ("scalar_s8", 2.5, r'callback "scalar_s8" refused the call before running it: argument 0 \(x\): got Python float '
                           r"2\.5, the callback takes s8, which JAX's type promotion does not make of it \(it promotes "
                           r"the two to f32\): pass jnp\.int8\(\.\.\.\) to convert it on purpose"),
        ("scalar_f32", 2j, r"argument 0 \(x\): got Python complex 2j, the callback takes f32, .*promotes the two to c64"),
        ("scalar_s8", 300, r'callback "scalar_s8" refused the call before running it: argument 0 \(x\): got Python int '
                           r"300, the callback takes s8 \(Python integer 300 out of bounds for int8\)"),
        ("scalar_u8", -1, r"argument 0 \(x\): got Python int -1, the callback takes u8 \(.*out of bounds for uint8\)"),
        ("scalar_pred", 1, r"argument 0 \(x\): got Python int 1, the callback takes pred, .*promotes the two to s32"),
        ("scalar_s8", jnp.asarray(2.5), r"argument 0 \(x\): got a weakly typed float32 JAX value, the callback takes "
                                        r"s8, .*: convert it with \.astype\(jnp\.int8\) on purpose"),
    ]
    for name, v, match in refusals:
        with pytest.raises(callbox.InvalidArgument, match=match) as e:
            call(name, v)
        assert e.value.callback == name and e.value.code == 3
    with _x64():  # f64 exists only with x64 on: then a Python float is f64
        y = run(lambda: cbj.call("copy_scalar", 1.5))()
        assert y.dtype == jnp.float64 and float(y) == 1.5


# ---- host=: the call runs on that host at execution ----

@pytest.fixture
def demo():
    """A host of the examples' config (scale, checked, ...), never the
    default host."""
    h = callbox.Host(str(ROOT / "python" / "examples" / "callbox.yaml"))
    yield h
    h.close()


def test_host_argument_runs_on_that_host(jhost, config_path):
    """Two hosts besides the default one, each named by host= in the same
    jitted function: each call runs on its own host (bump counts per
    host), the default host's counter is untouched; once one is closed
    the compiled program fails cleanly, naming the callback."""
    a, b = callbox.Host(str(config_path)), callbox.Host(str(config_path))
    try:
        x = jnp.ones(2, jnp.float32)

        @jax.jit
        def f(x):
            return (cbj.call("bump", x, ordered=True, host=a), cbj.call("bump", x, ordered=True, host=a),
                    cbj.call("bump", x, ordered=True, host=b), cbj.tap("bump", x, host=b),
                    cbj.call("bump", x, ordered=True))

        before = bumps(jhost)
        assert [int(v) for v in f(x)[:3]] == [1, 2, 1]
        assert int(f(x)[4]) == before + 2  # the default host's bump ran once a run, the others never
        assert bumps(a) == 5 and bumps(b) == 5
        text = f.lower(x).as_text()
        assert cbj._host_attr(a) in text and cbj._host_attr(b) in text  # the custom calls name their hosts

        g = jax.jit(lambda x: cbj.call("bump", x, host=b) + cbj.call("bump", x))
        g(x).block_until_ready()
        b.close()
        # A closed host cannot say the callback's name: the error names it
        # by the content id the program calls it by.
        bump = jhost.callback("bump").id
        with pytest.raises(callbox.FailedPrecondition, match=r'callback "%s": the host that attribute host names '
                                                            r"\(handle \d+\) is closed" % bump) as e:
            with cbj.typed_errors():
                g(x).block_until_ready()
        assert e.value.callback == bump and e.value.code == 9 and isinstance(e.value.__cause__, _XLA_ERRORS)
    finally:
        a.close()
        b.close()


_NO_REGISTER = r"""
import sys
import jax, jax.numpy as jnp, numpy as np
import callbox, callbox.jax as cbj

host = callbox.Host(sys.argv[1])
try:
    callbox.Host.default()
    raise SystemExit("a default host exists: the test proves nothing")
except callbox.FailedPrecondition:
    pass
x = jnp.arange(4, dtype=jnp.float32)
y = jax.jit(lambda x: cbj.call("scale", x, 2, host=host))(x)
z = jax.jit(lambda x: cbj.call("scale", x, 0.5, host=host, ordered=True))(x)
w = jax.jit(jax.vmap(lambda r: cbj.call("scale", r, 3, host=host)))(x.reshape(2, 2))
print(np.asarray(y).tolist(), np.asarray(z).tolist(), np.asarray(w).tolist())
try:
    with cbj.typed_errors():
        jax.jit(lambda x: cbj.call("checked", x - 2, host=host))(x).block_until_ready()
except callbox.GuestError as e:
    print("GuestError", e.callback, isinstance(e.__cause__, jax.errors.JaxRuntimeError))
"""


def test_host_argument_without_register_in_a_fresh_process(tmp_path):
    """In a process that never called register(host) and has no
    CALLBOX_CONFIG (so no default host), host= alone runs the program."""
    script = tmp_path / "no_register.py"
    script.write_text(_NO_REGISTER)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    env.pop("CALLBOX_CONFIG", None)
    r = subprocess.run([sys.executable, str(script), str(ROOT / "python" / "examples" / "callbox.yaml")],
                       capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["[0.0, 2.0, 4.0, 6.0] [0.0, 0.5, 1.0, 1.5] [[0.0, 3.0], [6.0, 9.0]]",
                                     "GuestError checked True"]


def test_package_readme_jax_examples(readme_root, monkeypatch):
    """python/README.md's JAX examples run as written, from the repository
    root, on the committed prebuilt modules, in this process (whose
    default host they neither need nor change)."""
    from test_host import _package_readme_blocks

    blocks = [b for b in _package_readme_blocks() if "jax" in b]
    assert blocks, "python/README.md has no JAX example"
    monkeypatch.chdir(readme_root)
    for block in blocks:
        env = {}
        exec(compile(block, "python/README.md", "exec"), env)
        if "typed_errors" in block:
            assert isinstance(env["error"], callbox.GuestError)

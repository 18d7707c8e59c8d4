"""The callbox Python package over libcallbox: calls, every dtype, every
error kind, chains, taps, threads, hostile guests on both engines."""

import json
import os
import platform
import re
import subprocess
import sys
import threading

import numpy as np
import pytest

import callbox
from callbox import errors
from conftest import DTYPES, ENGINES, HOSTILE, ROOT, hostile_name

NP = {
    "pred": np.bool_, "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "f16": np.float16, "f32": np.float32, "f64": np.float64, "c64": np.complex64, "c128": np.complex128,
}


def test_version():
    assert callbox.library_version() == "1.13.0"
    assert callbox.find_library().endswith("libcallbox.so")


def test_dtype_table_is_the_librarys():
    """The package keeps no dtype table: it reads callbox_dtypes, whose
    names are the ABI's and whose NumPy types round-trip."""
    from callbox import _lib, host as host_mod

    infos = _lib.dtypes()
    assert [i.name.decode() for i in infos if i.name != b"bf16"] == list(NP)
    for info in infos:
        if info.name == b"bf16":
            continue
        np_dtype = np.dtype(NP[info.name.decode()])
        assert host_mod._dl(np_dtype) == (info.dlpack.code, info.dlpack.bits)
        assert info.bytes == np_dtype.itemsize


def test_kinds_match_the_header():
    header = (ROOT / "ffi" / "include" / "callbox.h").read_text()
    defined = {int(v): k for k, v in re.findall(r"#define CALLBOX_KIND_(\w+) (\d+)", header)}
    assert set(defined) == set(errors.KINDS)
    for number, cls in errors.KINDS.items():
        assert re.sub(r"(?<!^)(?=[A-Z])", "_", cls.kind).upper().replace("A_B_I", "ABI") == defined[number]
        assert issubclass(cls, callbox.CallbackError)


def test_codes_are_the_librarys():
    """The binding keeps no code of its own: an error it raises itself takes
    its kind's code from the library's table (callbox_kinds, 1.7), which is
    abi's (InvalidArgument 3, FailedPrecondition 9, Timeout 4, ...)."""
    from callbox import _lib
    table = _lib.kind_codes()
    assert set(table) == set(errors.KINDS)
    assert (table[17], table[19], table[1]) == (3, 9, 4)
    for number, cls in errors.KINDS.items():
        assert cls("x").code == table[number], cls.kind


def test_callbacks(host):
    infos = {i.name: i for i in host.callbacks()}
    assert "copy_f32" in infos and "fail" in infos
    info = infos["copy_f32"]
    assert info.signature == "(x: f32[n]) -> f32[n]"
    assert info.id.startswith("cb1-") and len(info.id) == 68
    assert (info.engine, info.batching, info.num_inputs, info.num_outputs) == ("wazero", "sequential", 1, 1)
    assert infos["copy_rows"].batching == "expand_dims"
    assert host.callback(info.id) == info
    with pytest.raises(callbox.UnknownCallback, match="its module, export or signature changed since the id was taken, or it is not loaded") as e:
        host.callback("cb1-" + "0" * 64)
    assert e.value.code == 5  # NOT_FOUND, as both XLA handlers report it
    assert isinstance(e.value, callbox.InvalidArgument), "1.1 code catching InvalidArgument still catches it"


def test_limits(host):
    from conftest import hostile_name
    lim = host.limits("copy_f32")
    assert lim.timeout_ns == 250_000_000 and lim.fuel == 0 and lim.caller_stack == 0
    assert lim.max_memory > 0 and lim.max_output > 0
    assert host.limits(host.callback("copy_f32").id) == lim
    fueled = host.limits(hostile_name("spin", "FuelExhausted", "wasmtime"))
    assert (fueled.fuel, fueled.max_memory) == (1_000_000, 1 << 20)
    # wasmtime runs on a stack of the library's where the caller's is short
    # on Linux, on x86-64 or with glibc; elsewhere a caller needs max_stack
    # plus 1 MiB.
    if sys.platform == "linux" and (os.uname().machine == "x86_64" or platform.libc_ver()[0] == "glibc"):
        assert fueled.caller_stack == 0
    else:
        assert fueled.caller_stack > 1 << 20
    with pytest.raises(callbox.UnknownCallback):
        host.limits("nope")


@pytest.mark.parametrize("dtype", [d for d in DTYPES if d != "bf16"])
def test_every_dtype(host, dtype):
    t = NP[dtype]
    x = (np.arange(11) % 2).astype(t) if dtype == "pred" else (np.arange(11) * 3 + 1).astype(t)
    y = host.call("copy_" + dtype, x)
    assert y.dtype == x.dtype and y.shape == x.shape
    np.testing.assert_array_equal(y, x)


def test_bf16(host):
    """bf16 round-trips as ml_dtypes.bfloat16 (pinned in the test
    environments' requirements, so never skipped), bit for bit."""
    import ml_dtypes

    x = np.array([0, 1, -2.5, 3.0e38, 1.0e-38, np.inf, -np.inf], dtype=ml_dtypes.bfloat16)
    y = host.call("copy_bf16", x)
    assert y.dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(y.view(np.uint16), x.view(np.uint16))


def test_bf16_without_ml_dtypes_is_a_clear_error(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # import ml_dtypes raises ImportError
    with pytest.raises(callbox.InvalidArgument, match="ml_dtypes"):
        callbox.host._np_dtype(4, 16)


def test_shapes(host):
    assert host.call("copy_scalar", np.float64(2.5)).shape == ()
    assert host.call("copy_scalar", np.float64(2.5)) == 2.5
    empty = host.call("copy_f32", np.zeros(0, np.float32))
    assert empty.shape == (0,)
    m = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(host.call("copy_mat", m.T), m.T)  # non-contiguous: copied first
    s, f = host.call("copy2", np.array([1, -2], np.int16), np.array([0.5], np.float32))
    assert s.tolist() == [1, -2] and f.tolist() == [0.5]
    assert host.output_types("copy_mat", m) == [((3, 4), np.dtype(np.float32))]


def test_invalid_arguments(host):
    with pytest.raises(callbox.InvalidArgument, match=r"argument 0 \(x\): expected f32\[n\], got f32\[2,2\]") as e:
        host.call("copy_f32", np.zeros((2, 2), np.int32))  # converted (same_kind), then refused by the library
    assert e.value.code == 3 and e.value.callback == "copy_f32"
    assert isinstance(e.value, ValueError)
    with pytest.raises(callbox.InvalidArgument, match="got 2 inputs"):
        host.call("copy_f32", np.zeros(3, np.float32), np.zeros(3, np.float32))
    with pytest.raises(callbox.UnknownCallback, match=r'callback "nope" \(loaded: bump,'):
        host.call("nope", np.zeros(3, np.float32))
    with pytest.raises(callbox.InvalidArgument, match="no callbox equivalent"):
        host.call("copy_f32", np.array(["a"]))
    with pytest.raises(callbox.InvalidArgument, match="rank 2, want 1"):
        host.call("copy_f32", np.zeros((2, 2), np.float32))


def test_guest_error_and_timeout(host):
    with pytest.raises(callbox.GuestError) as e:
        host.call("fail", np.ones(3, np.float32))
    assert (e.value.callback, e.value.code, e.value.guest_message, e.value.guest_status) == ("fail", 3, "bad input", 3)
    with pytest.raises(callbox.Timeout) as t:
        host.call("spin", np.ones(3, np.float32))
    assert t.value.code == 4 and "timeout after 250ms" in str(t.value)
    assert isinstance(t.value, TimeoutError)
    # Where the guest was: kit.wasm's spin (C API 1.12), also in the message.
    assert t.value.frames and isinstance(t.value.frames[0], callbox.Frame), t.value
    assert t.value.frames[0].offset > 0 and "(at " + str(t.value.frames[0]) in str(t.value)
    assert e.value.frames == [], "a guest error status is no failure inside the guest: no frames"
    np.testing.assert_array_equal(host.call("copy_f32", np.ones(3, np.float32)), np.ones(3))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("module,export,kind,code,extra", HOSTILE, ids=[h[1] + "-" + h[2] for h in HOSTILE])
def test_hostile_guests_in_process(host, engine, module, export, kind, code, extra):
    """Both engines contain hostile guests inside the Python process: each
    raises its kind's exception with its code, naming the callback; the
    process lives on and the host still serves."""
    name = hostile_name(export, kind, engine)
    cls = getattr(callbox, kind)
    with pytest.raises(cls) as e:
        host.call(name, np.zeros(4, np.float32))
    assert e.value.kind == kind
    assert e.value.code == code
    assert e.value.callback == name
    assert name in str(e.value)
    np.testing.assert_array_equal(host.call("copy_f32", np.arange(3, dtype=np.float32)), [0, 1, 2])


def test_chain_and_barrier(host):
    x = np.ones(2, np.float32)
    ch = host.chain("py")
    start = int(ch.call("bump", x))
    ch.tap("bump", x)
    ch.tap("fail", x)
    ch.tap("bump", x)
    with pytest.raises(callbox.GuestError) as e:
        ch.barrier()
    assert (e.value.chain, e.value.seq, e.value.callback) == ("py", 3, "fail")
    assert not isinstance(e.value, callbox.ChainError), "the barrier raises the failure itself"
    with pytest.raises(callbox.ChainError, match=r"call #5 \(bump\) not run: chain failed at #3") as e:
        ch.call("bump", x)
    assert isinstance(e.value, callbox.GuestError), "a ChainError is also its first failure's kind, as in Go"
    ch.reset()
    assert int(ch.call("bump", x)) == start + 2  # the tap after the failure never ran
    ch.barrier()
    assert host.chain("py").call("bump", x) == start + 3  # same name, same chain


def test_chain_error_names_the_failed_and_the_refused_step(host):
    """After a step fails, a later call is refused with ChainError: its
    callback and seq are the refused step's, first is the failure (not
    GuestError blaming a callback that never ran, with no message)."""
    x = np.ones(2, np.float32)
    ch = host.chain("py-chainerror")
    ch.call("copy_f32", x)  # #1
    with pytest.raises(callbox.GuestError) as failed:
        ch.call("fail", x)  # #2
    assert not isinstance(failed.value, callbox.ChainError)
    with pytest.raises(callbox.ChainError) as e:
        ch.call("copy_mat", np.ones((2, 2), np.float32))  # #3, refused
    err = e.value
    assert (err.chain, err.seq, err.callback) == ("py-chainerror", 3, "copy_mat")
    assert (err.kind, err.code, err.guest_status, err.guest_message) == ("GuestError", 3, 3, "bad input")
    first = err.first
    assert type(first) is callbox.GuestError
    assert (first.callback, first.seq, first.chain) == ("fail", 2, "py-chainerror")
    assert (first.message, first.guest_message, first.guest_status, first.code) == (
        "guest returned INVALID_ARGUMENT", "bad input", 3, 3)
    assert str(first) == str(failed.value)
    assert 'call #3 (copy_mat) not run: chain failed at #2: callback "fail"' in str(err)
    ch.tap("copy_f32", x)  # refused too, reported at the barrier as the first failure
    with pytest.raises(callbox.GuestError) as b:
        ch.barrier()
    assert (b.value.callback, b.value.seq) == ("fail", 2)
    ch.reset()
    np.testing.assert_array_equal(ch.call("copy_f32", x), x)


def test_chain_error_after_a_timeout(host):
    x = np.ones(2, np.float32)
    ch = host.chain("py-timeout")
    with pytest.raises(callbox.Timeout):
        ch.call("spin", x)
    with pytest.raises(callbox.Timeout) as e:  # except Timeout still catches the refused step
        ch.call("copy_f32", x)
    assert isinstance(e.value, callbox.ChainError) and isinstance(e.value, TimeoutError)
    assert (e.value.callback, e.value.seq, e.value.code) == ("copy_f32", 2, 4)
    first = e.value.first
    assert (type(first), first.callback, first.seq, first.message) == (callbox.Timeout, "spin", 1, "timeout after 250ms")
    assert first.frames and first.frames == e.value.frames, "the refused step carries the failed step's frames"
    ch.reset()


def test_sdk_panic_is_a_guest_error(guest_dir):
    """A callbox SDK reports a panic through callbox.error and then traps:
    GuestError with the panic text, as errors.GuestError says; a bare trap
    is Unreachable."""
    wasm = guest_dir / "panic.wasm"
    sig = "(x: f32[n]) -> f32[n]"
    cfg = {"callbacks": {"panics": {"module": str(wasm), "export": "sdk_panic", "signature": sig},
                         "traps": {"module": str(wasm), "export": "bare_trap", "signature": sig}}}
    with callbox.Host(cfg) as h:
        with pytest.raises(callbox.GuestError) as e:
            h.call("panics", np.ones(2, np.float32))
        assert not isinstance(e.value, callbox.Unreachable)
        assert (e.value.message, e.value.guest_message) == ("guest aborted", "panicked at src/lib.rs:7:5: index out of bounds")
        assert (e.value.guest_status, e.value.code) == (0, 13)
        with pytest.raises(callbox.Unreachable):
            h.call("traps", np.ones(2, np.float32))
    assert "GuestError" in callbox.Unreachable.__doc__ and "panic" in callbox.GuestError.__doc__


def test_taps_and_host_barrier(host):
    x = np.ones(2, np.float32)
    host.tap("bump", x)
    host.tap("fail", x)
    with pytest.raises(callbox.GuestError):
        host.barrier()
    host.barrier()


def test_taps_copy_their_inputs(host):
    """A tap runs after tap() returns, on a copy of its inputs taken before:
    the caller's array is overwritten at once, and nonneg, which refuses a
    negative first element, still sees the 1 it was given. Sixteen 4 MiB
    copies queued first on the chain give the caller a head start (were
    the caller slower, the check could only pass, never fail wrongly)."""
    ch = host.chain("py-tapcopy")
    big = np.zeros(1 << 20, np.float32)
    for _ in range(16):
        ch.tap("copy_f32", big)
    x = np.ones(2, np.float32)
    ch.tap("nonneg_seq", x)
    x[:] = -1
    del big
    ch.barrier()


def test_threads(host):
    errors_seen = []

    def work(k):
        try:
            for i in range(100):
                x = np.arange(64, dtype=np.float32) + k * 1000 + i
                np.testing.assert_array_equal(host.call("copy_f32", x), x)
        except Exception as e:  # noqa: BLE001
            errors_seen.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors_seen == []


def test_config_forms(guest_dir):
    cfg = {"callbacks": {"c": {"module": "kit.wasm", "export": "copy", "signature": "(x: u8[n]) -> u8[n]"}}}
    x = np.arange(5, dtype=np.uint8)
    with callbox.Host(cfg, base_dir=guest_dir) as h:
        np.testing.assert_array_equal(h.call("c", x), x)
    with callbox.Host(json.dumps(cfg), base_dir=guest_dir) as h:
        np.testing.assert_array_equal(h.call("c", x), x)
    yaml = "callbacks:\n  c:\n    module: kit.wasm\n    export: copy\n    signature: '(x: u8[n]) -> u8[n]'\n"
    h = callbox.Host(yaml, base_dir=guest_dir)
    np.testing.assert_array_equal(h.call("c", x), x)
    h.close()
    h.close()
    with pytest.raises(callbox.FailedPrecondition, match="is closed") as e:
        h.call("c", x)
    assert e.value.code == 9  # FAILED_PRECONDITION
    with pytest.raises(callbox.InvalidArgument, match="callbacks.c.colour: unknown key"):
        callbox.Host(yaml + "    colour: red\n", base_dir=guest_dir)
    with pytest.raises(callbox.InvalidArgument, match="cannot open"):
        callbox.Host("/nonexistent/callbox.yaml")


def test_reload(guest_dir, tmp_path):
    """Host.reload switches configurations without closing: a changed
    callback's new limits apply, an added one runs, a removed one is
    unknown, the cached infos are the new ones; a configuration that fails
    to load is refused and the old one keeps serving; a file is read again
    with its environment overrides."""
    sig = "(x: f32[n]) -> f32[n]"
    a = {"callbacks": {"keep": {"module": "kit.wasm", "export": "copy", "signature": sig},
                       "change": {"module": "kit.wasm", "export": "copy", "signature": sig, "timeout": "100ms"},
                       "gone": {"module": "kit.wasm", "export": "copy", "signature": sig}}}
    x = np.arange(4, dtype=np.float32)
    with callbox.Host(a, base_dir=guest_dir) as h:
        assert h.limits("change").timeout_ns == 100_000_000
        assert h.callback("gone").name == "gone"
        b = {"callbacks": {"keep": a["callbacks"]["keep"],
                           "change": dict(a["callbacks"]["change"], timeout="300ms"),
                           "added": {"module": "kit.wasm", "export": "copy", "signature": sig}}}
        h.reload(b, base_dir=guest_dir)
        assert [c.name for c in h.callbacks()] == ["added", "change", "keep"]
        assert h.limits("change").timeout_ns == 300_000_000
        np.testing.assert_array_equal(h.call("added", x), x)
        np.testing.assert_array_equal(h.call("keep", x), x)
        with pytest.raises(callbox.UnknownCallback, match="gone"):
            h.callback("gone")
        with pytest.raises(callbox.UnknownCallback, match="gone"):
            h.call("gone", x)
        with pytest.raises(callbox.InvalidArgument, match="missing.wasm"):
            h.reload({"callbacks": {"broken": {"module": "missing.wasm"}}}, base_dir=guest_dir)
        assert h.limits("change").timeout_ns == 300_000_000
        np.testing.assert_array_equal(h.call("added", x), x)
        path = tmp_path / "callbox.yaml"
        path.write_text("callbacks:\n  only:\n    module: %s\n    export: copy\n    signature: '%s'\n"
                        % (guest_dir / "kit.wasm", sig))
        os.environ["CALLBOX_CALLBACKS_ONLY_TIMEOUT"] = "700ms"
        try:
            h.reload(str(path))
        finally:
            del os.environ["CALLBOX_CALLBACKS_ONLY_TIMEOUT"]
        assert [c.name for c in h.callbacks()] == ["only"]
        assert h.limits("only").timeout_ns == 700_000_000
        np.testing.assert_array_equal(h.call("only", x), x)
    with pytest.raises(callbox.FailedPrecondition, match="is closed"):
        h.reload(a, base_dir=guest_dir)


def test_library_not_found():
    code = "import callbox\ntry:\n    callbox.Host({})\nexcept OSError as e:\n    print('OSError', e)\n"
    env = dict(os.environ, CALLBOX_LIB="/nonexistent/libcallbox.so", PYTHONPATH=str(ROOT / "python"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert "OSError libcallbox.so not found (tried /nonexistent/libcallbox.so)" in out
    assert "make lib" in out


def _readme_python_blocks():
    """The Python blocks of README.md's "Python and JAX" section."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Python and JAX", 1)
    if len(section) < 2:
        return []
    section = section[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def _package_readme_blocks():
    return re.findall(r"```python\n(.*?)```", (ROOT / "python" / "README.md").read_text(), re.S)


def test_readme_examples(readme_root, monkeypatch):
    """Every NumPy example of README's "Python and JAX" section and of
    python/README.md runs as written, from the repository root, on the
    committed prebuilt modules (no `make guests`); the JAX ones run in
    test_jax."""
    blocks = [b for b in _readme_python_blocks() if "jax" not in b]
    assert len(blocks) >= 2, "README.md has no Python examples"
    package = [b for b in _package_readme_blocks() if "jax" not in b]
    assert len(package) >= 2, "python/README.md has no examples"
    for block in blocks + package:
        assert "guests/build" not in block, "README examples use guests/prebuilt, which needs no make guests"
    monkeypatch.chdir(readme_root)
    for name, block in [("README.md", b) for b in blocks] + [("python/README.md", b) for b in package]:
        exec(compile(block, name, "exec"), {})


def test_default_host(host):
    host.set_default()
    assert callbox.Host.default().handle == host.handle


def test_cuda_stats_follow_the_default_host(host):
    # The GPU path is installed with the default host; no GPU call has run.
    host.set_default()
    stats = callbox.cuda_stats()
    assert stats["mode"] == "auto"
    assert stats["calls"] == 0 and stats["pins"] == 0


def test_max_cpu(guest_dir):
    """max_cpu reaches Python: limits() reports it, and a spinning call with
    a long timeout stops at its CPU limit as a Timeout naming max_cpu."""
    cfg = {"callbacks": {"spin": {"module": str(guest_dir / "kit.wasm"), "export": "spin",
                                  "signature": "(x: f32[n]) -> f32[n]", "timeout": "30s", "max_cpu": "50ms"}}}
    with callbox.Host(cfg) as h:
        assert h.limits("spin").max_cpu_ns == 50_000_000
        with pytest.raises(callbox.Timeout, match=r"cpu time limit 50ms used up \(max_cpu\)"):
            h.call("spin", np.ones(1, np.float32))


def test_a_busy_callback_is_overloaded_not_a_timeout(guest_dir):
    """Two calls of a spinning callback with one instance: one gets the
    instance and runs into its timeout; the other waits max_wait for the
    instance and fails as Overloaded (code RESOURCE_EXHAUSTED) without
    running. Whichever thread wins, the two kinds are one of each."""
    import threading
    cfg = {"callbacks": {"spin": {"module": str(guest_dir / "kit.wasm"), "export": "spin",
                                  "signature": "(x: f32[n]) -> f32[n]", "timeout": "1s",
                                  "max_instances": 1, "max_wait": "100ms"}}}
    kinds = []

    def call(h):
        try:
            h.call("spin", np.ones(1, np.float32))
        except callbox.CallbackError as e:
            kinds.append(type(e))
    with callbox.Host(cfg) as h:
        assert h.limits("spin").max_wait_ns == 100_000_000
        t = threading.Thread(target=call, args=(h,))
        t.start()
        call(h)
        t.join()
    assert sorted(k.__name__ for k in kinds) == ["Overloaded", "Timeout"]
    assert callbox.Overloaded.kind_number == 20


def test_a_failed_call_is_logged_at_debug_only(guest_dir, caplog):
    """The host warns about failed calls (rate-limited); through the
    library, where the failure is the caller's exception already, that
    line reaches the "callbox" logger at DEBUG, never as a warning. (A
    host of its own: the limit is per callback, one line a second.)"""
    import logging
    x = np.ones(2, np.float32)
    cfg = {"callbacks": {"spin": {"module": str(guest_dir / "kit.wasm"), "export": "spin",
                                  "signature": "(x: f32[n]) -> f32[n]", "timeout": "50ms"}}}
    with caplog.at_level(logging.DEBUG, logger="callbox"), callbox.Host(cfg) as h:
        with pytest.raises(callbox.Timeout):
            h.call("spin", x)
    failed = [r for r in caplog.records if "callbox: call failed" in r.getMessage()]
    assert failed, [r.getMessage() for r in caplog.records]
    assert all(r.levelno == logging.DEBUG for r in failed)
    assert "kind=Timeout" in failed[0].getMessage()


def test_replay_bundle(guest_dir, tmp_path):
    """A failed call recorded by record_failures replays to the same
    outcome from Python, on both engines; a changed module is refused."""
    cfg = {"callbacks": {"spin": {"module": str(guest_dir / "kit.wasm"), "export": "spin",
                                  "signature": "(x: f32[n]) -> f32[n]", "timeout": "100ms",
                                  "record_failures": str(tmp_path / "replays")}}}
    with callbox.Host(cfg) as h:
        with pytest.raises(callbox.Timeout):
            h.call("spin", np.ones(3, np.float32))
    (bundle,) = (tmp_path / "replays" / "spin").iterdir()
    for engine in (None, "wasmtime"):
        r = callbox.replay(bundle, engine=engine)
        assert r.same and r.recorded == "Timeout: timeout after 100ms", r
        assert isinstance(r.error, callbox.Timeout)
    (bundle / "module.wasm").write_bytes(b"\0asm\1\0\0\0")
    with pytest.raises(ValueError, match="the module was changed after the call was recorded"):
        callbox.replay(bundle)


@pytest.mark.parametrize("engine", ["wazero", "wasmtime"])
def test_profile(guest_dir, tmp_path, engine):
    """Host.profile shows a guest's two functions in their 1:9 ratio of
    work (within 15%; fuel makes it exact but for the few instructions
    outside the loops) on both engines, counts every call of the leaf
    they share, and writes a pprof file."""
    cfg = {"callbacks": {"ratio": {"module": str(guest_dir / "profile.wasm"), "export": "ratio",
                                   "signature": "() -> ()", "engine": engine}}}
    with callbox.Host(cfg) as h:
        p = h.profile("ratio", calls=3, pprof=tmp_path / "guest.pprof")
    assert (p.callback, p.engine, p.calls, p.failed) == ("ratio", engine, 3, 0)
    light, heavy, mix = p.function("light"), p.function("heavy"), p.function("mix")
    assert heavy.total.fuel / light.total.fuel == pytest.approx(9, rel=0.15)
    assert heavy.total.fuel / light.total.fuel == pytest.approx(9, rel=0.01)
    assert mix.self.calls == 3 * 20000 * 10
    assert p.functions[0].frame.func == "heavy" or p.functions[0].frame.func == "mix", p.functions[0]
    assert heavy.self.wall > 0 and p.elapsed > 0
    pprof = (tmp_path / "guest.pprof").read_bytes()
    assert pprof[:2] == b"\x1f\x8b", "gzipped protocol buffers"
    with callbox.Host(cfg) as h:
        with pytest.raises(callbox.InvalidArgument, match="calls"):
            h.profile("ratio", calls=0)
        with pytest.raises(callbox.InvalidArgument, match="calls is -1"):
            h.profile("ratio", calls=-1)

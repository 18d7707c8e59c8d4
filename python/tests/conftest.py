"""Fixtures: the guests the Python tests load, compiled from WAT, and a
config naming them."""

import os

# JAX reads these when it is imported and when its backend starts: set them
# before any test module can import jax. The JAX tests run on the CPU (a GPU
# machine's default backend is the GPU) with four CPU devices, for the
# multi-device checks; a caller's own setting wins.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("JAX_NUM_CPU_DEVICES", "4")

import pathlib  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

DTYPES = ["pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "f16", "f32", "f64", "c64", "bf16", "c128"]

# Hostile guests from the host's hostile suite: (module, export, exception
# class name, code, extra config).
HOSTILE = [
    ("runaway", "spin", "Timeout", 4, ""),
    ("runaway", "spin", "FuelExhausted", 8, "    fuel: 1000000\n"),
    ("runaway", "recurse", "StackOverflow", 13, ""),
    ("runaway", "grow_pages", "MemoryLimit", 8, ""),
    ("traps", "div_by_zero", "DivideByZero", 13, ""),
    ("traps", "int_overflow", "IntegerOverflow", 13, ""),
    ("traps", "unreachable", "Unreachable", 13, ""),
    ("traps", "trunc_nan", "InvalidConversion", 13, ""),
    ("traps", "indirect_mismatch", "IndirectCallMismatch", 13, ""),
    ("traps", "indirect_null", "TableOutOfBounds", 13, ""),
    ("traps", "load_oob", "MemoryOutOfBounds", 13, ""),
    ("frame", "overrun_1", "ABIViolation", 13, ""),
    ("imports", "error_megabytes", "GuestError", 3, "    max_memory: 8MiB\n"),
]
ENGINES = ["wazero", "wasmtime"]


def hostile_name(export, kind, engine):
    return "h_%s_%s_%s" % (export, kind.lower(), engine)


def _wat2wasm(src, dst):
    subprocess.run([shutil.which("wat2wasm"), "--debug-names", str(src), "-o", str(dst)], check=True)


@pytest.fixture(scope="session")
def guest_dir():
    """The test guests, compiled from WAT into build/testguests with wat2wasm.
    Where wat2wasm is missing (a lent GPU machine), the ones a previous run
    left there (carried with build/) are used."""
    d = ROOT / "build" / "testguests"
    sources = [(ROOT / "ffi" / "testdata" / "kit.wat", d / "kit.wasm"),
               (ROOT / "python" / "tests" / "testdata" / "panic.wat", d / "panic.wasm"),
               (ROOT / "python" / "tests" / "testdata" / "profile.wat", d / "profile.wasm")]
    for module in sorted({h[0] for h in HOSTILE}):
        sources.append((ROOT / "host" / "testdata" / "hostile" / (module + ".wat"), d / (module + ".wasm")))
    if shutil.which("wat2wasm"):
        d.mkdir(parents=True, exist_ok=True)
        for src, dst in sources:
            _wat2wasm(src, dst)
    elif not all(dst.is_file() for _, dst in sources):
        pytest.skip("wat2wasm (wabt) is not installed and build/testguests is incomplete: "
                    "scripts/install-toolchains.sh installs wabt")
    return d


def _entry(name, module, export, sig, extra=""):
    return "  %s:\n    module: %s\n    export: %s\n    signature: \"%s\"\n    timeout: 250ms\n%s" % (
        name, module, export, sig, extra)


@pytest.fixture(scope="session")
def config_path(guest_dir):
    parts = ["callbacks:\n"]
    for d in DTYPES:
        parts.append(_entry("copy_" + d, "kit.wasm", "copy", "(x: %s[n]) -> %s[n]" % (d, d)))
    parts.append(_entry("copy_scalar", "kit.wasm", "copy", "(x: f64[]) -> f64[]"))
    parts.append(_entry("copy_mat", "kit.wasm", "copy", "(x: f32[a,b]) -> f32[a,b]"))
    for d in ("f32", "s8", "u8", "c64", "pred"):
        parts.append(_entry("scalar_" + d, "kit.wasm", "copy", "(x: %s[]) -> %s[]" % (d, d)))
    parts.append(_entry("copy_cube", "kit.wasm", "copy", "(x: f32[a,b,c]) -> f32[a,b,c]"))
    parts.append(_entry("copy_pred_mat", "kit.wasm", "copy", "(x: pred[a,b]) -> pred[a,b]"))
    parts.append(_entry("with_eps", "kit.wasm", "copy2", "(x: f32[n], eps: f32[]) -> (f32[n], f32[])"))
    parts.append(_entry("copy_rows", "kit.wasm", "copy", "(x: f32[b,n]) -> f32[b,n]", "    batching: expand_dims\n"))
    parts.append(_entry("copy2", "kit.wasm", "copy2", "(x: s16[n], y: f32[m]) -> (s16[n], f32[m])"))
    parts.append(_entry("fail", "kit.wasm", "fail", "(x: f32[n]) -> f32[n]"))
    parts.append(_entry("bump", "kit.wasm", "bump", "(x: f32[n]) -> s32[]", "    max_instances: 1\n"))
    parts.append(_entry("spin", "kit.wasm", "spin", "(x: f32[n]) -> f32[n]"))
    parts.append(_entry("nonneg_par", "kit.wasm", "nonneg", "(x: f32[n]) -> f32[n]",
                        "    batching: parallel\n    max_instances: 4\n"))
    parts.append(_entry("nonneg_seq", "kit.wasm", "nonneg", "(x: f32[n]) -> f32[n]"))
    for module, export, kind, _code, extra in HOSTILE:
        for engine in ENGINES:
            parts.append(_entry(hostile_name(export, kind, engine), module + ".wasm", export, "(x: f32[n]) -> f32[n]",
                                "    engine: %s\n    max_instances: 1\n    max_memory: 1MiB\n%s" % (engine, extra)
                                if "max_memory" not in extra else
                                "    engine: %s\n    max_instances: 1\n%s" % (engine, extra)))
    path = guest_dir / "callbox.yaml"
    path.write_text("".join(parts))
    return path


# The modules the README's Python examples name: the committed demo
# modules (guests/prebuilt, which `make check-prebuilt` keeps byte-identical
# to a build from source), so the examples run without `make guests`.
README_GUESTS = ["guests/prebuilt/rust-scale.wasm", "guests/prebuilt/wat-hostile.wasm",
                 "guests/prebuilt/go-checked.wasm"]


@pytest.fixture
def readme_root():
    """The directory the README's examples run in: the repository root."""
    missing = [p for p in README_GUESTS if not (ROOT / p).is_file()]
    if missing:
        pytest.fail("the README examples need the committed modules %s" % ", ".join(missing))
    return ROOT


@pytest.fixture(scope="session")
def host(config_path):
    import callbox

    h = callbox.Host(str(config_path))
    yield h
    h.close()


@pytest.fixture(scope="module")
def jhost(host):
    """host, registered as the host of the XLA handler (callbox.jax); for
    the JAX tests, which import jax first."""
    import callbox.jax as cbj

    cbj.register(host)
    return host


def bumps(host):
    """The bump callback's counter after one more call: every call of bump,
    from JAX or from here, adds one (max_instances 1: one counter)."""
    import numpy as np

    return int(host.call("bump", np.ones(1, np.float32)))


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)
    os.environ.setdefault("CALLBOX_LOG_LEVEL", "error")


# The examples' config: the prebuilt demo modules (guests/prebuilt).
EXAMPLES = ROOT / "python" / "examples"


@pytest.fixture(scope="session")
def demo_host():
    import callbox

    h = callbox.Host(str(EXAMPLES / "callbox.yaml"))
    yield h
    h.close()


# `make test` sets CALLBOX_NO_SKIP=1: there every test must run (JAX is
# installed from python/requirements-jax.txt), so a skipped test, and so a
# JAX that cannot be imported (importorskip), fails the run. The summary
# says how many JAX tests ran, under which JAX.
def pytest_sessionfinish(session, exitstatus):
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    stats = reporter.stats
    ran = [r for r in stats.get("passed", []) + stats.get("failed", [])
           if getattr(r, "when", "call") == "call" and "tests/test_jax" in r.nodeid.replace("\\", "/")]
    version = sys.modules["jax"].__version__ if "jax" in sys.modules else "not imported"
    reporter.write_line("callbox: %d JAX tests ran (jax %s, JAX_PLATFORMS=%s, %s CPU devices)" % (
        len(ran), version, os.environ.get("JAX_PLATFORMS"), os.environ.get("JAX_NUM_CPU_DEVICES")))
    if not os.environ.get("CALLBOX_NO_SKIP"):
        return
    skipped = stats.get("skipped", [])
    if skipped:
        for r in skipped:
            reporter.write_line("callbox: SKIPPED where every test must run: %s: %s" % (
                r.nodeid, r.longrepr[2] if isinstance(r.longrepr, tuple) else r.longrepr))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if not ran:
        reporter.write_line("callbox: no JAX test ran")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED

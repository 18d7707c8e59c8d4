"""The scripts in python/examples run as documented (each in its own
process, on the prebuilt demo modules), and `python -m callbox` lists and
checks configs."""

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

from conftest import EXAMPLES, ROOT


def _run(args, **env):
    e = dict(os.environ, PYTHONPATH=str(ROOT / "python"), **env)
    e.pop("CALLBOX_LOG_LEVEL", None)
    e.update(env)
    return subprocess.run([sys.executable] + list(args), capture_output=True, text=True, env=e, cwd=str(ROOT),
                          timeout=120)


def _example(name, **env):
    r = _run([str(EXAMPLES / name)], **env)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_every_example_is_tested():
    scripts = sorted(p.name for p in EXAMPLES.glob("*.py"))
    assert scripts == ["chains.py", "jax_call.py", "numpy_call.py", "taps.py"]


def test_numpy_call():
    out = _example("numpy_call.py").stdout
    assert "scale: [0. 2. 4. 6.]" in out
    assert "scale a list: [0.5 1.  1.5]" in out
    assert "softmax: [[0.09   0.2447 0.6652]" in out
    assert "matmul into out: [[1. 2.]" in out
    assert "histogram: [1, 2, 1] int64" in out
    assert "refused: argument 1 (factor): got Python complex 2.5j, the callback takes f32" in out
    assert "guest error: x[1] = -1 is negative" in out
    assert "timeout: spin timeout after 100ms (code 4)" in out
    assert "still serving: [0. 3. 6. 9.]" in out


def test_chains():
    out = _example("chains.py").stdout
    assert out.splitlines() == [
        "step 1, scale: [ 2.  8. 18.]",
        "step 2, checked (sqrt): [1.4142 2.8284 4.2426]",
        "step 3 (checked) failed: x[0] = -1 is negative; checked computes sqrt, which needs x >= 0",
        "step 4 (scale) not run: step 3 (checked) failed first",
        "after reset: [1. 4. 9.]",
    ]


def test_taps():
    r = _example("taps.py")
    assert r.stdout.splitlines() == [
        "unordered tap done",
        "3 ordered taps done",
        "tap failed: checked x[0] = -1 is negative; checked computes sqrt, which needs x >= 0",
    ]
    logs = [line for line in r.stderr.splitlines() if "tap_print: n=" in line]
    assert len(logs) == 4, r.stderr
    assert logs[0] == "INFO callbox: tap_print: tap_print: n=5 min=0.0 max=4.0 mean=2.0", "the tap saw its input as it was when queued"
    assert ['n=3 min=%d.0' % k in line for k, line in enumerate(logs[1:])] == [True] * 3, "ordered taps in order"


def test_jax_example():
    if importlib.util.find_spec("jax") is None:
        r = _run([str(EXAMPLES / "jax_call.py")])
        assert r.returncode == 2
        assert "jax_call.py needs jax, which is not installed" in r.stderr
        return
    out = _example("jax_call.py", JAX_PLATFORMS="cpu").stdout
    assert "scale then softmax:" in out and "vmap over rows: [[10.0, 10.0], [10.0, 10.0]]" in out


def test_examples_config_uses_prebuilt_modules():
    text = (EXAMPLES / "callbox.yaml").read_text()
    assert "guests/build" not in text
    for line in text.splitlines():
        if line.strip().startswith("module:"):
            assert (EXAMPLES / line.split(":", 1)[1].strip()).resolve().is_file(), line


# ---- python -m callbox ----

def test_module_list(demo_host):
    r = _run(["-m", "callbox", "list", str(EXAMPLES / "callbox.yaml")])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["NAME", "ID", "ENGINE", "SIGNATURE"]
    scale = demo_host.callback("scale")
    row = next(line for line in lines if line.startswith("scale "))
    assert row.split(None, 3) == ["scale", scale.id, "wazero", "(x: f32[n], factor: f32[]) -> f32[n]"]
    assert len(lines) == 1 + len(demo_host.callbacks())


def test_module_check(tmp_path):
    r = _run(["-m", "callbox", "check", str(EXAMPLES / "callbox.yaml")])
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "%s: ok, 7 callback(s) loaded" % (EXAMPLES / "callbox.yaml")
    assert any(line.split()[:3] == ["histogram", "wazero", "sequential"] for line in r.stdout.splitlines())

    bad = tmp_path / "bad.yaml"
    bad.write_text("callbacks:\n  x:\n    module: missing.wasm\n")
    r = _run(["-m", "callbox", "check", str(bad)])
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("callbox: InvalidArgument: ") and "missing.wasm" in r.stderr

    bad.write_text("callbacks:\n  x:\n    module: %s\n    colour: red\n" % (ROOT / "guests/prebuilt/rust-scale.wasm"))
    r = _run(["-m", "callbox", "check", str(bad)])
    assert r.returncode == 2 and "callbacks.x.colour: unknown key" in r.stderr

    r = _run(["-m", "callbox", "list", str(tmp_path / "nope")])
    assert r.returncode == 2 and "no such config file" in r.stderr


def test_module_escapes_guest_text():
    from callbox.__main__ import _safe

    assert _safe("a\x1b[2Jb\n\u202ec") == "a\\x1b[2Jb\\x0a\\u202ec"


def test_py_typed_ships():
    assert (ROOT / "python" / "callbox" / "py.typed").is_file()
    assert '"py.typed"' in (ROOT / "python" / "pyproject.toml").read_text()
    import callbox

    hints = callbox.Host.call.__annotations__
    assert "out" in hints and "return" in hints
    assert pathlib.Path(callbox.__file__).parent == ROOT / "python" / "callbox"

"""The door-conformance table (ffi/doors_test.go) through the Python door.

testdata/doors.json holds the table's configuration, its requests and what
the Go API gave for each (go test ./ffi -run TestDoorTableFile keeps it
current). Every request the table gives Python ("p" in its doors) must end
here as it ended there: the same kind, the same code, the same message
(str(e) is "<kind>: <the Go error's text>", as callbox_error.text is), and
the same output bytes (hashed as the Go door hashes them, FNV-1a 64): all
zero after a failure, since no door may write a partial result.
"""
import json
import re

import numpy as np
import pytest

import callbox
from conftest import ROOT

TABLE = json.loads((ROOT / "python" / "tests" / "testdata" / "doors.json").read_text())
CASES = [c for c in TABLE["cases"] if "p" in c["doors"]]
DTYPES = {"f32": np.float32, "f64": np.float64, "s16": np.int16, "pred": np.bool_}


def fnv(arrays):
    h = 14695981039346656037
    for a in arrays:
        for b in np.ascontiguousarray(a).tobytes():
            h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def make(t):
    """One tensor of a request, filled as the Go door fills it."""
    shape = tuple(t["dims"] or ())
    n = int(np.prod(shape)) if shape else 1
    a = np.zeros(n, DTYPES[t["dtype"]])
    if t["fill"]:
        flat = np.arange(n)
        if t["fill"].startswith("neg@"):
            flat[int(t["fill"][4:])] = -1
        a = (flat & 1).astype(np.bool_) if t["dtype"] == "pred" else flat.astype(DTYPES[t["dtype"]])
    return a.reshape(shape)


# The worker process of the *_proc callbacks (isolation: process), which
# `make lib` builds beside the library. A GPU machine the tests are
# carried to may lack it (it does not fit the carry beside the library):
# there those callbacks are loaded in process, so every other case's
# messages (which list the loaded callbacks) stay the table's, and their
# own cases skip, which `make test` (CALLBOX_NO_SKIP) does not allow.
WORKER = ROOT / "build" / "callbox-worker"


def _without_proc(config):
    return config.replace("isolation: process", "isolation: pooled")


@pytest.fixture(scope="module")
def hosts(guest_dir):
    config = TABLE["config"].replace("{dir}", str(guest_dir)).replace(
        "{scale}", str(ROOT / "guests" / "prebuilt" / "rust-scale.wasm")).replace(
        "{worker}", str(WORKER))
    if not WORKER.exists():
        config = _without_proc(config)
    h = callbox.Host(config)
    closed = callbox.Host(config)
    closed.close()
    yield h, closed
    h.close()


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_door(hosts, case):
    if case["callback"].endswith("_proc") and not WORKER.exists():
        pytest.skip("%s is missing: isolation: process cannot run here (make lib builds it)" % WORKER)
    h, closed = hosts
    want = TABLE["want"][case["id"]]
    name, target = case["callback"], h
    if name == "@closed":
        name, target = "copy", closed
    elif name.startswith("@id:"):
        name = h.callback(name[4:]).id
    args = [make(t) for t in case["inputs"]]
    out = None if case["outputs"] is None else [make(t) for t in case["outputs"]]
    chain = case.get("chain") or None
    try:
        if case.get("batch"):
            res = target.call_batch(name, *args, out=out, chain=chain)
        elif chain:
            res = target.chain(chain).call(name, *args, out=out)
        else:
            res = target.call(name, *args, out=out)
    except callbox.CallbackError as e:
        got = (type(e).kind, e.code, str(e))
        expected = (want["kind"], want["code"], want["kind"] + ": " + want["message"])
        if case["callback"].startswith("@id:"):
            # Content ids hash the module's bytes, and this door's kit.wasm
            # comes from wat2wasm, the Go door's from its own assembler.
            got, expected = (tuple(re.sub(r"cb1-[0-9a-f]{64}", "cb1-<id>", str(x)) for x in t) for t in (got, expected))
        assert got == expected
        assert fnv(out or []) == want["outputs"], "a failed call wrote output bytes"
        return
    assert want["kind"] == "OK", "Python ran a request the Go API refused: %s" % want["message"]
    results = out if out is not None else (list(res) if isinstance(res, (list, tuple)) else [res])
    assert fnv(results) == want["outputs"]

"""Replay bundles: rerun a failed call a callback recorded
(record_failures), as `callbox replay` does."""

import hashlib
import json
import os
from typing import Any, Dict, NamedTuple, Optional, Union

import numpy as np

from .errors import CallbackError


class Replay(NamedTuple):
    """What a replay did: same (the outcome's kind and message are the
    recorded ones), recorded ("Kind: message" as recorded), and error (the
    replay's exception, or None when the call succeeded)."""

    same: bool
    recorded: str
    error: Optional[CallbackError]


def _size(n: int) -> Any:
    return "%dB" % n if n else 0


def _duration(ns: int) -> Any:
    return "%dns" % ns if ns else 0


def replay(path: Union[str, "os.PathLike[str]"], *, engine: Optional[str] = None, isolation: Optional[str] = None,
           module: Union[str, "os.PathLike[str]", None] = None) -> Replay:
    """Rerun the call the replay bundle at path recorded, on a fresh
    instance, with the bundle's module (or module, a fix), settings and
    inputs; engine and isolation run it elsewhere. A bundle whose module
    was changed is refused (ValueError)."""
    path = os.fspath(path)
    with open(os.path.join(path, "bundle.json"), encoding="utf-8") as f:
        b: Dict[str, Any] = json.load(f)
    if b.get("format") != 1:
        raise ValueError("%s: bundle format %r; this package reads format 1" % (path, b.get("format")))
    wasm_path = os.path.join(path, "module.wasm")
    with open(wasm_path, "rb") as f:
        if hashlib.sha256(f.read()).hexdigest() != b["module_sha256"]:
            raise ValueError("%s: its sha256 is not the bundle's %s: the module was changed after the call was recorded"
                             % (wasm_path, b["module_sha256"]))
    if b.get("inputs_omitted"):
        raise ValueError("%s: the bundle has no inputs (%s)" % (path, b["inputs_omitted"]))
    inputs = []
    for name in b["inputs"]:
        if name != os.path.basename(name) or name.startswith("."):
            raise ValueError("%s: input %r is not a file of the bundle" % (path, name))
        inputs.append(np.load(os.path.join(path, name), allow_pickle=False))
    lim = b["limits"]
    cb: Dict[str, Any] = {
        "module": os.path.abspath(os.fspath(module)) if module is not None else os.path.abspath(wasm_path),
        "export": b["export"], "signature": b["signature"], "engine": engine or b["engine"],
        "isolation": isolation or b["isolation"], "wasi": b["wasi"], "deterministic": b["deterministic"],
        "max_instances": 1, "fuel": lim["Fuel"],
    }
    # The limits as the config file writes them; a zero (none, from the Go
    # API) is left to the default where a file cannot say it.
    for key, field, unit in (("timeout", "Timeout", _duration), ("max_cpu", "MaxCPU", _duration),
                             ("max_wait", "MaxWait", _duration), ("max_memory", "MaxMemory", _size),
                             ("max_stack", "MaxStack", _size), ("max_output", "MaxOutput", _size),
                             ("max_error", "MaxError", _size), ("max_log", "MaxLog", _size)):
        if lim[field]:
            cb[key] = unit(lim[field])
    from .host import Host

    recorded = "%s: %s" % (b["outcome"]["kind"], b["outcome"]["message"])
    with Host({"callbacks": {b["callback"]: cb}}) as h:
        try:
            h.call(b["callback"], *inputs)
        except CallbackError as e:
            return Replay("%s: %s" % (e.kind, e.message) == recorded, recorded, e)
    return Replay(False, recorded, None)

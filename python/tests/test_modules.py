"""A config's modules entry through the C API: every callback the module's
signature section declares is loaded, with the entry's settings and
per-callback overrides, and an error names the key."""

import numpy as np
import pytest

import callbox
from conftest import ROOT

HISTOGRAM = str(ROOT / "guests" / "prebuilt" / "rust-histogram.wasm")


def test_modules_entry_loads_every_declared_callback():
    config = {"modules": {"rust": {"module": HISTOGRAM, "timeout": "2s",
                                   "callbacks": {"histogram": {"max_memory": "32MiB"}}}}}
    with callbox.Host(config) as host:
        names = [c.name for c in host.callbacks()]
        assert "histogram" in names
        info = host.callback("histogram")
        assert info.signature == "(values: f32[n], edges: f32[b]) -> s64[b]"
        counts = host.call("histogram", np.array([0.5, 1.5, 1.7, 9], np.float32), np.array([0, 1, 2], np.float32))
        assert counts.dtype == np.int64 and counts.tolist() == [1, 2, 1]


def test_modules_entry_error_names_the_key():
    config = {"modules": {"rust": {"module": HISTOGRAM, "callbacks": {"nope": {"timeout": "1s"}}}}}
    with pytest.raises(callbox.CallbackError) as e:
        callbox.Host(config)
    assert 'modules.rust.callbacks.nope: module %s declares no signature for export "nope"' % HISTOGRAM in str(e.value)


def test_modules_entry_batching_reaches_every_door():
    """A callback loaded from a modules entry and configured `batching:
    parallel` is parallel through the C API too (what callbox.jax's vmap
    reads): the library reports the host's resolved rule, not a second
    reading of the config's callbacks section."""
    config = {"modules": {"rust": {"module": HISTOGRAM, "callbacks": {"histogram": {"batching": "parallel"}}}}}
    with callbox.Host(config) as host:
        assert host.callback("histogram").batching == "parallel"
    with callbox.Host({"modules": {"rust": {"module": HISTOGRAM}}}) as host:
        assert host.callback("histogram").batching == "sequential"

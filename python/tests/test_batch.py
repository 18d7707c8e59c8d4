"""Host.call_batch: a batched call through callbox_call_batch (library 1.3)."""

import numpy as np
import pytest

import callbox


@pytest.mark.parametrize("name", ["nonneg_par", "nonneg_seq"])
def test_call_batch_matches_per_element(host, name):
    x = np.arange(8 * 5, dtype=np.float32).reshape(8, 5)
    y = host.call_batch(name, x)
    assert y.shape == (8, 5) and y.dtype == np.float32
    np.testing.assert_array_equal(y, x)
    for i in range(8):
        np.testing.assert_array_equal(host.call(name, x[i]), y[i])


def test_call_batch_info(host):
    assert host.callback("nonneg_par").batching == "parallel"
    assert host.callback("nonneg_seq").batching == "sequential"


@pytest.mark.parametrize("name", ["nonneg_par", "nonneg_seq"])
def test_call_batch_failing_element(host, name):
    x = np.arange(8 * 5, dtype=np.float32).reshape(8, 5)
    x[3, 0], x[6, 0] = -1, -2
    out = np.full((8, 5), -7, np.float32)
    with pytest.raises(callbox.GuestError) as ei:
        host.call_batch(name, x, out=out)
    e = ei.value
    assert (e.batch_element, e.batch_size) == (3, 8)
    assert "(batch element 3 of 8)" in str(e)
    assert e.guest_message == "bad input"
    assert (out == -7).all(), "a failed batch writes no output"


def test_call_batch_chain(host):
    x = np.ones((4, 3), np.float32)
    x[2, 0] = -1
    ch = host.chain("batch-chain")
    with pytest.raises(callbox.GuestError) as ei:
        ch.call_batch("nonneg_par", x)
    assert (ei.value.batch_element, ei.value.chain) == (2, "batch-chain")
    with pytest.raises(callbox.ChainError):
        ch.call("nonneg_par", x[0])
    ch.reset()


def test_call_batch_refusals(host):
    with pytest.raises(callbox.InvalidArgument, match="leading batch dimension"):
        host.call_batch("nonneg_par", np.float32(1))
    with pytest.raises(callbox.InvalidArgument, match="out"):
        host.call_batch("nonneg_par", np.ones((4, 3), np.float32), out=np.empty((3, 3), np.float32))
    # A plain failed call names no batch element.
    with pytest.raises(callbox.GuestError) as ei:
        host.call("fail", np.ones(3, np.float32))
    assert (ei.value.batch_size, ei.value.batch_element) == (0, 0)


def test_call_batch_empty(host):
    y = host.call_batch("nonneg_par", np.empty((0, 4), np.float32))
    assert y.shape == (0, 4)

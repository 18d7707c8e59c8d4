"""Ordered chains: steps run strictly in the order made, the first failure
fails the chain, and every later step is refused with a ChainError that
names both the failed step and the refused one, until reset().

    PYTHONPATH=python python3 python/examples/chains.py
"""
import pathlib

import numpy as np

import callbox

np.set_printoptions(precision=4, suppress=True)
CONFIG = pathlib.Path(__file__).with_name("callbox.yaml")

with callbox.Host(CONFIG) as host:
    pipeline = host.chain("pipeline")  # the same name is the same chain
    y = pipeline.call("scale", np.array([1, 4, 9], np.float32), 2)
    print("step 1, scale:", y)
    print("step 2, checked (sqrt):", pipeline.call("checked", y))

    try:
        pipeline.call("checked", [-1.0])  # step 3 fails
    except callbox.GuestError as e:
        print("step %d (%s) failed: %s" % (e.seq, e.callback, e.guest_message))

    try:
        pipeline.call("scale", y, 2)  # step 4 does not run
    except callbox.ChainError as e:
        print("step %d (%s) not run: step %d (%s) failed first" % (e.seq, e.callback, e.first.seq, e.first.callback))

    pipeline.reset()  # clears the failure; numbering goes on
    print("after reset:", pipeline.call("scale", y, 0.5))

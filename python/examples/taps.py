"""Taps: callbacks run for their side effect, asynchronously (like JAX's
id_tap), their errors raised at the next barrier. tap_print logs one line
per call ("tap_print: n=5 min=0.0 max=4.0 mean=2.0"); guest log lines go
to Python's logging, logger "callbox", at their level (info here), so the
script turns info on:

    PYTHONPATH=python python3 python/examples/taps.py
"""
import logging
import pathlib

import numpy as np

import callbox

CONFIG = pathlib.Path(__file__).with_name("callbox.yaml")
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

with callbox.Host(CONFIG) as host:
    x = np.arange(5, dtype=np.float32)
    host.tap("tap_print", x)  # returns at once; the input is copied first
    x[:] = -1  # so this does not change what the tap sees
    host.barrier()  # waits for every tap; raises the first error
    print("unordered tap done")

    log = host.chain("log")  # ordered taps: in the order made, with the chain's calls
    for step in range(3):
        y = log.call("scale", np.ones(3, np.float32), step)
        log.tap("tap_print", y)
    log.barrier()
    print("3 ordered taps done")

    host.tap("checked", [-1.0])  # a failing tap: its error comes at the barrier
    try:
        host.barrier()
    except callbox.GuestError as e:
        print("tap failed:", e.callback, e.guest_message)

"""Call sandboxed callbacks on NumPy arrays: Python scalars and lists are
converted to each parameter's dtype, results can go into arrays you
allocated, and a runaway callback is stopped by its timeout.

    make lib                                  # in the repository: build/libcallbox.so
    PYTHONPATH=python python3 python/examples/numpy_call.py
"""
import pathlib

import numpy as np

import callbox

np.set_printoptions(precision=4, suppress=True)
CONFIG = pathlib.Path(__file__).with_name("callbox.yaml")  # the prebuilt demo modules

with callbox.Host(CONFIG) as host:
    x = np.arange(4, dtype=np.float32)
    print("scale:", host.call("scale", x, 2))  # 2 becomes an f32 scalar: the signature says factor: f32[]
    print("scale a list:", host.call("scale", [1, 2, 3], 0.5))

    print("softmax:", host.call("softmax", [[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]))

    c = np.empty((2, 2), np.float32)  # out=: results written in place
    host.call("matmul", [[1, 2], [3, 4]], np.eye(2, dtype=np.float32), out=c)
    print("matmul into out:", c)

    counts = host.call("histogram", np.array([0.5, 1.5, 1.7, 9.0]), [0, 1, 2])
    print("histogram:", counts.tolist(), counts.dtype)

    try:
        host.call("scale", x, 2.5j)  # complex -> f32 would lose the imaginary part: refused
    except callbox.InvalidArgument as e:
        print("refused:", e.message)

    try:
        host.call("checked", [4.0, -1.0])  # the guest refuses a negative input
    except callbox.GuestError as e:
        print("guest error:", e.guest_message)

    try:
        host.call("spin", x)  # loops forever
    except callbox.Timeout as e:
        print("timeout:", e.callback, e.message, "(code %d)" % e.code)
    print("still serving:", host.call("scale", x, 3))

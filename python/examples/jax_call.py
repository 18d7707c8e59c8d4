"""callbox inside a jitted JAX program (CPU): plain calls, ordered calls and
taps through XLA's FFI. Needs jax (pip install jax); without it this
script says so and exits with status 2.

    PYTHONPATH=python python3 python/examples/jax_call.py
"""
import pathlib
import sys

try:
    import jax
    import jax.numpy as jnp
except ImportError:
    sys.stderr.write("jax_call.py needs jax, which is not installed (pip install jax); "
                     "numpy_call.py, chains.py and taps.py run without it\n")
    sys.exit(2)

import callbox  # noqa: E402
import callbox.jax  # noqa: E402

CONFIG = pathlib.Path(__file__).with_name("callbox.yaml")

host = callbox.Host(CONFIG)
callbox.jax.register(host)  # the XLA handler calls this host


@jax.jit
def f(x):
    y = callbox.jax.call("scale", x, jnp.float32(2))
    callbox.jax.tap("tap_print", y)  # ordered, like io_callback(ordered=True)
    return callbox.jax.call("softmax", y[None, :], ordered=True)[0]


print("scale then softmax:", f(jnp.arange(3, dtype=jnp.float32)).round(4).tolist())
print("vmap over rows:", jax.vmap(lambda r: callbox.jax.call("scale", r, jnp.float32(10)))(jnp.ones((2, 2))).tolist())

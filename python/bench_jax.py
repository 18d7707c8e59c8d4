"""JAX timings of callbox (CPU), against JAX's own host callbacks, for
scripts/device-check.sh. Needs jax, numpy, build/libcallbox.so and
build/testguests/kit.wasm (left there by `make pytest`).

Prints a Markdown table: median of 30 timed calls of a jitted function
after warm-up, microseconds per call (per callbox call for the chain),
beside the anchors measured on the same kind of machine
(shared/anchors-jax.md) and the issue's targets.
"""

import os
import pathlib
import statistics
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import callbox  # noqa: E402
import callbox.jax as cbj  # noqa: E402

# shared/anchors-jax.md, CPU rows (µs per call).
ANCHOR_RAW_FFI_1K = 12.7
ANCHOR_PURE_CALLBACK = {"4 MiB": 7697, "32 MiB": 60494}
ANCHOR_ORDERED_IO_CALLBACK_CHAIN = 116


def median_us(f, *args, n=30):
    jax.block_until_ready(f(*args))
    jax.block_until_ready(f(*args))
    times = []
    for _ in range(n):
        t = time.perf_counter()
        jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def main():
    kit = ROOT / "build" / "testguests" / "kit.wasm"
    if not kit.is_file():
        sys.exit("bench_jax: %s is missing: run `make pytest` on the development machine and carry build/" % kit)
    sig = "(x: f32[n]) -> f32[n]"
    host = callbox.Host({"callbacks": {
        "copy": {"module": str(kit), "signature": sig, "max_memory": "160MiB", "timeout": "10s"},
        "fail": {"module": str(kit), "signature": sig},
    }})
    cbj.register(host)
    rows = []

    # 1 KiB: a jitted callbox call.
    x = jnp.arange(256, dtype=jnp.float32)
    f = jax.jit(lambda x: cbj.call("copy", x))
    np.testing.assert_array_equal(np.asarray(f(x)), np.asarray(x))
    t = median_us(f, x)
    rows.append(("jitted 1 KiB callbox call", t, "≤ raw C FFI + 3 = %.1f" % (ANCHOR_RAW_FFI_1K + 3),
                 t <= ANCHOR_RAW_FFI_1K + 3))

    # A chain of 100 ordered calls, each on the previous result.
    @jax.jit
    def chain(x):
        for _ in range(100):
            x = cbj.call("copy", x, ordered=True)
        return x

    np.testing.assert_array_equal(np.asarray(chain(x)), np.asarray(x))
    t = median_us(chain, x) / 100
    rows.append(("100 ordered callbox calls, per call", t, "≤ 3 (io_callback ordered: %d)" % ANCHOR_ORDERED_IO_CALLBACK_CHAIN,
                 t <= 3))

    # A failing ordered call stops the later ones.
    @jax.jit
    def stops(x):
        cbj.call("copy", x, ordered=True)
        cbj.call("fail", x, ordered=True)
        return cbj.call("copy", x, ordered=True)

    try:
        jax.block_until_ready(stops(x))
        print("bench_jax: FAIL: the failing ordered call did not raise")
    except Exception as e:  # noqa: BLE001
        print("ordered failure surfaced as: %s" % str(e).splitlines()[0][:160])

    # 4 MiB and 32 MiB: callbox against jax.pure_callback identity.
    for label, n in (("4 MiB", 1 << 20), ("32 MiB", 8 << 20)):
        big = jnp.arange(n, dtype=jnp.float32)
        g = jax.jit(lambda x: cbj.call("copy", x))
        np.testing.assert_array_equal(np.asarray(g(big)), np.asarray(big))
        pc = jax.jit(lambda x: jax.pure_callback(lambda a: np.asarray(a), jax.ShapeDtypeStruct(x.shape, x.dtype), x))
        t_cb, t_pc = median_us(g, big, n=10), median_us(pc, big, n=10)
        rows.append(("%s callbox call" % label, t_cb, "pure_callback here %.0f (anchor %d): %.1fx faster, want ≥ 4x"
                     % (t_pc, ANCHOR_PURE_CALLBACK[label], t_pc / t_cb), t_pc / t_cb >= 4))

    print()
    print("| measurement (jax %s, CPU) | µs | target | met |" % jax.__version__)
    print("|---|--:|---|---|")
    for name, t, target, met in rows:
        print("| %s | %.1f | %s | %s |" % (name, t, target, "yes" if met else "no"))
    host.close()


if __name__ == "__main__":
    main()

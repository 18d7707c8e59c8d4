"""JAX timings of callbox (CPU), against JAX's own host callbacks measured
in the same run, for scripts/device-check.sh. Needs jax, numpy,
build/libcallbox.so and build/testguests/kit.wasm (left there by
`make pytest`).

Each row times a jitted function (median of 30 calls after warm-up, 10 for
the large sizes), microseconds per call, for callbox, jax.pure_callback and
ordered jax.experimental.io_callback doing the same copy:
  * one 1 KiB call (ordered and unordered callbox);
  * a chain of 100 ordered calls, each on the previous result, per call
    (callbox ordered=True; io_callback ordered=True; pure_callback chained
    by data only);
  * one call at 4 MiB and at 32 MiB.
Prints a Markdown table beside the anchors measured earlier on the same kind
of machine (shared/anchors-jax.md) and the issue's targets; --json PATH also
writes every number and check.
"""

import argparse
import json
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
from jax.experimental import io_callback  # noqa: E402

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


def _copy(a):
    return np.asarray(a)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="write the results to this file too")
    a = ap.parse_args(argv)
    kit = ROOT / "build" / "testguests" / "kit.wasm"
    if not kit.is_file():
        sys.exit("bench_jax: %s is missing: run `make pytest` on the development machine and carry build/" % kit)
    sig = "(x: f32[n]) -> f32[n]"
    host = callbox.Host({"callbacks": {
        "copy": {"module": str(kit), "signature": sig, "max_memory": "160MiB", "timeout": "10s"},
        "fail": {"module": str(kit), "signature": sig},
    }})
    cbj.register(host)
    rows, checks, timings = [], [], {}

    def check(name, ok, detail=""):
        checks.append({"check": name, "ok": bool(ok), "detail": detail})
        if not ok:
            print("bench_jax: FAIL: %s %s" % (name, detail))

    def pure(x):
        return jax.pure_callback(_copy, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    def io(x):
        return io_callback(_copy, jax.ShapeDtypeStruct(x.shape, x.dtype), x, ordered=True)

    def timed(label, fns, x, n=30):
        row = {}
        for name, f in fns.items():
            got = np.asarray(f(x))
            check("%s %s result" % (label, name), np.array_equal(got, np.asarray(x)))
            row[name] = median_us(f, x, n=n)
        timings[label] = row
        return row

    # 1 KiB: one jitted call.
    x = jnp.arange(256, dtype=jnp.float32)
    one = timed("1 KiB", {
        "callbox": jax.jit(lambda x: cbj.call("copy", x)),
        "callbox ordered": jax.jit(lambda x: cbj.call("copy", x, ordered=True)),
        "pure_callback": jax.jit(pure),
        "io_callback ordered": jax.jit(io),
    }, x)
    t = one["callbox"]
    rows.append(("jitted 1 KiB callbox call", t, "≤ raw C FFI + 3 = %.1f; pure_callback here %.1f, io_callback ordered %.1f"
                 % (ANCHOR_RAW_FFI_1K + 3, one["pure_callback"], one["io_callback ordered"]), t <= ANCHOR_RAW_FFI_1K + 3))

    # A chain of 100 calls, each on the previous result; per call.
    def chain_of(step):
        def f(x):
            for _ in range(100):
                x = step(x)
            return x
        return jax.jit(f)

    chain = timed("100-call chain (total)", {
        "callbox ordered": chain_of(lambda x: cbj.call("copy", x, ordered=True)),
        "io_callback ordered": chain_of(io),
        "pure_callback (data-chained)": chain_of(pure),
    }, x)
    timings["100-call chain, per call"] = {k: v / 100 for k, v in chain.items()}
    t = chain["callbox ordered"] / 100
    rows.append(("100 ordered callbox calls, per call", t, "≤ 3; io_callback ordered here %.1f (anchor %d)"
                 % (chain["io_callback ordered"] / 100, ANCHOR_ORDERED_IO_CALLBACK_CHAIN), t <= 3))

    # A failing ordered call stops the later ones.
    @jax.jit
    def stops(x):
        cbj.call("copy", x, ordered=True)
        cbj.call("fail", x, ordered=True)
        return cbj.call("copy", x, ordered=True)

    try:
        jax.block_until_ready(stops(x))
        check("a failing ordered call raises", False, "it did not raise")
    except Exception as e:  # noqa: BLE001
        msg = str(e).splitlines()[0][:160]
        check("a failing ordered call raises", "callbox GuestError" in msg, msg)
        print("ordered failure surfaced as: %s" % msg)

    # 4 MiB and 32 MiB: one call.
    for label, n in (("4 MiB", 1 << 20), ("32 MiB", 8 << 20)):
        big = jnp.arange(n, dtype=jnp.float32)
        row = timed(label, {
            "callbox": jax.jit(lambda x: cbj.call("copy", x)),
            "callbox ordered": jax.jit(lambda x: cbj.call("copy", x, ordered=True)),
            "pure_callback": jax.jit(pure),
            "io_callback ordered": jax.jit(io),
        }, big, n=10)
        t_cb, t_pc = row["callbox"], row["pure_callback"]
        rows.append(("%s callbox call" % label, t_cb, "pure_callback here %.0f (anchor %d): %.1fx faster, want ≥ 4x; io_callback ordered %.0f"
                     % (t_pc, ANCHOR_PURE_CALLBACK[label], t_pc / t_cb, row["io_callback ordered"]), t_pc / t_cb >= 4))

    print()
    print("| measurement (jax %s, CPU) | µs | target | met |" % jax.__version__)
    print("|---|--:|---|---|")
    for name, t, target, met in rows:
        print("| %s | %.1f | %s | %s |" % (name, t, target, "yes" if met else "no"))
    print()
    print("| µs per call | " + " | ".join(sorted({k for r in timings.values() for k in r})) + " |")
    for label, row in timings.items():
        print("| %s | " % label + " | ".join("%.1f" % row[k] if k in row else "" for k in sorted({k for r in timings.values() for k in r})) + " |")
    host.close()
    ok = all(c["ok"] for c in checks)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"jax": jax.__version__, "backend": jax.default_backend(), "ok": ok, "checks": checks,
                       "timings_us": timings,
                       "targets": [{"measurement": n, "us": t, "target": tg, "met": bool(m)} for n, t, tg, m in rows]},
                      f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Through-XLA timings of callbox on the CPU backend, side by side in one
run with JAX's own host callbacks and a raw C XLA FFI handler doing the
same copy (python/bench_floor.c, built here with cc: the floor any FFI
callback pays). `make bench` runs it under the pinned JAX
(build/venv/jax) and puts its table in docs/PERFORMANCE.md;
scripts/device-check.sh runs it on a GPU machine's CPU backend. Needs jax,
numpy, a C compiler, build/libcallbox.so and build/testguests/kit.wasm
(left there by `make pytest`).

Every variant of a row runs on the same array in interleaved rounds (each
round times every variant in turn, so a noisy moment hits them alike); a
variant's time is the median over rounds of its per-round median, and
each comparison is the median of its per-round ratios or differences:
  * one jitted 1 KiB call: callbox (unordered; ordered under jax.jit and
    under callbox.jax.jit), the raw C FFI handler, jax.pure_callback,
    ordered io_callback; targets: callbox at most the raw handler + 3 µs;
    the ordered call under callbox.jax.jit at most the unordered one + 5 µs
    and at least 20x faster than ordered io_callback;
  * a chain of 100 ordered calls inside one jit, each on the previous
    result, per call: callbox ordered=True (jax.jit and callbox.jax.jit),
    ordered io_callback, the raw handler chained by data and threaded with
    callbox's ordered token (the floor of an ordered chain) under both;
    targets: at most 3 µs a call and at least 35x faster than io_callback
    (jax.jit), and under callbox.jax.jit at most 1.3x the raw handler
    threaded the same way;
  * one call at 4 MiB and at 32 MiB: target: the jitted call at most
    1.15x the same callback through host.call in this process (the bridge's
    own cost); and the SIMD guest kernel (scale, simd128) through XLA at
    most the time of pure_callback doing it with NumPy.
Prints a Markdown table (--markdown PATH writes it there too, for the
report) and --json PATH writes every number and check.
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

# shared/anchors-jax.md, CPU rows measured on a GPU machine's 16 cores (µs
# per call), printed beside this run's numbers for reference only.
ANCHOR_RAW_FFI_1K = 12.7
ANCHOR_PURE_CALLBACK = {"4 MiB": 7697, "32 MiB": 60494}
ANCHOR_ORDERED_IO_CALLBACK_CHAIN = 116


def _once_us(f, x):
    t = time.perf_counter()
    jax.block_until_ready(f(x))
    return (time.perf_counter() - t) * 1e6


def interleaved(fns, x, rounds, n):
    """{name: [per-round median µs]}: rounds rounds, each timing n calls of
    every function in turn, after two warm-up calls of each."""
    for f in fns.values():
        jax.block_until_ready(f(x))
        jax.block_until_ready(f(x))
    per_round = {name: [] for name in fns}
    for _ in range(rounds):
        for name, f in fns.items():
            per_round[name].append(statistics.median(_once_us(f, x) for _ in range(n)))
    return per_round


def _build_floor():
    """The raw C handler, built from python/bench_floor.c and registered as
    the XLA FFI target "bench_floor" (CPU)."""
    import ctypes
    import subprocess
    import tempfile

    out = os.path.join(tempfile.mkdtemp(prefix="callbox-bench-floor-"), "bench_floor.so")
    import shutil

    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or "cc"
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-I", str(ROOT / "ffi"), "-o", out, str(ROOT / "python" / "bench_floor.c")],
                   check=True)
    lib = ctypes.CDLL(out)
    jax.ffi.register_ffi_target("bench_floor", jax.ffi.pycapsule(lib.bench_floor), platform="cpu")
    return lib


def _copy(a):
    """What the callbacks do: copy their input (a real copy, as the guest's
    and the raw handler's)."""
    return np.array(a, copy=True)


def _median(xs):
    return statistics.median(xs)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="write the results to this file too")
    ap.add_argument("--markdown", help="write the Markdown tables to this file too")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds per row (default 7)")
    a = ap.parse_args(argv)
    kit = ROOT / "build" / "testguests" / "kit.wasm"
    if not kit.is_file():
        sys.exit("bench_jax: %s is missing: run `make pytest` on the development machine and carry build/" % kit)
    sig = "(x: f32[n]) -> f32[n]"
    host = callbox.Host({"callbacks": {
        "copy": {"module": str(kit), "signature": sig, "max_memory": "160MiB", "timeout": "10s"},
        "fail": {"module": str(kit), "signature": sig},
        "scale_simd": {"module": str(ROOT / "guests" / "prebuilt" / "bench-kernels_simd.wasm"), "export": "scale",
                       "max_memory": "160MiB", "timeout": "10s"},
    }})
    cbj.register(host)
    floor_lib = _build_floor()  # noqa: F841  (kept loaded while XLA may call it)
    rows, checks, timings = [], [], {}

    def check(name, ok, detail=""):
        checks.append({"check": name, "ok": bool(ok), "detail": detail})
        if not ok:
            print("bench_jax: FAIL: %s %s" % (name, detail))

    def pure(x):
        return jax.pure_callback(_copy, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    def io(x):
        return io_callback(_copy, jax.ShapeDtypeStruct(x.shape, x.dtype), x, ordered=True)

    def raw(x):
        return jax.ffi.ffi_call("bench_floor", jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    def timed(label, fns, x, n, want=None):
        for name, f in fns.items():
            got = np.asarray(f(x))
            check("%s %s result" % (label, name), np.array_equal(got, np.asarray(x) if want is None else want))
        per_round = interleaved(fns, x, a.rounds, n)
        timings[label] = {name: _median(v) for name, v in per_round.items()}
        return per_round

    # 1 KiB: one jitted call.
    x = jnp.arange(256, dtype=jnp.float32)
    one = timed("1 KiB", {
        "callbox": jax.jit(lambda x: cbj.call("copy", x)),
        "callbox ordered": jax.jit(lambda x: cbj.call("copy", x, ordered=True)),
        "callbox ordered, callbox.jax.jit": cbj.jit(lambda x: cbj.call("copy", x, ordered=True)),
        "raw C FFI": jax.jit(raw),
        "pure_callback": jax.jit(pure),
        "io_callback ordered": jax.jit(io),
    }, x, n=200)
    over = _median([c - r for c, r in zip(one["callbox"], one["raw C FFI"])])
    over_ordered = _median([c - r for c, r in zip(one["callbox ordered"], one["raw C FFI"])])
    t = timings["1 KiB"]
    rows.append(("jitted 1 KiB call", "%.1f µs, raw C FFI %.1f: +%.1f µs (ordered %.1f: +%.1f)"
                 % (t["callbox"], t["raw C FFI"], over, t["callbox ordered"], over_ordered),
                 "≤ raw C FFI + 3 µs", over <= 3,
                 "pure_callback %.1f, io_callback ordered %.1f" % (t["pure_callback"], t["io_callback ordered"])))
    scoped_over = _median([s - c for s, c in zip(one["callbox ordered, callbox.jax.jit"], one["callbox"])])
    scoped_speedup = _median([i / s for i, s in zip(one["io_callback ordered"], one["callbox ordered, callbox.jax.jit"])])
    rows.append(("jitted 1 KiB ordered call, callbox.jax.jit",
                 "%.1f µs: unordered + %.1f µs, %.0fx faster than io_callback ordered"
                 % (t["callbox ordered, callbox.jax.jit"], scoped_over, scoped_speedup),
                 "≤ unordered + 5 µs and ≥ 20x", scoped_over <= 5 and scoped_speedup >= 20,
                 "under jax.jit (JAX's ordered effect) %.1f µs" % t["callbox ordered"]))

    # A chain of 100 calls inside one jit, each on the previous result.
    def chain_of(step, jit=jax.jit):
        def f(x):
            for _ in range(100):
                x = step(x)
            return x
        return jit(f)

    # The floor of an ordered chain: the raw handler threaded with callbox's
    # token (our ordered custom call, with the raw handler as its target),
    # so JAX's own cost of running a program with an ordered effect shows.
    def raw_step(x):
        return cbj._bind_ordered([x], "copy", host.callback("copy").id, "", cbj._host_attr(None),
                                 [jax.core.ShapedArray(x.shape, x.dtype)])[0]

    raw_ordered, raw_scoped = chain_of(raw_step), chain_of(raw_step, cbj.jit)
    cbj.TARGET = "bench_floor"
    try:
        jax.block_until_ready((raw_ordered(x), raw_scoped(x)))  # lowered and compiled now, naming bench_floor
    finally:
        cbj.TARGET = "callbox"
    chain = timed("100-call chain (total)", {
        "callbox ordered": chain_of(lambda x: cbj.call("copy", x, ordered=True)),
        "callbox ordered, callbox.jax.jit": chain_of(lambda x: cbj.call("copy", x, ordered=True), cbj.jit),
        "io_callback ordered": chain_of(io),
        "raw C FFI": chain_of(raw),
        "raw C FFI ordered": raw_ordered,
        "raw C FFI ordered, callbox.jax.jit": raw_scoped,
    }, x, n=20)
    timings["100-call chain, per call"] = {k: v / 100 for k, v in timings["100-call chain (total)"].items()}
    per_call = timings["100-call chain, per call"]["callbox ordered"]
    speedup = _median([i / c for i, c in zip(chain["io_callback ordered"], chain["callbox ordered"])])
    bound = _median([i / r for i, r in zip(chain["io_callback ordered"], chain["raw C FFI ordered"])])
    pc = timings["100-call chain, per call"]
    rows.append(("100 ordered calls in one jit, per call",
                 "%.2f µs; io_callback %.1f µs: %.0fx faster" % (per_call, per_call * speedup, speedup),
                 "≤ 3 µs and ≥ 35x", per_call <= 3 and speedup >= 35,
                 "raw C FFI %.2f µs a call unordered, %.2f threaded with the ordered token: %.0fx faster than "
                 "io_callback, the most any callback reaches here" % (pc["raw C FFI"], pc["raw C FFI ordered"], bound)))

    scoped_ratio = _median([c / r for c, r in zip(chain["callbox ordered, callbox.jax.jit"],
                                                  chain["raw C FFI ordered, callbox.jax.jit"])])
    rows.append(("100 ordered calls in one callbox.jax.jit, per call",
                 "%.2f µs: %.2fx the raw C FFI threaded the same way (%.2f µs)"
                 % (pc["callbox ordered, callbox.jax.jit"], scoped_ratio, pc["raw C FFI ordered, callbox.jax.jit"]),
                 "≤ 1.3x", scoped_ratio <= 1.3, "the chain's total includes one dispatch"))

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

    # 4 MiB and 32 MiB: one call, against the same callback through
    # host.call in this process (its result a fresh NumPy array, as XLA's
    # is a fresh buffer), and the SIMD kernel against NumPy in pure_callback.
    two = np.float32(2)
    for label, n in (("4 MiB", 1 << 20), ("32 MiB", 8 << 20)):
        big = jnp.arange(n, dtype=jnp.float32)
        big_np = np.asarray(big)
        reps = 5 if n > (1 << 20) else 15
        row = timed(label, {
            "callbox": jax.jit(lambda x: cbj.call("copy", x)),
            "host.call": lambda x: host.call("copy", big_np),
            "callbox ordered": jax.jit(lambda x: cbj.call("copy", x, ordered=True)),
            "raw C FFI": jax.jit(raw),
            "pure_callback": jax.jit(pure),
            "io_callback ordered": jax.jit(io),
        }, big, n=reps)
        bridge = _median([c / h for c, h in zip(row["callbox"], row["host.call"])])
        t = timings[label]
        rows.append(("%s call through XLA / host.call" % label, "%.2fx (%.0f µs against %.0f µs)" % (bridge, t["callbox"], t["host.call"]),
                     "≤ 1.15x", bridge <= 1.15, "raw C FFI %.0f µs, pure_callback %.0f µs, io_callback ordered %.0f µs"
                     % (t["raw C FFI"], t["pure_callback"], t["io_callback ordered"])))
        simd_label = "%s scale (x * 2)" % label
        srow = timed(simd_label, {
            "callbox SIMD": jax.jit(lambda x: cbj.call("scale_simd", x, two)),
            "pure_callback NumPy": jax.jit(lambda x: jax.pure_callback(lambda a: a * two, jax.ShapeDtypeStruct(x.shape, x.dtype), x)),
        }, big, n=reps, want=big_np * two)
        ratio = _median([c / p for c, p in zip(srow["callbox SIMD"], srow["pure_callback NumPy"])])
        st = timings[simd_label]
        rows.append(("%s: SIMD guest through XLA / pure_callback with NumPy" % simd_label,
                     "%.2fx (%.0f µs against %.0f µs)" % (ratio, st["callbox SIMD"], st["pure_callback NumPy"]),
                     "≤ 1x", ratio <= 1, "guests/bench/kernels_simd.c's scale, simd128"))

    names = ["callbox", "host.call", "callbox ordered", "callbox ordered, callbox.jax.jit", "raw C FFI", "raw C FFI ordered",
             "raw C FFI ordered, callbox.jax.jit", "pure_callback", "io_callback ordered", "callbox SIMD", "pure_callback NumPy"]
    lines = ["| through XLA (jax %s, %s backend, %d interleaved rounds) | callbox | target | met | beside it |"
             % (jax.__version__, jax.default_backend(), a.rounds), "|---|---|---|---|---|"]
    for name, measured, target, met, beside in rows:
        lines.append("| %s | %s | %s | %s | %s |" % (name, measured, target, "yes" if met else "**no**", beside))
    lines += ["", "| µs per call (median of round medians) | " + " | ".join(names) + " |",
              "|---|" + "--:|" * len(names)]
    for label, row in timings.items():
        if label == "100-call chain (total)":
            continue
        lines.append("| %s | " % label + " | ".join("%.2f" % row[k] if k in row else "" for k in names) + " |")
    lines.append("")
    lines.append("Anchors from shared/anchors-jax.md (jaxlib 0.11.2, a 16-core GPU machine's CPU backend, for "
                 "reference only): raw C FFI 1 KiB %.1f µs; pure_callback 4 MiB %d µs, 32 MiB %d µs; ordered "
                 "io_callback in a chain %d µs a call." % (ANCHOR_RAW_FFI_1K, ANCHOR_PURE_CALLBACK["4 MiB"],
                                                          ANCHOR_PURE_CALLBACK["32 MiB"], ANCHOR_ORDERED_IO_CALLBACK_CHAIN))
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    host.close()
    ok = all(c["ok"] for c in checks)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"jax": jax.__version__, "backend": jax.default_backend(), "ok": ok, "checks": checks,
                       "timings_us": timings,
                       "targets": [{"measurement": n, "value": m, "target": tg, "met": bool(ok_)}
                                   for n, m, tg, ok_, _ in rows]}, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""callbox's GPU path under real JAX, on a GPU machine.

scripts/device-check-cuda.sh runs this once per copy mode (the library
reads CALLBOX_CUDA_COPY when it loads), then once more with --report to
merge the runs into a table. Each run:

  * checks results: a pass-through callback (tap_print, `$x`) and a scale
    callback, pooled and fresh, on both engines, at every size; an unknown
    callback is NOT_FOUND; a guest that spins is DEADLINE_EXCEEDED; calls
    with a chain attribute run;
  * times a jitted GPU program calling them at 1 KiB, 4 MiB and 32 MiB
    beside jax.pure_callback doing the same, and beside two plain C FFI
    handlers (scripts/device_check_floor.c) doing only the copies, through
    pinned and through pageable memory: the floor. Median of 30 calls
    after warm-up, microseconds;
  * reads the GPU path's totals (callbox_cuda_stats): which copy path ran,
    and that each pooled instance was pinned once.

Needs jax with CUDA, numpy, build/libcallbox.so (carried from the
development machine) and guests/build. No Go.
"""

import argparse
import ctypes
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = [("1 KiB", 256), ("4 MiB", 1 << 20), ("32 MiB", 8 << 20)]
REPS, WARM = 30, 3


class CallboxError(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32), ("kind", ctypes.c_int32), ("code", ctypes.c_int32),
        ("guest_status", ctypes.c_int32), ("seq", ctypes.c_uint64), ("kind_name", ctypes.c_char_p),
        ("callback", ctypes.c_char_p), ("chain", ctypes.c_char_p), ("message", ctypes.c_char_p),
        ("guest_message", ctypes.c_char_p), ("text", ctypes.c_char_p),
    ]


def config():
    g = os.path.join(ROOT, "guests", "build")
    return f"""
defaults:
  timeout: 10s
  max_memory: 256MiB
  max_instances: 2
callbacks:
  tap_print:
    module: {g}/rust/tap_print.wasm
  scale:
    module: {g}/rust/scale.wasm
  scale_wasmtime:
    module: {g}/rust/scale.wasm
    export: scale
    engine: wasmtime
  scale_fresh:
    module: {g}/rust/scale.wasm
    export: scale
    isolation: fresh
  spin:
    module: {g}/wat/hostile.wasm
    signature: "(x: f32[n]) -> f32[n]"
    timeout: 100ms
"""


def open_library(path):
    lib = ctypes.CDLL(os.path.abspath(path), mode=ctypes.RTLD_GLOBAL)
    for sym in ("callbox_open_config", "callbox_set_default_host", "callbox_xla_ffi_cuda", "callbox_cuda_stats"):
        if not hasattr(lib, sym):
            sys.exit(f"{path} has no {sym}: build libcallbox 1.1 or later (make lib)")
    lib.callbox_open_config.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint64)]
    lib.callbox_open_config.restype = ctypes.POINTER(CallboxError)
    lib.callbox_set_default_host.argtypes = [ctypes.c_uint64]
    lib.callbox_set_default_host.restype = ctypes.POINTER(CallboxError)
    lib.callbox_cuda_stats.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.callbox_cuda_stats.restype = ctypes.c_int64
    host = ctypes.c_uint64()
    err = lib.callbox_open_config(config().encode(), b"yaml", ROOT.encode(), ctypes.byref(host))
    if err:
        sys.exit("callbox_open_config: " + err.contents.text.decode())
    err = lib.callbox_set_default_host(host)
    if err:
        sys.exit("callbox_set_default_host: " + err.contents.text.decode())
    return lib


def stats(lib):
    buf = ctypes.create_string_buffer(4096)
    n = lib.callbox_cuda_stats(buf, len(buf))
    return json.loads(buf.value.decode()) if n >= 0 else {}


def median_us(f, *args):
    for _ in range(WARM):
        f(*args).block_until_ready()
    ts = []
    for _ in range(REPS):
        t0 = time.perf_counter()
        f(*args).block_until_ready()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e6


def run(mode, out_path, floor_path):
    import numpy as np
    import jax
    import jax.numpy as jnp

    lib = open_library(os.environ.get("CALLBOX_LIB", os.path.join(ROOT, "build", "libcallbox.so")))
    gpu = jax.devices("gpu")[0]
    jax.ffi.register_ffi_target("callbox", jax.ffi.pycapsule(lib.callbox_xla_ffi_cuda), platform="CUDA")
    floor = ctypes.CDLL(floor_path)
    for name in ("floor_pinned", "floor_pageable"):
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(getattr(floor, name)), platform="CUDA")

    def cb(name, **attrs):
        def call(x, *rest):
            aliases = {0: 0} if name == "tap_print" else {}
            return jax.ffi.ffi_call("callbox", jax.ShapeDtypeStruct(x.shape, x.dtype),
                                    input_output_aliases=aliases)(x, *rest, callback=name, **attrs)
        return jax.jit(call)

    def raw(target):
        return jax.jit(lambda x: jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(x.shape, x.dtype))(x))

    pc_identity = jax.jit(lambda x: jax.pure_callback(lambda a: np.asarray(a), jax.ShapeDtypeStruct(x.shape, x.dtype), x))
    pc_scale = jax.jit(lambda x, f: jax.pure_callback(lambda a, b: (a * b).astype(np.float32),
                                                      jax.ShapeDtypeStruct(x.shape, x.dtype), x, f))

    checks, timings = [], {}

    def check(name, ok, detail=""):
        checks.append({"check": name, "ok": bool(ok), "detail": detail})
        print(("ok   " if ok else "FAIL ") + name + (": " + detail if detail and not ok else ""), flush=True)

    factor = jax.device_put(np.float32(2.5), gpu)
    for label, n in SIZES:
        x_host = np.arange(n, dtype=np.float32) / 7
        x = jax.device_put(x_host, gpu)
        check(f"tap_print {label} returns its input", np.array_equal(np.asarray(cb("tap_print")(x)), x_host))
        for name in ("scale", "scale_wasmtime", "scale_fresh"):
            got = np.asarray(cb(name)(x, factor))
            check(f"{name} {label}", np.allclose(got, x_host * np.float32(2.5)), f"max error {np.abs(got - x_host * 2.5).max()}")
        for target in ("floor_pinned", "floor_pageable"):
            check(f"{target} {label}", np.array_equal(np.asarray(raw(target)(x)), x_host))
        before = stats(lib)
        timings[label] = {
            "callbox tap_print ($x)": median_us(cb("tap_print"), x),
            "callbox scale": median_us(cb("scale"), x, factor),
            "callbox scale (wasmtime)": median_us(cb("scale_wasmtime"), x, factor),
            "callbox scale (fresh)": median_us(cb("scale_fresh"), x, factor),
            "pure_callback identity": median_us(pc_identity, x),
            "pure_callback scale": median_us(pc_scale, x, factor),
            "floor pinned (C FFI copies)": median_us(raw("floor_pinned"), x),
            "floor pageable (C FFI copies)": median_us(raw("floor_pageable"), x),
        }
        print(label, json.dumps({k: round(v, 1) for k, v in timings[label].items()}), flush=True)
        after = stats(lib)
        check(f"no pinning during the timed calls at {label} (pinned once per instance and size)",
              after.get("pins") == before.get("pins"), f"pins {before.get('pins')} -> {after.get('pins')}")

    x = jax.device_put(np.ones(16, np.float32), gpu)
    for name, want in (("nope", "NOT_FOUND"), ("spin", "DEADLINE_EXCEEDED")):
        try:
            cb(name)(x).block_until_ready()
            check(f"{name} fails with {want}", False, "no error")
        except Exception as e:  # JaxRuntimeError
            check(f"{name} fails with {want}", want in str(e), str(e)[:300])

    def chained(x, f):
        for _ in range(3):
            x = jax.ffi.ffi_call("callbox", jax.ShapeDtypeStruct(x.shape, x.dtype), has_side_effect=True)(
                x, f, callback="scale", chain="device-check")
        return x
    got = np.asarray(jax.jit(chained)(x, factor))
    check("three chained calls", np.allclose(got, np.float32(2.5) ** 3), str(got[:3]))

    st = stats(lib)
    if mode == "auto":
        check("pooled instances pinned", st.get("pins", 0) > 0 and st.get("pin_time_ms", 0) > 0, json.dumps(st))
        check("pinned path ran", st.get("pinned_calls", 0) > 0, json.dumps(st))
        check("fresh instances staged", st.get("staged_calls", 0) > 0, json.dumps(st))
    else:
        check("nothing pinned in pageable mode", st.get("pins", 0) == 0 and st.get("pageable_calls", 0) > 0, json.dumps(st))

    with open(out_path, "w") as f:
        json.dump({"mode": mode, "device": str(gpu.device_kind), "jax": jax.__version__, "checks": checks,
                   "timings_us": timings, "stats": st}, f, indent=1)
    return all(c["ok"] for c in checks)


def report(paths):
    runs = {}
    for p in paths:
        with open(p) as f:
            r = json.load(f)
        runs[r["mode"]] = r
    auto, page = runs.get("auto"), runs.get("pageable")
    any_run = auto or page
    print(f"GPU path on {any_run['device']}, jax {any_run['jax']}: median of {REPS} jitted calls, µs\n")
    cols = []
    if auto:
        cols += [("auto", k) for k in auto["timings_us"]["1 KiB"]]
    if page:
        cols += [("pageable", k) for k in page["timings_us"]["1 KiB"] if k.startswith("callbox")]
    print("| size | " + " | ".join(f"{k} [{m}]" if k.startswith("callbox") else k for m, k in cols) + " |")
    print("|---|" + "--:|" * len(cols))
    for label, _ in SIZES:
        print(f"| {label} | " + " | ".join(f"{runs[m]['timings_us'][label][k]:,.0f}" for m, k in cols) + " |")
    if auto:
        t = auto["timings_us"]
        floor32 = t["32 MiB"]["floor pinned (C FFI copies)"]
        tap32 = t["32 MiB"]["callbox tap_print ($x)"]
        pc32 = t["32 MiB"]["pure_callback identity"]
        tap1 = t["1 KiB"]["callbox tap_print ($x)"]
        raw1 = t["1 KiB"]["floor pageable (C FFI copies)"]
        print()
        print(f"- 32 MiB pass-through: {tap32:,.0f} µs = {tap32 / floor32:.2f}x the pinned copy floor ({floor32:,.0f} µs); target ≤ 1.5x")
        print(f"- 32 MiB pass-through vs jax.pure_callback identity: {pc32 / tap32:.1f}x faster; target ≥ 25x")
        print(f"- 1 KiB pass-through: {tap1:,.0f} µs = {tap1 / raw1:.2f}x the raw C FFI handler ({raw1:,.0f} µs); target ≤ 2x")
        print(f"- totals (auto): {json.dumps(auto['stats'])}")
    if page:
        print(f"- totals (pageable): {json.dumps(page['stats'])}")
    bad = [f"{m}: {c['check']}: {c['detail']}" for m, r in runs.items() for c in r["checks"] if not c["ok"]]
    print("\nchecks: " + ("all passed" if not bad else "FAILED\n" + "\n".join(bad)))
    return not bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["auto", "staged", "pageable"])
    ap.add_argument("--json", help="write this run's results here")
    ap.add_argument("--floor", help="the built device_check_floor.c library")
    ap.add_argument("--report", nargs="+", help="merge runs' JSON files into a table")
    a = ap.parse_args()
    if a.report:
        sys.exit(0 if report(a.report) else 1)
    if os.environ.get("CALLBOX_CUDA_COPY", "auto") != a.mode:
        sys.exit(f"run with CALLBOX_CUDA_COPY={a.mode} in the environment (the library reads it when it loads)")
    sys.exit(0 if run(a.mode, a.json, a.floor) else 1)


if __name__ == "__main__":
    main()

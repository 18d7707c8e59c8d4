#!/usr/bin/env python3
"""Real-XLA check of callbox's lowering (lowering/, `callbox lower`).

For every example program in examples/programs it compiles the emitted
StableHLO with jaxlib's CPU client, in a process where callbox.jax.register
was called (libcallbox's XLA FFI handler, C symbol callbox_xla_ffi,
registered as the custom-call target "callbox" that `callbox lower` names),
runs it on the example's inputs, and compares with callbox's own evaluator
(`callbox exec`):

  * the results, element by element (rtol 1e-5, atol 1e-6: XLA's exp and
    reduction order differ from Go's in the last bits);
  * the effects: the guest log lines of tap_print ("tap_print: n=... min=...")
    that the callbacks print, in order for programs whose effects are all
    ordered, as a multiset otherwise;
  * trap_loop, whose ordered `checked` call fails inside a while loop at the
    fourth iteration: XLA must fail with INVALID_ARGUMENT naming the
    callback, and the ordered tap_print calls after the failure must not run
    (exactly as many log lines as the evaluator printed).

and checks every result against NumPy too (numpy_reference, written from
the .cbir sources). `make test` runs it under the pinned JAX (through
python/tests/test_jax.py); by hand, from the repository root:

    # on a machine with Go: build the tools and the expected results
    make xla-check     # = make lib, go build -o bin/callbox, and:
    /usr/bin/python3 scripts/xla_check_lowering.py --callbox bin/callbox --prepare build/xla-check
    # on the jax machine (carry build/): compare
    JAX_PLATFORMS=cpu python3 scripts/xla_check_lowering.py --expected build/xla-check

With a working build/callbox on the jax machine, one call does both:
    JAX_PLATFORMS=cpu python3 scripts/xla_check_lowering.py

The StableHLO comes from `callbox lower`, or, without a callbox binary, from
lowering/testdata/golden/<name>.mlir (the same bytes: emission is
deterministic and the golden test pins it). The host is opened from
examples/programs/callbacks.yaml and registered with callbox.jax.register.
Exit status 0 when every example agrees, 1 otherwise.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = os.path.join(ROOT, "examples", "programs")
CONFIG = os.path.join(PROGRAMS, "callbacks.yaml")
GOLDEN = os.path.join(ROOT, "lowering", "testdata", "golden")

# name -> (input files, number of results, effects all ordered, expected failure)
EXAMPLES = {
    "pipeline": (["pipeline.x.npy", "pipeline.factor.npy"], 2, False, None),
    "logging_loop": (["logging_loop.x.npy"], 2, True, None),
    "cond_choose": (["cond_choose.neg.npy"], 1, True, None),
    "dead_calls": (["dead_calls.x.npy"], 1, False, None),
    "trap_loop": (["trap_loop.x.npy"], 1, True, ("INVALID_ARGUMENT", "checked")),
    "matmul_dot": (["matmul_dot.a.npy", "matmul_dot.b.npy"], 2, True, None),
}

def _softmax_rows(np, x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def numpy_reference(name, inputs):
    """What each example computes, written in NumPy from its .cbir source:
    a third opinion beside XLA's run and callbox's evaluator, so that the
    two agreeing on a wrong answer is caught too. None for trap_loop, which
    fails."""
    import numpy as np

    if name == "pipeline":
        x, factor = inputs
        probs = _softmax_rows(np, (x.reshape(-1) * factor).reshape(x.shape))
        return [probs, probs.sum(axis=1)]
    if name == "logging_loop":
        (x,) = inputs
        return [x * 8, np.int32(3)]
    if name == "cond_choose":
        (x,) = inputs
        return [_softmax_rows(np, x) if x.sum() > 0 else -x]
    if name == "dead_calls":
        (x,) = inputs
        return [4 * x]
    if name == "matmul_dot":
        a, b = inputs
        return [a @ b, np.zeros((a.shape[0], b.shape[1]), np.float32)]
    return None


LOG_LINE = re.compile(r"tap_print: n=\d+ min=\S+ max=\S+ mean=[^\s\"]+")


def log_lines(text):
    return LOG_LINE.findall(text)


def inputs_of(name):
    return [os.path.join(PROGRAMS, "inputs", f) for f in EXAMPLES[name][0]]


def prepare(callbox, outdir):
    """Runs callbox lower and exec for every example; writes the StableHLO,
    the evaluator's results and its guest log lines under outdir."""
    import numpy as np

    os.makedirs(outdir, exist_ok=True)
    for name, (_, nres, _, failure) in EXAMPLES.items():
        prog = os.path.join(PROGRAMS, name + ".cbir")
        mlir = subprocess.run([callbox, "lower", prog, "-c", CONFIG], check=True, capture_output=True, text=True).stdout
        with open(os.path.join(outdir, name + ".mlir"), "w") as f:
            f.write(mlir)
        outs = [os.path.join(outdir, "%s.out%d.npy" % (name, i)) for i in range(nres)]
        cmd = [callbox, "exec", prog, "-c", CONFIG, "--trace"]
        for p in inputs_of(name):
            cmd += ["--in", p]
        for p in outs:
            cmd += ["--out", p]
        r = subprocess.run(cmd, capture_output=True, text=True)
        meta = {"rc": r.returncode, "log": log_lines(r.stderr), "stderr": r.stderr[-4000:]}
        if failure is None and r.returncode != 0:
            raise SystemExit("callbox exec %s failed:\n%s" % (name, r.stderr))
        if failure is not None and r.returncode != 3:
            raise SystemExit("callbox exec %s should fail with a callback error (exit 3), got %d" % (name, r.returncode))
        with open(os.path.join(outdir, name + ".json"), "w") as f:
            json.dump(meta, f, indent=1)
        for p in outs:
            if os.path.exists(p):
                np.load(p)  # written by callbox: must be readable
    print("prepared %d examples in %s" % (len(EXAMPLES), outdir))


def run_one(name, mlir_path, lib, outdir):
    """Child process: compile and run one program under XLA, write results
    as .npy and a JSON status line on stdout. Guest log lines go to this
    process's stderr, which the parent reads."""
    import numpy as np
    import jax
    from jax._src import xla_bridge
    from jax._src.lib import xla_client

    # The program names the target "callbox": what callbox.jax.register
    # registers. Its host is the one the evaluator used.
    os.environ["CALLBOX_LIB"] = lib
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import logging

    import callbox
    import callbox.jax

    # The package routes the library's log lines (the guests' tap_print
    # output among them) to the "callbox" logger: send them to stderr,
    # where the parent reads the effects.
    logging.basicConfig(stream=sys.stderr, format="%(message)s")
    logging.getLogger("callbox").setLevel(logging.INFO)

    callbox.jax.register(callbox.Host(CONFIG))
    with open(mlir_path) as f:
        text = f.read()
    be = xla_bridge.get_backend("cpu")
    dev = jax.devices("cpu")[0]
    args = [jax.device_put(np.load(p), dev) for p in inputs_of(name)]
    status = {"ok": True}
    try:
        exe = be.compile_and_load(text, xla_client.DeviceList((dev,)), xla_client.CompileOptions())
        outs = exe.execute_sharded(args).disassemble_into_single_device_arrays()
        for i, per_device in enumerate(outs):
            np.save(os.path.join(outdir, "%s.xla%d.npy" % (name, i)), np.asarray(per_device[0]))
        status["results"] = len(outs)
    except Exception as e:  # the failure is the result being checked
        status = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
    sys.stderr.flush()
    print(json.dumps(status))


def check(expected, lib):
    import numpy as np

    # CALLBOX_LOG_LEVEL=info: the guests' log lines (the effects compared)
    # reach stderr; the C API's default level (warn) would hide them.
    env = dict(os.environ, CALLBOX_CONFIG=CONFIG, CALLBOX_LOG_LEVEL="info",
               JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
    failures = []
    work = tempfile.mkdtemp(prefix="xla-check-")
    for name, (_, nres, ordered, failure) in EXAMPLES.items():
        mlir = os.path.join(expected, name + ".mlir")
        if not os.path.exists(mlir):
            mlir = os.path.join(GOLDEN, name + ".mlir")
        with open(os.path.join(expected, name + ".json")) as f:
            meta = json.load(f)
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--run-one", name, "--mlir", mlir, "--lib", lib, "--workdir", work],
                           capture_output=True, text=True, env=env)
        try:
            status = json.loads(r.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            failures.append("%s: the XLA run crashed (exit %d):\n%s" % (name, r.returncode, r.stderr[-3000:]))
            continue
        problems = []
        if failure is None:
            if not status["ok"]:
                problems.append("XLA failed: " + status["error"])
            else:
                reference = numpy_reference(name, [np.load(p) for p in inputs_of(name)])
                if reference is None or len(reference) != nres:
                    problems.append("no NumPy reference with %d results" % nres)
                for i in range(nres):
                    want = np.load(os.path.join(expected, "%s.out%d.npy" % (name, i)))
                    got = np.load(os.path.join(work, "%s.xla%d.npy" % (name, i)))
                    if want.shape != got.shape or want.dtype != got.dtype:
                        problems.append("result %d: %s%s from XLA, %s%s from the evaluator" % (i, got.dtype, got.shape, want.dtype, want.shape))
                    elif not np.allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True):
                        problems.append("result %d differs: XLA %s, evaluator %s" % (i, got.tolist(), want.tolist()))
                    elif reference is not None and i < len(reference):
                        ref = np.asarray(reference[i])
                        if ref.shape != got.shape or not np.allclose(got, ref, rtol=1e-5, atol=1e-5):
                            problems.append("result %d differs from NumPy: XLA %s, NumPy %s" % (i, got.tolist(), ref.tolist()))
        else:
            code, callback = failure
            if status["ok"]:
                problems.append("XLA ran to completion; the evaluator failed (%s)" % meta["stderr"].strip().splitlines()[-1])
            elif code not in status["error"] or callback not in status["error"]:
                problems.append("XLA failed with %r, expected %s naming %s" % (status["error"], code, callback))
        xla_log = log_lines(r.stderr)
        eval_log = meta["log"]
        if xla_log or eval_log:
            if ordered and xla_log != eval_log:
                problems.append("effects differ (in order):\n    XLA:  %s\n    eval: %s" % (xla_log, eval_log))
            elif not ordered and sorted(xla_log) != sorted(eval_log):
                problems.append("effects differ (as a multiset):\n    XLA:  %s\n    eval: %s" % (sorted(xla_log), sorted(eval_log)))
        if problems:
            failures.append("%s:\n  %s" % (name, "\n  ".join(problems)))
            print("FAIL %s" % name)
        else:
            what = ("failed as the evaluator did (%s)" % status.get("error", "")[:120] if failure
                    else "results agree with the evaluator and NumPy")
            print("ok   %s: %s; %d effects" % (name, what, len(xla_log)))
    if failures:
        print("\n".join(failures), file=sys.stderr)
        return 1
    print("all %d examples agree between XLA and the evaluator" % len(EXAMPLES))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--callbox", default=os.path.join(ROOT, "build", "callbox"), help="callbox binary (for lower and exec)")
    ap.add_argument("--lib", default=os.environ.get("CALLBOX_LIB", os.path.join(ROOT, "build", "libcallbox.so")), help="libcallbox.so")
    ap.add_argument("--prepare", metavar="DIR", help="only run callbox lower/exec and write the expected results to DIR")
    ap.add_argument("--expected", metavar="DIR", help="compare with results prepared earlier in DIR")
    ap.add_argument("--run-one", help=argparse.SUPPRESS)
    ap.add_argument("--mlir", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.run_one:
        run_one(a.run_one, a.mlir, a.lib, a.workdir)
        return 0
    if a.prepare:
        prepare(a.callbox, a.prepare)
        return 0
    expected = a.expected
    if expected is None:
        expected = tempfile.mkdtemp(prefix="xla-check-expected-")
        prepare(a.callbox, expected)
    if not os.path.exists(a.lib):
        raise SystemExit("no %s: build it with `make lib` (or set CALLBOX_LIB)" % a.lib)
    try:
        import jax  # noqa: F401
    except ImportError:
        raise SystemExit("jax is not installed here; run this on a machine with jax (see the docstring)")
    return check(expected, a.lib)


if __name__ == "__main__":
    sys.exit(main())

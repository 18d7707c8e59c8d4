#!/usr/bin/env bash
# device-check.sh: everything callbox needs checked on a machine with jax
# (a lent GPU machine: jax 0.11, jaxlib, numpy, gcc, Python 3.12, NO Go).
# It builds nothing with Go. On the development machine first run
#   make lib guests pytest
# which leaves build/libcallbox.so, build/callbox.h, the test guests in
# build/testguests, the StableHLO `callbox lower` emits for the example
# programs (with the evaluator's results) in build/xla-check (`make
# xla-check`) and a copy of pytest in build/pydeps (`make pydeps`, used only
# where the machine's Python has no pytest), all dependencies of pytest.
# Carry those five paths and guests/build (the device tool's carry; not the
# whole of build/, whose virtual environments exceed what a carry takes).
# build/callbox-worker (isolation: process, 26 MB) does not fit beside the
# library in a carry: the door table's process cases skip here.
#
# Steps (each recorded with its exit status; one that cannot run is
# recorded as not run, with the reason):
#   machine       versions of python, numpy, jax, jaxlib, libcallbox; devices
#   ffi-api       XLA_FFI_API_MAJOR/MINOR from jax.ffi.include_dir()'s
#                 xla/ffi/api/c_api.h, and whether it is >= 0.2 (the version
#                 the library will declare in its metadata handshake)
#   header        the public header compiles and links against the library
#   pytest-cpu    every Python test, the JAX ones on the CPU backend
#                 (JAX_PLATFORMS=cpu, four CPU devices): among them the
#                 transposed-operand test through ordered and unordered calls,
#                 fori_loop/scan/while/cond order with a failing middle call,
#                 vmap of pure and ordered calls and taps, a two-device jit,
#                 io_callback's tokens kept, and every program of
#                 build/xla-check compiled and run by jaxlib with the
#                 target callbox.jax.register registers
#   pytest-gpu    python/tests/test_jax_gpu.py on the GPU backend (the CUDA
#                 handler through callbox.jax: calls, ordered calls, a
#                 transposed operand, vmap, a failing loop iteration)
#   bench         python/bench_jax.py: callbox against pure_callback and
#                 ordered io_callback in the same run (jitted 1 KiB call,
#                 per call in a 100-call ordered chain, 4 and 32 MiB)
#   cuda          scripts/device-check-cuda.sh: the GPU handler through
#                 jax.ffi.ffi_call, both copy modes, timings and the floor
# and writes ONE JSON file with every result into $OUT (the device tool's
# folder that comes back): $DEVICE_CHECK_JSON, default
# $OUT/device-check.json ($OUT defaults to build/device-check). Everything
# else (junit files, per-step JSON, the CUDA script's files) goes to
# $DEVICE_CHECK_WORK, default build/device-check-work, never into $OUT.
# Exit status 0, and "ok": true in the JSON, only when every step ran and
# passed and no test skipped: a step that could not run is a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

OUT=${OUT:-$ROOT/build/device-check}
JSON=${DEVICE_CHECK_JSON:-$OUT/device-check.json}
PARTS=${DEVICE_CHECK_WORK:-$ROOT/build/device-check-work}
rm -rf "$PARTS"
mkdir -p "$PARTS" "$(dirname "$JSON")"
export CALLBOX_LIB="$ROOT/build/libcallbox.so"
export CALLBOX_LOG_LEVEL=error
PY=${PYTHON:-python3}
: >"$PARTS/steps.tsv"

# step NAME COMMAND...: run it, record its exit status and time.
step() {
  local name=$1
  shift
  echo "== $name"
  local t0=$SECONDS
  "$@"
  local rc=$?
  printf '%s\t%s\t%s\t\n' "$name" "$rc" "$((SECONDS - t0))" >>"$PARTS/steps.tsv"
  return 0
}
# skip NAME REASON: record a step that could not run.
skip() {
  echo "== $1: not run: $2"
  printf '%s\t-\t0\t%s\n' "$1" "$2" >>"$PARTS/steps.tsv"
}

for f in build/libcallbox.so build/callbox.h build/testguests/kit.wasm; do
  if [ ! -f "$f" ]; then
    echo "device-check: $f is missing: run 'make lib guests pytest' on the development machine and carry build/libcallbox.so, build/callbox.h, build/testguests, build/xla-check, build/pydeps and guests/build" >&2
    exit 2
  fi
done

machine() {
  uname -srm && nproc
  "$PY" - "$PARTS/machine.json" <<'PY'
import ctypes, json, os, platform, sys
info = {"python": platform.python_version(), "uname": " ".join(platform.uname())}
try:
    import numpy
    info["numpy"] = numpy.__version__
    import jax, jaxlib
    info["jax"], info["jaxlib"] = jax.__version__, jaxlib.__version__
    info["devices"] = [str(d) for d in jax.devices()]
except Exception as e:  # recorded
    info["error"] = "%s: %s" % (type(e).__name__, e)
lib = ctypes.CDLL(os.environ["CALLBOX_LIB"])
lib.callbox_version.restype = ctypes.c_char_p
info["libcallbox"] = lib.callbox_version().decode()
json.dump(info, open(sys.argv[1], "w"), indent=1)
print(json.dumps(info))
sys.exit(1 if "error" in info else 0)
PY
}
step machine machine

step ffi-api "$PY" scripts/device_check.py ffi-api "$PARTS/ffi-api.json"

header() {
  local tmp
  tmp=$(mktemp -d)
  cat >"$tmp/check.c" <<'C'
#include <stdio.h>
#include "callbox.h"
int main(void) {
  callbox_host h;
  callbox_error *e = callbox_open("/nonexistent.yaml", &h);
  printf("version %s, bad open -> kind %s code %d\n", callbox_version(), e ? e->kind_name : "none", e ? e->code : 0);
  callbox_error_free(e);
  return e == NULL;
}
C
  gcc -O2 -Ibuild -o "$tmp/check" "$tmp/check.c" -Lbuild -lcallbox -Wl,-rpath,"$ROOT/build" && "$tmp/check"
  local rc=$?
  rm -rf "$tmp"
  return $rc
}
if command -v gcc >/dev/null; then step header header; else skip header "no gcc"; fi

# pytest: the installed one, else the copy `make pydeps` (part of `make
# pytest`) left in build/pydeps, appended to sys.path so that it shadows
# nothing installed.
PYTEST=("$PY" -m pytest)
have_pytest=0
if "$PY" -c 'import pytest' 2>/dev/null; then
  have_pytest=1
elif [ -d build/pydeps ] && "$PY" -c 'import sys; sys.path.append(sys.argv[1]); import pytest' "$ROOT/build/pydeps" 2>/dev/null; then
  have_pytest=1
  PYTEST=("$PY" -c 'import sys; sys.path.append(sys.argv[1]); import pytest; sys.exit(pytest.main(sys.argv[2:]))' "$ROOT/build/pydeps")
  echo "device-check: using the pytest carried in build/pydeps"
fi
have_jax=0
"$PY" -c 'import jax' 2>/dev/null && have_jax=1
have_gpu=0
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 && have_gpu=1

if [ $have_pytest = 1 ]; then
  [ -f build/xla-check/pipeline.mlir ] || echo "device-check: build/xla-check is missing (make xla-check): the lowered-program test will skip"
  # Deselected here, and named in the results: the CLI comparison needs Go
  # to build cmd/callbox (the binary is too big to carry beside the
  # library); it runs in every `make test`.
  DESELECT=tests/test_arguments.py::test_cli_and_python_agree
  printf '%s\t%s\n' "$DESELECT" "needs Go to build cmd/callbox; runs in make test" >"$PARTS/deselected.tsv"
  step pytest-cpu env JAX_PLATFORMS=cpu JAX_NUM_CPU_DEVICES=4 \
    bash -c 'cd python && "$@"' _ "${PYTEST[@]}" -q -rs --junitxml="$PARTS/pytest-cpu.junit.xml" \
    --ignore=tests/test_jax_gpu.py --deselect "$DESELECT" tests
  if [ $have_gpu = 1 ] && [ $have_jax = 1 ]; then
    step pytest-gpu env JAX_PLATFORMS=cuda,cpu \
      bash -c 'cd python && "$@"' _ "${PYTEST[@]}" -q -rs --junitxml="$PARTS/pytest-gpu.junit.xml" tests/test_jax_gpu.py
  else
    skip pytest-gpu "no NVIDIA GPU or no jax"
  fi
else
  skip pytest-cpu "pytest is not installed and build/pydeps is missing (make pydeps)"
  skip pytest-gpu "pytest is not installed and build/pydeps is missing (make pydeps)"
fi

if [ $have_jax = 1 ]; then
  step bench env JAX_PLATFORMS=cpu "$PY" python/bench_jax.py --json "$PARTS/bench.json"
else
  skip bench "jax is not installed"
fi

# The GPU path's own script (real JAX on the GPU backend, both copy modes,
# timings beside pure_callback and the copy floor). It needs guests/build.
if [ $have_gpu = 0 ]; then
  skip cuda "no NVIDIA GPU here (nvidia-smi finds none)"
elif [ ! -f guests/build/rust/scale.wasm ]; then
  skip cuda "guests/build is missing (make guests; carry guests/build)"
else
  mkdir -p "$PARTS/cuda"
  step cuda env -u JAX_PLATFORMS OUT="$PARTS/cuda" PYTHON="$PY" bash scripts/device-check-cuda.sh
fi

echo "== results"
"$PY" scripts/device_check.py collect "$PARTS" "$JSON"

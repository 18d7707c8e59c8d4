#!/usr/bin/env bash
# What to run on a lent GPU machine for the FFI bridge (issue 10). Its
# image has jax 0.11.2, numpy, gcc and Python 3.12 but no Go, so this
# script builds nothing: on the development machine first run
#   make lib guests pytest
# (which leaves build/libcallbox.so, build/callbox.h and the test guests
# in build/testguests) and carry build/ and guests/build to the machine.
#
# It then runs, on the CPU backend (JAX_PLATFORMS=cpu):
#   - the Python tests, the JAX ones included, when pytest is installed;
#   - the C harness's library smoke check (a compile of the public header);
#   - python/bench_jax.py: the JAX timings (1 KiB jitted call, a chain of
#     100 ordered calls, 4 MiB and 32 MiB against jax.pure_callback), with
#     the targets and the anchors of shared/anchors-jax.md;
# then, where scripts/device-check-cuda.sh is present and nvidia-smi finds
# a GPU, that script (the GPU path under real JAX on the GPU backend).
# and prints the numbers. Exit status: non-zero if a test failed.
set -uo pipefail
cd "$(dirname "$0")/.."

export JAX_PLATFORMS=cpu
export CALLBOX_LIB="$PWD/build/libcallbox.so"
export CALLBOX_LOG_LEVEL=error
PY=${PYTHON:-python3}
status=0

for f in build/libcallbox.so build/callbox.h build/testguests/kit.wasm guests/build/rust/scale.wasm; do
  if [ ! -f "$f" ]; then
    echo "device-check: $f is missing: run 'make lib guests pytest' on the development machine and carry build/ and guests/build" >&2
    exit 2
  fi
done

echo "== machine"
uname -srm
nproc
"$PY" -c 'import sys, numpy, jax; print("python", sys.version.split()[0], "numpy", numpy.__version__, "jax", jax.__version__)' || status=1
"$PY" -c 'import ctypes, os; l = ctypes.CDLL(os.environ["CALLBOX_LIB"]); l.callbox_version.restype = ctypes.c_char_p; print("libcallbox", l.callbox_version().decode())' || status=1

echo "== the public header compiles and links against the carried library"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/check.c" <<'C'
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
if command -v gcc >/dev/null; then
  gcc -O2 -Ibuild -o "$tmp/check" "$tmp/check.c" -Lbuild -lcallbox -Wl,-rpath,"$PWD/build" && "$tmp/check" || status=1
else
  echo "(no gcc: skipped)"
fi

echo "== Python tests (JAX included)"
if "$PY" -c 'import pytest' 2>/dev/null; then
  (cd python && "$PY" -m pytest -q -rs) || status=1
else
  echo "pytest is not installed here: the Python tests did not run (bench_jax.py still checks results)"
fi

echo "== JAX timings"
"$PY" python/bench_jax.py || status=1

# The GPU path (issue 14) has its own script: real JAX on the GPU, both copy
# modes, timings beside jax.pure_callback and the copy floor. It needs the
# GPU backend, so JAX_PLATFORMS=cpu is not passed on.
if [ -f scripts/device-check-cuda.sh ]; then
  echo "== the GPU path (scripts/device-check-cuda.sh)"
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    env -u JAX_PLATFORMS bash scripts/device-check-cuda.sh || status=1
  else
    echo "no NVIDIA GPU here (nvidia-smi finds none): the GPU path's check did not run"
  fi
fi

exit $status

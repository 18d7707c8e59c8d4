#!/usr/bin/env bash
# device-check-cuda.sh: callbox's GPU path on a real GPU machine.
#
# Run on a machine with an NVIDIA GPU, the CUDA runtime, gcc, and Python
# with jax[cuda] and numpy (no Go needed). It uses what the development
# machine built and carried over: build/libcallbox.so (make lib, with the
# CUDA handler wired in) and guests/build. For each copy mode (auto: pooled
# instances pinned; pageable: nothing pinned) it checks results and error
# codes under real JAX and times a jitted GPU program calling callbox at
# 1 KiB, 4 MiB and 32 MiB beside jax.pure_callback and beside plain C FFI
# handlers doing only the copies (the floor); then prints one table.
#
#   scripts/device-check-cuda.sh            # results under $OUT (or a temp dir)
#   PYTHON=python3.12 OUT=/tmp/r scripts/device-check-cuda.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-$(mktemp -d)}
LIB=${CALLBOX_LIB:-build/libcallbox.so}
mkdir -p "$OUT"

[ -f "$LIB" ] || { echo "missing $LIB: run 'make lib' on the development machine and carry build/" >&2; exit 2; }
[ -f guests/build/rust/scale.wasm ] || { echo "missing guests/build: carry it from the development machine" >&2; exit 2; }
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
"$PY" -c 'import jax; print("jax", jax.__version__, jax.devices())' | tee "$OUT/jax.txt"

gcc -O2 -shared -fPIC -o "$OUT/floor.so" scripts/device_check_floor.c -ldl

status=0
for mode in auto pageable; do
  echo "== copy mode: $mode"
  CALLBOX_LIB=$LIB CALLBOX_CUDA_COPY=$mode "$PY" scripts/device_check_cuda.py --mode "$mode" \
    --json "$OUT/cuda-$mode.json" --floor "$OUT/floor.so" 2>"$OUT/cuda-$mode.log" && continue
  status=1
  echo "== copy mode $mode failed; the end of its stderr ($OUT/cuda-$mode.log):"
  tail -n 40 "$OUT/cuda-$mode.log"
done
reports=()
for mode in auto pageable; do [ -f "$OUT/cuda-$mode.json" ] && reports+=("$OUT/cuda-$mode.json"); done
if [ ${#reports[@]} -gt 0 ]; then
  "$PY" scripts/device_check_cuda.py --report "${reports[@]}" | tee "$OUT/cuda-report.md" || status=1
else
  echo "no copy mode finished: no report"
fi
echo "results: $OUT"
exit $status

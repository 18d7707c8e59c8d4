#!/usr/bin/env bash
# Builds the benchmark modules of the bench module (callbox-bench):
#
#   guests/build/bench/kernels.wasm         callbox callbacks + raw entry points
#   guests/build/bench/kernels_extism.wasm  the same kernels as an Extism plugin
#   guests/build/bench/kernels_simd.wasm    scale and matmul callbacks in simd128
#
# Same compiler and flags as the C SDK's freestanding examples
# (guests/c/build.sh), so the kernels are compiled as a callback author's
# would be. Environment: CC (default clang), OPT (default 2).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"

cc=${CC:-clang}
opt=${OPT:-2}
mkdir -p guests/build/bench

flags=(-std=c11 "-O$opt" -Wall -Wextra -Wpedantic -Iguests/c "-ffile-prefix-map=$root=." -Wl,--strip-all)
freestanding=(--target=wasm32 -nostdlib -Wl,--no-entry)

for name in kernels kernels_extism; do
  out=guests/build/bench/$name.wasm
  "$cc" "${freestanding[@]}" "${flags[@]}" "guests/bench/$name.c" -o "$out"
  printf '%-14s %7d bytes  %s\n' "$name" "$(wc -c <"$out")" "$out"
done

# The SIMD kernels, built as guests/c/build.sh builds a *_simd example:
# -msimd128, and the custom sections (target_features, which tells the
# wasm-opt that clang runs that SIMD is allowed) stripped after the link.
out=guests/build/bench/kernels_simd.wasm
"$cc" "${freestanding[@]}" "${flags[@]/-Wl,--strip-all/-Wl,--strip-debug}" -msimd128 guests/bench/kernels_simd.c -o "$out"
wasm-strip "$out"
printf '%-14s %7d bytes  %s\n' kernels_simd "$(wc -c <"$out")" "$out"

#!/usr/bin/env bash
# Builds the benchmark modules of the bench module (callbox-bench):
#
#   guests/build/bench/kernels.wasm         callbox callbacks + raw entry points
#   guests/build/bench/kernels_extism.wasm  the same kernels as an Extism plugin
#   guests/build/bench/kernels_simd.wasm    scale and matmul callbacks in simd128
#   guests/build/bench/loops.wasm           their loops as raw entry points, no SDK
#   guests/build/bench/clip.wasm            users' kernels (guests/*/kernels/),
#   guests/build/bench/clip_unchecked.wasm  (clip tuned as the AssemblyScript README advises)
#   guests/build/bench/normalize.wasm       each built by its own SDK's recipe
#   guests/build/bench/digitize.wasm        (that SDK's build.sh, given the file)
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

for name in kernels kernels_extism loops; do
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

# The users' kernels: written with an SDK as its users write code, built by
# that SDK's own build.sh (same compiler, flags and post-processing as its
# examples), so the benchmark times what a callback author would ship.
(OUT="$root/guests/build/bench/assemblyscript" guests/assemblyscript/build.sh kernels/clip.ts kernels/clip_unchecked.ts)
cp guests/build/bench/assemblyscript/clip.wasm guests/build/bench/assemblyscript/clip_unchecked.wasm guests/build/bench/
OUT=guests/build/bench/rust guests/rust/build.sh guests/rust/kernels/normalize.rs
cp guests/build/bench/rust/normalize.wasm guests/build/bench/normalize.wasm
OUT=guests/build/bench guests/c/build.sh guests/c/kernels/digitize.c
cp guests/build/bench/c-freestanding/digitize.wasm guests/build/bench/digitize.wasm

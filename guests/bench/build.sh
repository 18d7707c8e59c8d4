#!/usr/bin/env bash
# Builds the benchmark modules of cmd/callbox/internal/bench (`callbox bench`):
#
#   guests/build/bench/kernels.wasm         callbox callbacks + raw entry points
#   guests/build/bench/kernels_extism.wasm  the same kernels as an Extism plugin
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

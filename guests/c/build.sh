#!/usr/bin/env bash
# Builds every example in guests/c/examples twice:
#
#   guests/build/c/<example>.wasm               wasi-libc reactor; a callback
#                                               config needs `wasi: minimal`
#   guests/build/c-freestanding/<example>.wasm  no libc; imports only callbox.*
#
#   guests/c/build.sh SRC.c...  these sources (paths from the repository
#                               root) instead of the examples, same recipe
#
# Environment:
#   OUT       output directory of both builds (default guests/build):
#             OUT/c and OUT/c-freestanding
#   CC        clang with the wasm32 targets and wasi-libc (default clang)
#   OPT       optimisation level (default 2). Measured on the examples: s is
#             20% smaller but halves matmul's speed on wasmtime; 3 is no faster.
#   DEBUG     1: a debug build, whose failures callbox explains by function,
#             file and line: -O0 -g, nothing stripped. (At -O1 and up clang
#             runs binaryen's wasm-opt after linking when it is on PATH,
#             which drops the name section and leaves DWARF's addresses 0.)
#
# No wasm-opt pass: on clang's output it saves under 10 bytes per module.
#
# The output does not depend on where the checkout is: no debug info, and
# the SDK names source files by __FILE_NAME__ (no directories).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"

cc=${CC:-clang}
opt=${OPT:-2}
out=${OUT:-guests/build}
debug=${DEBUG:-}
[ -z "$debug" ] || opt=0
mkdir -p "$out/c" "$out/c-freestanding"

flags=(-std=c11 "-O$opt" -Wall -Wextra -Wpedantic -Iguests/c "-ffile-prefix-map=$root=.")
wasi=(--target=wasm32-wasi -mexec-model=reactor)
freestanding=(--target=wasm32 -nostdlib -Wl,--no-entry)

build() { # variant out src
  local out=$2 features=(-Wl,--strip-all) simd=
  [ -z "$debug" ] || features=(-g)
  # *_simd examples use wasm_simd128.h; the others are built for the MVP
  # feature set, which every engine runs. clang runs wasm-opt after linking
  # when one is on PATH, and wasm-opt learns that SIMD is allowed from the
  # module's target_features section, which --strip-all removes: a SIMD
  # module keeps its custom sections through the link and loses them to
  # wasm-strip afterwards.
  case "$out" in *_simd.wasm) features=(-msimd128 -Wl,--strip-debug) simd=1 ;; esac
  if [ "$1" = wasi ]; then
    "$cc" "${wasi[@]}" "${flags[@]}" "${features[@]}" "$3" -o "$out"
  else
    "$cc" "${freestanding[@]}" "${flags[@]}" "${features[@]}" "$3" -o "$out"
  fi
  if [ -n "$simd" ]; then
    wasm-strip "$out"
  fi
  printf '%-14s %7d bytes  %s\n' "$(basename "$out" .wasm)" "$(wc -c <"$out")" "$out"
}

sources=("$@")
[ ${#sources[@]} -gt 0 ] || sources=(guests/c/examples/*.c)
for src in "${sources[@]}"; do
  name=$(basename "$src" .c)
  build wasi "$out/c/$name.wasm" "$src"
  build freestanding "$out/c-freestanding/$name.wasm" "$src"
done

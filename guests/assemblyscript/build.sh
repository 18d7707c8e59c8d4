#!/usr/bin/env bash
# Builds every AssemblyScript example callback (examples/<name>.ts) to
# guests/build/assemblyscript/<name>.wasm with the release settings of
# asconfig.json: -O3 with shrink level 1, the `minimal` runtime, aborts
# routed to callbox.error, no source map or debug info. The output depends
# only on the sources and the locked compiler, not on where the repository
# lives. Needs `npm ci` here first (scripts/install-toolchains.sh runs it).
#
#   build.sh                  every example
#   build.sh SRC.ts...        these sources instead (paths from here or
#                             absolute), with the same settings; OUT names
#                             the output directory (default ../build/assemblyscript)
set -euo pipefail
cd "$(dirname "$0")"

asc=node_modules/.bin/asc
if [ ! -x "$asc" ]; then
  echo "build.sh: $asc is missing; run 'npm ci' in guests/assemblyscript (or scripts/install-toolchains.sh)" >&2
  exit 1
fi
out=${OUT:-../build/assemblyscript}
mkdir -p "$out"
sources=("$@")
[ ${#sources[@]} -gt 0 ] || sources=(examples/*.ts)

for src in "${sources[@]}"; do
  name=$(basename "$src" .ts)
  # *_simd examples use v128 / f32x4, which asc 0.28 leaves off by default;
  # the others are built for the MVP feature set, which every engine runs.
  features=()
  case "$name" in *_simd) features=(--enable simd) ;; esac
  "$asc" "$src" --config asconfig.json --target release "${features[@]}" --outFile "$out/$name.wasm"
  # A callbox module may import callbox.* only (ABI.md §1); catch a stray
  # env.abort / env.seed / env.trace here rather than at load time.
  if command -v wasm-objdump >/dev/null; then
    if wasm-objdump -j Import -x "$out/$name.wasm" | grep -- '<-' | grep -v ' <- callbox\.' >&2; then
      echo "build.sh: $name.wasm imports something besides callbox.*" >&2
      exit 1
    fi
  fi
done

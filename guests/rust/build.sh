#!/usr/bin/env bash
# Builds the callbox Rust SDK (guests/rust/callbox) and every example in
# guests/rust/examples into guests/build/rust/<example>.wasm.
#
#   guests/rust/build.sh          build
#   guests/rust/build.sh --test   also run the SDK's unit tests natively
#   guests/rust/build.sh SRC.rs...  these sources (paths from the repository
#                                 root) instead of the examples, same recipe
#
# Environment:
#   RUSTC     a rustc with the wasm32-unknown-unknown std (default /usr/bin/rustc,
#             Debian's 1.63; rustup's rustc usually lacks the wasm target)
#   OPT       rustc and wasm-opt optimisation level (default 2). Measured on the
#             examples: s is 4% smaller but halves matmul's speed on wasmtime;
#             3 is 10% larger and no faster than 2.
#   OUT       output directory (default guests/build/rust; the SDK's rlib
#             goes to OUT/deps)
#   WASM_OPT  binaryen's wasm-opt (default wasm-opt); WASM_OPT=none skips it, which
#             changes the bytes (guests/prebuilt is checked against the default)
#   DEBUG     1: a debug build, whose failures callbox explains by function,
#             file and line (the name section and DWARF kept: -C debuginfo=2,
#             no strip, no wasm-opt)
#
# The output does not depend on where the checkout is: rustc runs from the
# repository root on relative paths, and --remap-path-prefix removes the root
# from anything that could still embed it (panic locations, debug info).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"

rustc=${RUSTC:-/usr/bin/rustc}
opt=${OPT:-2}
wasm_opt=${WASM_OPT:-wasm-opt}
if [ "$wasm_opt" != none ] && ! command -v "$wasm_opt" >/dev/null; then
  echo "rust/build.sh: $wasm_opt not found: install binaryen (scripts/install-toolchains.sh) or set WASM_OPT=none" >&2
  exit 1
fi
out=${OUT:-guests/build/rust}
debug=${DEBUG:-}
strip=(-C strip=symbols)
test=
sources=()
for arg in "$@"; do
  case "$arg" in
    --test) test=1 ;;
    *) sources+=("$arg") ;;
  esac
done
[ ${#sources[@]} -gt 0 ] || sources=(guests/rust/examples/*.rs)
mkdir -p "$out/deps"

flags=(
  --edition 2021
  --target wasm32-unknown-unknown
  -C "opt-level=$opt"
  -C panic=abort
  -C codegen-units=1
  -C debuginfo=0
  --remap-path-prefix "$root/="
)
if [ -n "$debug" ]; then
  flags=("${flags[@]/debuginfo=0/debuginfo=2}")
  strip=()
  wasm_opt=none
fi

"$rustc" "${flags[@]}" --crate-type rlib --crate-name callbox \
  guests/rust/callbox/src/lib.rs -o "$out/deps/libcallbox.rlib"

for src in "${sources[@]}"; do
  name=$(basename "$src" .rs)
  # *_simd examples use wasm simd128 (core::arch::wasm32); the others are
  # built for the MVP feature set, which every engine runs.
  features=() opt_features=()
  case "$name" in *_simd) features=(-C target-feature=+simd128) opt_features=(--enable-simd) ;; esac
  "$rustc" "${flags[@]}" "${features[@]}" -C lto=fat "${strip[@]}" --crate-type cdylib --crate-name "$name" \
    --extern callbox="$out/deps/libcallbox.rlib" "$src" -o "$out/$name.wasm"
  if [ "$wasm_opt" != none ]; then
    # Custom sections (callbox.signatures) survive; the name section is gone already.
    # rustc 1.63 writes no target_features section for wasm-opt to read
    # the allowed features from: simd128 is enabled by hand.
    "$wasm_opt" "-O$opt" "${opt_features[@]}" "$out/$name.wasm" -o "$out/$name.wasm"
  fi
  printf '%-14s %7d bytes  %s\n' "$name" "$(wc -c <"$out/$name.wasm")" "$out/$name.wasm"
done

if [ -n "$test" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  "$rustc" --edition 2021 --test guests/rust/callbox/src/lib.rs -o "$tmp/callbox-test"
  "$tmp/callbox-test" -q
fi

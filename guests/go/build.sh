#!/usr/bin/env bash
# Builds every Go example callback (examples/<name>) to
# guests/build/go/<name>.wasm: a wasip1 reactor (-buildmode=c-shared, which
# exports _initialize), with paths trimmed and the symbol table, DWARF and
# build id dropped, then shrunk with binaryen's wasm-opt -Oz when it is
# installed (about 4%; set WASM_OPT=off to skip it). The output depends only
# on the sources and the toolchain versions, not on where the repository
# lives.
set -euo pipefail
cd "$(dirname "$0")"

out=../build/go
mkdir -p "$out"
opt=${WASM_OPT:-wasm-opt}
if [ "$opt" != off ] && ! command -v "$opt" >/dev/null; then
  echo "build.sh: $opt not found; leaving the modules unoptimised" >&2
  opt=off
fi

for dir in examples/*/; do
  name=$(basename "$dir")
  wasm="$out/$name.wasm"
  GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 go build -buildmode=c-shared -trimpath \
    -ldflags='-s -w -buildid=' -o "$wasm" "./$dir"
  if [ "$opt" != off ]; then
    # Go emits sign-extension, saturating float-to-int and bulk-memory ops.
    "$opt" -Oz --enable-sign-ext --enable-nontrapping-float-to-int --enable-bulk-memory \
      --enable-mutable-globals "$wasm" -o "$wasm.tmp"
    mv "$wasm.tmp" "$wasm"
  fi
done

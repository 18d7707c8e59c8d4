#!/usr/bin/env bash
# prebuilt.sh update: copy the demo's modules from guests/build into
#                     guests/prebuilt (after `make guests`).
# prebuilt.sh check:  fail if any committed prebuilt module differs from a
#                     fresh build from source.
set -euo pipefail
cd "$(dirname "$0")/../guests"
# lang/example pairs embedded for `callbox demo`, and the benchmark kernels
# embedded for callbox-bench (the bench module).
modules=(rust/scale rust/histogram assemblyscript/softmax assemblyscript/tap_print c-freestanding/matmul go/checked wat/hostile
  bench/kernels bench/kernels_extism bench/kernels_simd bench/loops bench/clip bench/clip_unchecked bench/normalize bench/digitize)
status=0
for m in "${modules[@]}"; do
  src="build/$m.wasm"
  dst="prebuilt/${m%%/*}-${m##*/}.wasm"
  [ -f "$src" ] || { echo "prebuilt: $src missing; run make guests" >&2; exit 1; }
  case "${1:-}" in
    update) cp "$src" "$dst" ;;
    check)
      if ! cmp -s "$src" "$dst"; then
        echo "prebuilt: $dst differs from a fresh build of $src ($(sha256sum <"$src" | cut -c1-16) vs $(sha256sum <"$dst" 2>/dev/null | cut -c1-16))" >&2
        status=1
      fi ;;
    *) echo "usage: $0 update|check" >&2; exit 2 ;;
  esac
done
[ "${1:-}" = check ] && [ $status -eq 0 ] && echo "prebuilt: all ${#modules[@]} modules match their sources"
exit $status

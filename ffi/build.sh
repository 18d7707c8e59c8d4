#!/usr/bin/env bash
# Builds libcallbox: the one recipe, used by make lib, the Python
# package's build (python/setup.py, from a checkout or from its sdist) and
# make dist. Writes into OUTDIR:
#   libcallbox.so         the C API (-buildmode=c-shared), exporting the
#                         header's callbox_* functions and no other symbol
#                         (libcallbox.map: the Go runtime's, wasmtime's and
#                         the glue's stay local); its soname is
#                         libcallbox.so.MAJOR, the C API's major version
#   libcallbox.so.MAJOR   a link to it, the name programs linked with
#                         -lcallbox look for at run time
#   callbox.h             the hand-written header (ffi/include/callbox.h;
#                         the one cgo generates is not the contract)
#   callbox-worker        the worker of isolation: process, which the
#                         library looks for beside itself
# GO names the go command (default: go on PATH); cgo needs a C compiler.
set -euo pipefail
out=${1:?usage: ffi/build.sh OUTDIR}
root=$(cd "$(dirname "$0")/.." && pwd)
go=${GO:-go}
major=$(sed -n 's/^#define CALLBOX_VERSION_MAJOR \([0-9]*\)$/\1/p' "$root/ffi/include/callbox.h")
[ -n "$major" ] || { echo "ffi/build.sh: no CALLBOX_VERSION_MAJOR in ffi/include/callbox.h" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$root"
set -x
"$go" build -buildmode=c-shared -ldflags="-extldflags=-Wl,--version-script=$root/ffi/libcallbox.map,-soname,libcallbox.so.$major" -o "$out/libcallbox.so" ./ffi
ln -sf libcallbox.so "$out/libcallbox.so.$major"
"$go" build -ldflags="-s -w" -o "$out/callbox-worker" ./cmd/callbox-worker
rm -f "$out/libcallbox.h"
cp ffi/include/callbox.h "$out/callbox.h"

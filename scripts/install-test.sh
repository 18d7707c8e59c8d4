#!/usr/bin/env bash
# make install for a C user, as README.md's "C API" section tells it: its
# shell block run as written from the repository root, with HOME a fresh
# temporary directory (so PREFIX=$HOME/.local is a temporary prefix), then
# checks of what was installed: the soname, the pkg-config version (the C
# API's), the worker the library found in PREFIX/libexec/callbox (the
# example's callback runs under isolation: process: without that worker
# the same program fails and says so). `make install-test`; part of make test.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

tmp=$(mktemp -d "${TMPDIR:-/tmp}/callbox-install.XXXXXX")
trap 'rm -rf "$tmp" "$root/examples/c/scale"' EXIT
case "$tmp/" in "$root"/*) echo "install-test: $tmp is inside the repository" >&2; exit 1 ;; esac

block=$(awk '/^## C API$/ {in_section=1} in_section && /^```sh$/ {grab=1; next} grab && /^```$/ {exit} grab {print}' README.md)
grep -q '^make install PREFIX=' <<<"$block" || { echo "install-test: README.md's C API section has no make install block" >&2; exit 1; }
echo "install-test: running README.md's C API block with HOME=$tmp:"
sed 's/^/  | /' <<<"$block"

# The user's environment: their PATH (go, cc, pkg-config), a new HOME, no
# callbox variables.
out=$(env -u CALLBOX_WORKER -u CALLBOX_LIB -u CALLBOX_CONFIG -u PKG_CONFIG_PATH -u LD_LIBRARY_PATH \
  HOME="$tmp" GOCACHE="$(go env GOCACHE)" GOMODCACHE="$(go env GOMODCACHE)" GOPATH="$(go env GOPATH)" \
  bash -euo pipefail -c "$block" 2>&1) || { echo "$out"; echo "install-test: the README block failed" >&2; exit 1; }
last=$(tail -n 1 <<<"$out")
[ "$last" = "2 4 6 8" ] || { echo "$out"; echo "install-test: the example printed '$last', want '2 4 6 8'" >&2; exit 1; }

prefix=$tmp/.local
capi=$(sed -n 's/^#define CALLBOX_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' ffi/include/callbox.h | paste -sd.)
major=${capi%%.*}
[ -f "$prefix/lib/libcallbox.so.$capi" ] || { echo "install-test: no $prefix/lib/libcallbox.so.$capi" >&2; exit 1; }
[ "$(readlink "$prefix/lib/libcallbox.so.$major")" = "libcallbox.so.$capi" ] || { echo "install-test: libcallbox.so.$major is not a link to libcallbox.so.$capi" >&2; exit 1; }
[ "$(readlink "$prefix/lib/libcallbox.so")" = "libcallbox.so.$major" ] || { echo "install-test: libcallbox.so is not a link to libcallbox.so.$major" >&2; exit 1; }
soname=$(objdump -p "$prefix/lib/libcallbox.so.$capi" | awk '$1 == "SONAME" {print $2}')
[ "$soname" = "libcallbox.so.$major" ] || { echo "install-test: soname '$soname', want libcallbox.so.$major" >&2; exit 1; }
needed=$(objdump -p examples/c/scale | awk '$1 == "NEEDED" && $2 ~ /callbox/ {print $2}')
[ "$needed" = "libcallbox.so.$major" ] || { echo "install-test: the program needs '$needed', want libcallbox.so.$major" >&2; exit 1; }
version=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --modversion callbox)
[ "$version" = "$capi" ] || { echo "install-test: pkg-config says $version, want the C API's $capi" >&2; exit 1; }
grep -q "^C API  *$capi " <<<"$("$prefix/bin/callbox" version)" || { echo "install-test: the installed CLI does not report C API $capi" >&2; exit 1; }

# The worker: the example ran under isolation: process with the library's
# own lookup; without PREFIX/libexec/callbox/callbox-worker it cannot.
mv "$prefix/libexec/callbox/callbox-worker" "$tmp/worker.moved"
if failed=$(cd examples/c && LD_LIBRARY_PATH=$prefix/lib ./scale 2>&1); then
  echo "install-test: the example ran without the installed worker: $failed" >&2; exit 1
fi
grep -q "libexec/callbox/callbox-worker" <<<"$failed" || { echo "install-test: the error does not say where it looked: $failed" >&2; exit 1; }
echo "install-test: ok: libcallbox.so.$capi (soname libcallbox.so.$major), pkg-config $version, the example printed $last through the installed worker"

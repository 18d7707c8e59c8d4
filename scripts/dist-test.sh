#!/usr/bin/env bash
# dist-test.sh OUT: make dist's files used as a user would, from an empty
# directory outside the repository with a bare environment: SHA256SUMS
# checks them; the archive unpacks; its CLI prints its versions, runs the
# demo, and runs a callback under isolation: process with no other file
# (it is its own worker); a C program builds against the unpacked
# library with the relocatable callbox.pc alone and runs a process-isolated
# callback through the worker in libexec/callbox. `make dist-test`; part of
# make test.
set -euo pipefail
out=${1:?usage: scripts/dist-test.sh OUT}
cd "$(dirname "$0")/.."
root=$PWD
out=$(cd "$out" && pwd)
version=$(sed -n 's/^const Version = "\(.*\)"$/\1/p' internal/release/release.go)
arch=$(go env GOARCH)
name=callbox-$version-linux-$arch

tmp=$(mktemp -d "${TMPDIR:-/tmp}/callbox-dist-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
case "$tmp/" in "$root"/*) echo "dist-test: $tmp is inside the repository" >&2; exit 1 ;; esac
cd "$tmp"
bare=(env -i PATH=/usr/bin:/bin HOME="$tmp")

(cd "$out" && sha256sum --quiet -c SHA256SUMS) || { echo "dist-test: SHA256SUMS does not match" >&2; exit 1; }
grep -q " $name.tar.gz$" "$out/SHA256SUMS" || { echo "dist-test: SHA256SUMS does not list $name.tar.gz" >&2; exit 1; }
tar -xzf "$out/$name.tar.gz"
for f in bin/callbox lib/libcallbox.so include/callbox.h lib/pkgconfig/callbox.pc libexec/callbox/callbox-worker LICENSE CHANGELOG.md; do
  [ -e "$name/$f" ] || { echo "dist-test: the archive has no $f" >&2; exit 1; }
done

cli=$tmp/$name/bin/callbox
grep -q "^callbox  *$version$" <<<"$("${bare[@]}" "$cli" version)" || { echo "dist-test: callbox version does not say $version" >&2; exit 1; }
demo=$("${bare[@]}" "$cli" demo 2>&1) || { echo "$demo"; echo "dist-test: the demo failed" >&2; exit 1; }
grep -q "host still serving" <<<"$demo" || { echo "$demo"; echo "dist-test: the demo did not finish" >&2; exit 1; }

mkdir work && cd work
cp "$root/guests/prebuilt/rust-scale.wasm" scale.wasm
printf 'callbacks:\n  scale:\n    module: scale.wasm\n    export: scale\n    isolation: process\n' > callbox.yaml
"${bare[@]}" "$cli" npy make x.npy 1 2 3 >/dev/null
"${bare[@]}" "$cli" npy make f.npy --shape scalar 2 >/dev/null
res=$("${bare[@]}" "$cli" run -c callbox.yaml scale --in x.npy --in f.npy)
[ "$res" = "result 0: f32[3] [2 4 6]" ] || { echo "dist-test: the CLI's process-isolated call printed '$res'" >&2; exit 1; }

cp "$root/examples/c/scale.c" .
flags=$(PKG_CONFIG_PATH=$tmp/$name/lib/pkgconfig pkg-config --cflags --libs callbox)
cc scale.c $flags -o scale
res=$("${bare[@]}" LD_LIBRARY_PATH="$tmp/$name/lib" ./scale)
[ "$res" = "2 4 6 8" ] || { echo "dist-test: the C program printed '$res'" >&2; exit 1; }
echo "dist-test: ok: $name.tar.gz checked and unpacked; demo, a process-isolated call by the CLI alone, and a C program built with pkg-config ($flags) through libexec's worker"

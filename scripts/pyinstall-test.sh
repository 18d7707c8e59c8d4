#!/usr/bin/env bash
# The README's offline install of the Python package, run as a user would:
# a fresh virtual environment outside the repository (NumPy, setuptools and
# wheel from Debian through --system-site-packages), the package installed
# into it by pip from ./python with no index and no build isolation (so no
# network: its build runs ffi/build.sh with Go's module cache), then, from
# a directory outside the repository and with no CALLBOX_LIB or
# PYTHONPATH, `import callbox` finds the library installed inside the
# package and calls callbacks from the prebuilt modules. `make
# pyinstall-test`; part of `make test`. (scripts/wheel-test.sh tests the
# online way, pip's default, with the python3 first on PATH.)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
py=${PYTHON:-/usr/bin/python3}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/callbox-pyinstall.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
case "$tmp/" in "$root"/*) echo "pyinstall-test: temporary directory $tmp is inside the repository" >&2; exit 1 ;; esac

# python/README.md's offline block, run as written with HOME a fresh
# directory (so ~/.venvs/callbox is a new venv outside the repository),
# Debian's python3 first on PATH (the block is Debian's recipe) and no pip
# configuration of the user's (an index URL, say) changing what this
# proves. Its build runs ffi/build.sh: go stays on PATH.
block=$(awk '/^```sh$/ {n++} n == 2 && /^```sh$/ {grab=1; next} grab && /^```$/ {exit} grab {print}' python/README.md)
grep -q '^python3 -m venv --system-site-packages ~/.venvs/callbox' <<<"$block" || { echo "pyinstall-test: python/README.md's second sh block is not the offline recipe: $block" >&2; exit 1; }
echo "pyinstall-test: python/README.md's offline block, with HOME=$tmp:"
sed 's/^/  | /' <<<"$block"
(env -u CALLBOX_LIB -u PYTHONPATH HOME="$tmp" PATH="$(dirname "$py"):$PATH" PIP_CONFIG_FILE=/dev/null PIP_NO_CACHE_DIR=1 \
  GOCACHE="$(go env GOCACHE)" GOMODCACHE="$(go env GOMODCACHE)" GOPATH="$(go env GOPATH)" \
  bash -euo pipefail -c "$block" >"$tmp/block.log" 2>&1) || { cat "$tmp/block.log"; echo "pyinstall-test: the README block failed" >&2; exit 1; }
venv_py=$tmp/.venvs/callbox/bin/python

# The wheel pip builds: tagged for this platform, since it carries the
# library (make wheel then gives it its manylinux tag), and carrying it.
PIP_CONFIG_FILE=/dev/null "$venv_py" -m pip wheel --no-build-isolation --no-index --no-deps --no-cache-dir -q -w "$tmp/dist" ./python
"$venv_py" - "$tmp/dist" <<'PY'
import pathlib, sys, zipfile
(whl,) = pathlib.Path(sys.argv[1]).glob("callbox-*.whl")
assert "-py3-none-" in whl.name and not whl.name.endswith("-any.whl"), whl.name
names = zipfile.ZipFile(whl).namelist()
assert "callbox/libcallbox.so" in names, "no library in " + whl.name
assert "callbox/callbox-worker" in names, "no worker (isolation: process) in " + whl.name
print("pyinstall-test: wheel " + whl.name)
PY

cat >"$tmp/callbox.yaml" <<YAML
callbacks:
  scale:
    module: $root/guests/prebuilt/rust-scale.wasm
  spin:
    module: $root/guests/prebuilt/wat-hostile.wasm
    signature: "(x: f32[n]) -> f32[n]"
    timeout: 100ms
  scale_walled:
    module: $root/guests/prebuilt/rust-scale.wasm
    export: scale
    isolation: process
YAML

cd "$tmp"
env -u CALLBOX_LIB -u PYTHONPATH -u CALLBOX_CONFIG "$venv_py" - "$tmp" <<'PY'
import pathlib
import sys

import numpy as np

import callbox

venv = pathlib.Path(sys.argv[1]) / ".venvs" / "callbox"
pkg = pathlib.Path(callbox.__file__).resolve().parent
lib = pathlib.Path(callbox.find_library()).resolve()
assert venv.resolve() in pkg.parents, "callbox imported from %s, not the venv" % pkg
assert lib == pkg / "libcallbox.so", "library found at %s, not inside the installed package" % lib

with callbox.Host("callbox.yaml") as host:
    x = np.array([1, -2, 3.5, 0], dtype=np.float32)
    y = host.call("scale", x, np.float32(2.5))
    assert y.dtype == np.float32 and y.tolist() == [2.5, -5.0, 8.75, 0.0], y
    try:
        host.call("spin", x)
    except callbox.Timeout as e:
        assert (e.callback, e.kind) == ("spin", "Timeout"), (e.callback, e.kind)
    else:
        raise AssertionError("spin did not time out")
    # isolation: process finds the worker the package installed beside
    # the library, with nothing set
    assert (pkg / "callbox-worker").stat().st_mode & 0o111, "the installed worker is not executable"
    z = host.call("scale_walled", x, np.float32(2.5))
    assert z.tolist() == y.tolist(), z
print("pyinstall-test: ok: callbox %s from %s, library %s %s; scale %s -> %s (also in a worker process); spin timed out"
      % (callbox.__version__, pkg, callbox.library_version(), lib, x.tolist(), y.tolist()))
PY

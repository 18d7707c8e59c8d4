#!/usr/bin/env bash
# The README's offline install of the Python package, run as a user would:
# a fresh virtual environment outside the repository (NumPy, setuptools and
# wheel from Debian through --system-site-packages), the package installed
# into it by pip from ./python with no index and no build isolation (so no
# network), then, from a directory outside the repository and with no
# CALLBOX_LIB or PYTHONPATH, `import callbox` finds the library installed
# inside the package and calls callbacks from the prebuilt modules.
# `make pyinstall-test` runs it (after `make python-lib`); part of `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
py=${PYTHON:-/usr/bin/python3}

[ -f python/callbox/libcallbox.so ] || { echo "pyinstall-test: python/callbox/libcallbox.so missing; run make python-lib" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/callbox-pyinstall.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
case "$tmp/" in "$root"/*) echo "pyinstall-test: temporary directory $tmp is inside the repository" >&2; exit 1 ;; esac

if ! "$py" -m venv --system-site-packages "$tmp/venv" >"$tmp/venv.log" 2>&1; then
  echo "pyinstall-test: SKIP: $py -m venv cannot create a virtual environment here (Debian: python3-venv):"
  sed 's/^/  /' "$tmp/venv.log"
  exit 0
fi
venv_py=$tmp/venv/bin/python

# The README's command, with the venv's pip. A pip configuration of the
# user's (an index URL, say) must not change what this proves.
echo "pyinstall-test: pip install --no-build-isolation --no-index ./python into $tmp/venv"
PIP_CONFIG_FILE=/dev/null "$venv_py" -m pip install --no-build-isolation --no-index --no-cache-dir -q ./python

# The wheel (make python-wheel builds the same): tagged for this platform,
# since it carries the library, and carrying it.
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

venv = pathlib.Path(sys.argv[1]) / "venv"
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

#!/usr/bin/env bash
# wheel-test.sh DIST: the Python package installed the ways its users
# install it, each into a fresh virtual environment of the python3 first
# on PATH (not Debian's, on the development and CI machines), with plain
# pip and the package index, and used from a directory outside the
# repository with no CALLBOX_ variable set:
#   1. DIST's manylinux wheel (make wheel) beside the newest JAX the index
#      serves: a jitted program calls callbacks, one of them in a worker
#      process, and a failure comes out of jit;
#   2. `pip install ./python` of a clean copy of the repository (its
#      tracked files; no make ran there): the package builds the library
#      with Go;
#   3. the sdist of that copy (python -m build --sdist), installed from
#      the tarball alone: it carries the Go sources its build needs.
# `make wheel-test`; part of `make test`.
set -euo pipefail
dist=${1:?usage: scripts/wheel-test.sh DIST}
cd "$(dirname "$0")/.."
root=$PWD
py=$(command -v python3)
version=$(sed -n 's/^const Version = "\(.*\)"$/\1/p' internal/release/release.go)
whl=$(compgen -G "$dist/callbox-$version-py3-none-manylinux_*.whl" || true)
[ -n "$whl" ] || { echo "wheel-test: no callbox-$version manylinux wheel in $dist (make wheel)" >&2; exit 1; }
whl=$(cd "$(dirname "$whl")" && pwd)/$(basename "$whl")

tmp=$(mktemp -d "${TMPDIR:-/tmp}/callbox-wheel-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
case "$tmp/" in "$root"/*) echo "wheel-test: $tmp is inside the repository" >&2; exit 1 ;; esac
echo "wheel-test: python3 on PATH: $py ($("$py" -c 'import sys; print(sys.version.split()[0], sys.prefix)'))"
[ "$(readlink -f "$py")" != "$(readlink -f /usr/bin/python3)" ] || echo "wheel-test: note: the python3 on PATH is Debian's"

# A user's environment: no callbox variables, no pip configuration of ours.
clean_env=(env -u CALLBOX_LIB -u CALLBOX_WORKER -u CALLBOX_CONFIG -u PYTHONPATH PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1)

cat >"$tmp/callbox.yaml" <<YAML
callbacks:
  scale:
    module: $root/guests/prebuilt/rust-scale.wasm
    export: scale
  scale_walled:
    module: $root/guests/prebuilt/rust-scale.wasm
    export: scale
    isolation: process
  spin:
    module: $root/guests/prebuilt/wat-hostile.wasm
    signature: "(x: f32[n]) -> f32[n]"
    timeout: 100ms
YAML

numpy_check='
import pathlib, sys
import numpy as np
import callbox
venv = pathlib.Path(sys.argv[1])
pkg = pathlib.Path(callbox.__file__).resolve().parent
assert venv.resolve() in pkg.parents, "callbox imported from %s, not %s" % (pkg, venv)
assert pathlib.Path(callbox.find_library()).resolve() == pkg / "libcallbox.so", callbox.find_library()
with callbox.Host("callbox.yaml") as host:
    x = np.array([1, -2, 3.5, 0], dtype=np.float32)
    assert host.call("scale", x, np.float32(2)).tolist() == [2, -4, 7, 0]
    assert host.call("scale_walled", x, np.float32(2)).tolist() == [2, -4, 7, 0]  # the worker installed in the package
    try:
        host.call("spin", x)
        raise AssertionError("spin did not time out")
    except callbox.Timeout:
        pass
print("callbox %s (library %s) from %s: scale, scale_walled (worker process), spin (Timeout)" % (callbox.__version__, callbox.library_version(), pkg))
'

# 1. The wheel beside the newest JAX.
echo "wheel-test: 1. pip install $(basename "$whl") jax (the newest the index serves)"
"$py" -m venv "$tmp/wheel"
"${clean_env[@]}" "$tmp/wheel/bin/python" -m pip install --quiet "$whl" jax
(cd "$tmp" && "${clean_env[@]}" JAX_PLATFORMS=cpu "$tmp/wheel/bin/python" - "$tmp/wheel" <<'PY'
import pathlib, sys
import jax
import jax.numpy as jnp
import numpy as np
import callbox
import callbox.jax

venv = pathlib.Path(sys.argv[1])
assert venv.resolve() in pathlib.Path(callbox.__file__).resolve().parents
host = callbox.Host("callbox.yaml")
callbox.jax.register(host)

@jax.jit
def f(x):
    y = callbox.jax.call("scale", x, np.float32(2))
    return callbox.jax.call("scale_walled", y, np.float32(0.5)) + 1

x = jnp.arange(4, dtype=jnp.float32)
y = f(x)
assert y.tolist() == [1, 2, 3, 4], y

@jax.jit
def g(x):
    return callbox.jax.call("spin", x)

try:
    g(x).block_until_ready()
    raise AssertionError("spin did not fail")
except Exception as e:  # XLA's error, naming the callback and its kind
    assert "spin" in str(e) and "Timeout" in str(e), e
host.close()
print("wheel-test: jax %s, jaxlib %s, callbox %s: jit(scale, scale_walled) = %s; spin failed inside jit"
      % (jax.__version__, jax.lib.__version__ if hasattr(jax.lib, "__version__") else "?", callbox.__version__, y.tolist()))
PY
)
(cd "$tmp" && "${clean_env[@]}" "$tmp/wheel/bin/python" -c "$numpy_check" "$tmp/wheel")

# 2. pip install ./python from a clean copy of the repository.
mkdir "$tmp/src"
git ls-files -z --cached --others --exclude-standard | grep -zv '^guests/build/' | xargs -0 cp --parents -t "$tmp/src" 2>/dev/null || true
[ -f "$tmp/src/python/setup.py" ] && [ -f "$tmp/src/go.mod" ] || { echo "wheel-test: the clean copy lacks python/setup.py or go.mod" >&2; exit 1; }
[ ! -e "$tmp/src/python/callbox/libcallbox.so" ] || { echo "wheel-test: the clean copy holds a library" >&2; exit 1; }
# The command python/README.md leads with (README.md shows the same),
# run as written in an activated venv: its pip is the venv's.
block=$(awk '/^```sh$/ {grab=1; next} grab && /^```$/ {exit} grab {print}' python/README.md)
[ "$(sed 's/ *#.*//' <<<"$block")" = "pip install ./python" ] || { echo "wheel-test: python/README.md no longer leads with pip install ./python: $block" >&2; exit 1; }
grep -qx "pip install ./python" README.md || { echo "wheel-test: README.md's Python section no longer shows pip install ./python" >&2; exit 1; }
echo "wheel-test: 2. python/README.md's block in a clean copy (no make): $block"
"$py" -m venv "$tmp/src-venv"
(cd "$tmp/src" && "${clean_env[@]}" PATH="$tmp/src-venv/bin:$PATH" VIRTUAL_ENV="$tmp/src-venv" bash -euo pipefail -c "$block" >"$tmp/pip.log" 2>&1) ||
  { cat "$tmp/pip.log"; echo "wheel-test: python/README.md's install failed" >&2; exit 1; }
(cd "$tmp" && "${clean_env[@]}" "$tmp/src-venv/bin/python" -c "$numpy_check" "$tmp/src-venv")

# 3. The sdist of the clean copy, installed from the tarball alone.
echo "wheel-test: 3. the sdist"
"$py" -m venv "$tmp/sdist-tools"
"${clean_env[@]}" "$tmp/sdist-tools/bin/python" -m pip install --quiet build
"${clean_env[@]}" "$tmp/sdist-tools/bin/python" -m build --sdist --outdir "$tmp/sdist" "$tmp/src/python" >"$tmp/sdist.log" 2>&1 || { cat "$tmp/sdist.log"; exit 1; }
sdist=$(ls "$tmp"/sdist/callbox-"$version".tar.gz)
tar -tzf "$sdist" >"$tmp/sdist.files"
grep -qx "callbox-$version/_go/ffi/build.sh" "$tmp/sdist.files" || { echo "wheel-test: the sdist carries no Go sources" >&2; exit 1; }
echo "wheel-test: $(basename "$sdist"): $(grep -c '/_go/.*[^/]$' "$tmp/sdist.files") files of Go sources, $(du -k "$sdist" | cut -f1) KiB"
rm -rf "$tmp/src"  # the tarball alone
"$py" -m venv "$tmp/sdist-venv"
(cd "$tmp" && "${clean_env[@]}" "$tmp/sdist-venv/bin/python" -m pip install --quiet "$sdist")
(cd "$tmp" && "${clean_env[@]}" "$tmp/sdist-venv/bin/python" -c "$numpy_check" "$tmp/sdist-venv")
echo "wheel-test: ok"

#!/usr/bin/env bash
# jax-env.sh REQUIREMENTS DIR [MODULES]: the virtual environment DIR (under
# build/, git-ignored) with exactly the packages REQUIREMENTS pins, from the
# Python package index, made with Debian's python3 (python3-venv, installed
# by scripts/install-toolchains.sh). It is made again only when
# REQUIREMENTS changed since (a copy of it is kept in DIR) or DIR is broken
# (MODULES, default "jax pytest", do not import); otherwise reused as it
# is. `make test` calls it for python/requirements-jax.txt and
# python/requirements-jax-oldest.txt, and make wheel for
# python/requirements-wheel.txt (MODULES "build auditwheel").
set -euo pipefail
req=$1
dir=$2
modules=${3:-jax pytest}
check="import ${modules// /, }"
py=${JAX_ENV_PYTHON:-/usr/bin/python3}

[ -f "$req" ] || { echo "jax-env: no requirements file $req" >&2; exit 2; }
if [ -x "$dir/bin/python" ] && cmp -s "$req" "$dir/requirements.txt" && "$dir/bin/python" -c "$check" 2>/dev/null; then
  echo "jax-env: $dir is up to date with $req"
  exit 0
fi
echo "jax-env: making $dir from $req"
t0=$SECONDS
rm -rf "$dir"
"$py" -m venv "$dir"
# A user's pip configuration must not change what is installed; the index
# is pip's default.
PIP_CONFIG_FILE=/dev/null "$dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$req"
"$dir/bin/python" -c "$check"
"$dir/bin/python" -m pip freeze --quiet --disable-pip-version-check | sed 's/^/jax-env:   /'

cp "$req" "$dir/requirements.txt"
echo "jax-env: $dir made in $((SECONDS - t0)) s"

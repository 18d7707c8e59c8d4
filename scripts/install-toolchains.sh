#!/usr/bin/env bash
# Installs the guest toolchains callbox builds its example callbacks with:
# Debian's rustc 1.63 with the wasm32 standard library (and rustup's
# wasm32 target where rustup is installed), clang + lld +
# wasi-libc for C, wabt for WAT, binaryen (wasm-opt) for release builds, and
# the AssemblyScript compiler from the committed npm lockfile; Debian's
# python3-numpy, python3-pytest, and what installs the Python package
# offline (python3-venv, -pip, -setuptools, -wheel) for python/; Debian's
# Elixir and Erlang (elixir, erlang-dev) for elixir/.
# Idempotent: it installs only what is missing. Needs root (or sudo) for apt.
set -euo pipefail
cd "$(dirname "$0")/.."

# mlir-16-tools: mlir-opt checks the syntax of the StableHLO that lowering/ emits.
packages=(rustc libstd-rust-dev-wasm32 lld clang libclang-rt-14-dev-wasm32 wasi-libc wabt binaryen mlir-16-tools)
# NumPy (Debian's, for /usr/bin/python3) writes the reference .npy files internal/tensorfile is
# tested against; Debian's cargo builds the Rust SDK recipe tested from outside the repository.
# python3-pytest runs the Python package's tests (python/); python3-venv, python3-pip,
# python3-setuptools and python3-wheel install the package offline into a fresh virtual
# environment (pip install --no-build-isolation --no-index, scripts/pyinstall-test.sh).
packages+=(python3-numpy python3-pytest cargo python3-venv python3-pip python3-setuptools python3-wheel)
# Debian's Elixir 1.14 and Erlang/OTP 25 (erl_nif.h is in erlang-dev) build and test the
# Elixir binding (elixir/: a NIF over libcallbox, `make elixir-test`), with no Hex packages.
packages+=(elixir erlang-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-toolchains: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ -f guests/assemblyscript/package-lock.json ]; then
  if [ ! -x guests/assemblyscript/node_modules/.bin/asc ]; then
    echo "install-toolchains: npm ci (assemblyscript)"
    (cd guests/assemblyscript && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi

# rustup's default toolchain, where there is one (CI machines have it), builds the Rust SDK's
# crate too (guests/packages_test.go: cargo package and publish --dry-run, user projects): give
# it the wasm32 standard library. Debian's rustc above keeps its own; without rustup, nothing.
rustup=$(command -v rustup || echo "${CARGO_HOME:-$HOME/.cargo}/bin/rustup")
if [ -x "$rustup" ] && "$rustup" which rustc >/dev/null 2>&1; then
  if ! "$rustup" target list --installed | grep -x wasm32-unknown-unknown >/dev/null; then
    echo "install-toolchains: rustup target add wasm32-unknown-unknown"
    "$rustup" target add wasm32-unknown-unknown
  fi
fi

#!/usr/bin/env bash
# Builds every guest from source: the Rust, AssemblyScript, C and Go SDK
# examples (each language's build.sh), the benchmark modules of the bench
# module (guests/bench/build.sh: the C kernels, and the users' kernels in
# guests/*/kernels/ through their SDKs' build.sh) and the WAT modules, into
# guests/build/<lang>/.
# Toolchains: scripts/install-toolchains.sh.
set -euo pipefail
cd "$(dirname "$0")"
for lang in rust assemblyscript c go; do
  echo "guests: building $lang"
  "./$lang/build.sh"
done
echo "guests: building bench"
./bench/build.sh
echo "guests: building wat"
mkdir -p build/wat
for src in wat/*.wat; do
  wat2wasm "$src" -o "build/wat/$(basename "${src%.wat}").wasm"
done

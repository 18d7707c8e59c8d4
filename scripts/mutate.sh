#!/usr/bin/env bash
# mutate.sh [PACKAGE...]: mutation testing of the packages that own rules
# (abi, host, sandbox/internal/meter, ffi/internal/dlpack, config by default)
# with go-gremlins, a maintained Go mutation tester, installed here at a
# pinned version into build/tools (a tool, so not in the library's go.mod).
# Each package's result goes to bin/mutate/<package>.json and its summary
# line to stdout; docs/TESTING.md records the scores and every survivor's
# reason. Slow (every mutant runs the package's tests: minutes for abi, about
# two hours for host on 2 cores), so not part of `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
GREMLINS_VERSION=v0.6.0
tools=$PWD/build/tools
if [ ! -x "$tools/gremlins" ] || [ "$(cat "$tools/gremlins.version" 2>/dev/null)" != "$GREMLINS_VERSION" ]; then
  GOBIN=$tools go install "github.com/go-gremlins/gremlins/cmd/gremlins@$GREMLINS_VERSION"
  echo "$GREMLINS_VERSION" >"$tools/gremlins.version"
fi
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=(./abi ./host ./sandbox/internal/meter ./ffi/internal/dlpack ./config)
mkdir -p bin/mutate
# -count=1: gremlins times each mutant against its first, unmutated run of
# the tests; a cached run (0.6 s instead of 70 s for host) made every
# slower mutant a "timed out". -failfast: a killed mutant's run stops at
# its first failing test.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-count=1 -failfast"
for p in "${pkgs[@]}"; do
  name=$(echo "${p#./}" | tr / _)
  echo "== $p"
  # A mutant's tests may take a few times the unmutated run on a loaded
  # machine: a generous timeout keeps slow runs from counting as kills.
  "$tools/gremlins" unleash --workers "${MUTATE_WORKERS:-2}" --timeout-coefficient "${MUTATE_TIMEOUT_COEFFICIENT:-10}" \
    -o "bin/mutate/$name.json" "$p" >"bin/mutate/$name.log" 2>&1 || true
  grep -E "^Killed|^Timed out|^Test efficacy|^Mutator coverage" "bin/mutate/$name.log" | sed "s|^|  $p: |"
  grep -E "LIVED" "bin/mutate/$name.log" | sed "s|^ *|  $p: |" || true
done

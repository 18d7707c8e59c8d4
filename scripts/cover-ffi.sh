#!/usr/bin/env bash
# cover-ffi.sh: the ffi package's coverage counted in full: the Go tests'
# own, plus the library's inside the C harness, foreign and Python
# processes those tests start (built with -cover and the callbox_cover tag,
# which writes each process's counters as it exits: ffi/coverflush.go).
# Prints both figures and the merged one; the merged profile goes to
# bin/cover/ffi.out. Not part of `make test` (it runs the ffi suite again).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$PWD/bin/cover
rm -rf "$out" && mkdir -p "$out/test" "$out/lib"
pkg=github.com/seed4b3e0ccb/callbox/ffi
status=0
CALLBOX_LIB_COVERDIR=$out/lib go test -count=1 -timeout 30m -covermode=atomic -coverpkg=./ffi ./ffi \
  -args -test.gocoverdir="$out/test" >"$out/test.log" 2>&1 || status=$?
if [ $status -ne 0 ]; then
  # The figures below still count what ran; the failure is reported.
  echo "the ffi tests FAILED (exit $status) under coverage: bin/cover/test.log"
  grep -E "^--- FAIL" "$out/test.log" || true
fi
echo "ffi, the Go tests alone:          $(go tool covdata percent -i="$out/test" -pkg=$pkg | awk '{print $3}')"
echo "ffi, inside the C/Python children: $(go tool covdata percent -i="$out/lib" -pkg=$pkg | awk '{print $3}')"
echo "ffi, both:                         $(go tool covdata percent -i="$out/test,$out/lib" -pkg=$pkg | awk '{print $3}')"
go tool covdata textfmt -i="$out/test,$out/lib" -pkg=$pkg -o "$out/ffi.out"
echo "merged profile: bin/cover/ffi.out ($(ls "$out/lib" | grep -c covcounters) child processes counted)"
exit $status

//go:build cgo && callbox_cover

package main

import (
	"os"
	"runtime/coverage"
)

// A library built with -cover and the callbox_cover tag
// (scripts/cover-ffi.sh) writes its coverage counters into $GOCOVERDIR as
// each host closes. A Go program writes them as main returns; a c-shared
// library has no main, and the C API's tests run the library in such
// foreign processes (the C harness, Python), whose coverage would be
// lost. (Writing them from an atexit handler instead crashed some harness
// processes at exit, with the Go runtime's and wasmtime's threads still
// running.) Each write is a snapshot of the process's counters so far;
// `go tool covdata` merges them, and a statement covered in any is
// covered.
func coverFlush() {
	dir := os.Getenv("GOCOVERDIR")
	if dir == "" {
		return
	}
	// Errors are dropped: a missing snapshot shows in the report.
	_ = coverage.WriteMetaDir(dir)
	_ = coverage.WriteCountersDir(dir)
}

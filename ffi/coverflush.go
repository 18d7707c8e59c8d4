//go:build cgo && callbox_cover

package main

/*
#include <stdlib.h>
extern void cbxgo_cover_flush(void);
static void cbx_cover_flush_at_exit(void) { cbxgo_cover_flush(); }
static void cbx_cover_register(void) { atexit(cbx_cover_flush_at_exit); }
*/
import "C"

import (
	"os"
	"runtime/coverage"
)

// A library built with -cover (and the callbox_cover tag: scripts/cover-ffi.sh)
// writes its coverage counters when the process that loaded it exits, into
// $GOCOVERDIR. A Go program does that as main returns; a c-shared library
// has no main, so the C harness's own exit does it here. The C API's tests
// run the library in such foreign processes, whose coverage would otherwise
// be lost.
func init() { C.cbx_cover_register() }

//export cbxgo_cover_flush
func cbxgo_cover_flush() {
	dir := os.Getenv("GOCOVERDIR")
	if dir == "" {
		return
	}
	// Errors are dropped: the process is exiting, and a missing profile
	// shows in the report.
	_ = coverage.WriteMetaDir(dir)
	_ = coverage.WriteCountersDir(dir)
}

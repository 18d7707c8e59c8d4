//go:build cgo

// Command ffi is libcallbox, callbox's C ABI: build it with
// `make lib` (go build -buildmode=c-shared -o build/libcallbox.so ./ffi).
// The contract is the hand-written header include/callbox.h; the exported
// functions live in capi.go, the XLA FFI handler in xla.c and xla.go, and
// the logic in small Go files beside them (tensor conversion, errors, the
// handle table, the bridge to the host package).
//
// The package keeps process-wide state, which a C ABI needs: the table of
// open hosts (handles are numbers) and the default host of the XLA
// handler. Nothing else in callbox has globals.
package main

func main() {}

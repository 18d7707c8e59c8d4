//go:build cgo

// Command ffi is libcallbox, callbox's one foreign door: build it with
// `make lib` (go build -buildmode=c-shared -o build/libcallbox.so ./ffi).
// The contract is the hand-written header include/callbox.h; every symbol
// the library exports is built here:
//
//	capi.go    the C API (DLPack tensors, checked by package internal/dlpack)
//	xla.c      the XLA FFI handlers, CPU and CUDA: one frame decoder
//	xla.go     its Go side: a call without a stream goes to the host, one
//	           with a stream to the GPU path (gpu.go, package cuda)
//	gpu.go     callbox_cuda_call_dlpack and callbox_cuda_stats
//	errors.go  the one error mapper: every entry's codes
//	bridge.go  the handle table, the default host, the bridge to package host
//
// The package keeps the process-wide state a C ABI needs, all in
// bridge.go: the table of open hosts (handles are numbers), the default
// host (XLA's handler ABI carries no user data), and the scratch pool of
// tensor slices. The Go packages below it (host, cuda, the engines) have
// no process-wide state of their own beyond caches the Go runtime keeps.
package main

func main() {}

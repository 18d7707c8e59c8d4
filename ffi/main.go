//go:build cgo

// Command ffi is libcallbox, callbox's one foreign door: build it with
// `make lib` (go build -buildmode=c-shared -o build/libcallbox.so ./ffi,
// linked with libcallbox.map so that it exports the callbox_* functions
// and nothing else). The contract is the hand-written header
// include/callbox.h; every symbol the library exports is built here:
//
//	exports.c    the exported C entries: thin wrappers that refuse a fork()
//	             child before it enters Go, and the async worker threads
//	capi.go      the C API's Go half (DLPack tensors, checked by package
//	             internal/dlpack); batch.go its batched calls, async.go
//	             callbox_call_async's Go half, tensor.go argument errors
//	xla.c        the XLA FFI handlers, CPU and CUDA: one frame decoder
//	xla.go       its Go side: a call without a stream goes to the host, one
//	             with a stream to the GPU path (gpu.go, package cuda);
//	             xlaexport.go the entry xla.c calls, with layout checks;
//	             xlafailure.go the failures they report, kept under the
//	             token that ends each message (callbox_xla_failure), and
//	             the attribute host (callbox_xla_host_attr)
//	gpu.go       callbox_cuda_call_dlpack (CUDA DLPack tensors checked by
//	             internal/dlpack, refused as the host refuses) and
//	             callbox_cuda_stats
//	errors.go    the one error mapper: every entry's codes
//	bridge.go    the handle tables, the default host, the bridge to host;
//	             hosts open and reload on a goroutine of their own
//	             (onGoThread), so compiling needs no stack from the caller
//	log.go       the log sink (stderr, or the program's log callback)
//	signal.go    callbox_cancel_on_signal's Go half; signals.c its handler
//	env.go       the environment variables the library reads
//	version.c    the version functions
//
// The process-wide state a C ABI needs: in bridge.go the tables of open
// hosts and cancel tokens (handles are numbers), the default host (XLA's
// handler ABI carries no user data) and the scratch pool of tensor slices;
// in xlafailure.go the bounded table of XLA failures and the library's
// tag; in log.go the log callback; in signal.go the signal watcher; in
// exports.c the fork flag and the async workers' queue; in signals.c the
// signal pipe and the handlers it replaced. The Go packages below it
// (host, cuda, the engines) have no process-wide state of their own beyond
// caches the Go runtime keeps.
package main

func main() {}

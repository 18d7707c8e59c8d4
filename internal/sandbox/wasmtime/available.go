// Package wasmtime is a forwarding stub, not the engine: the wasmtime
// adapter lives in sandbox/internal/wasmtime. It stays only so that
// cuda/helpers_test.go, which another change is rewriting, keeps compiling;
// delete it once that file asks sandbox.WasmtimeAvailable.
package wasmtime

import "github.com/seed4b3e0ccb/callbox/sandbox"

// Available reports whether this build includes the wasmtime engine.
//
// Deprecated: use sandbox.WasmtimeAvailable.
const Available = sandbox.WasmtimeAvailable

//go:build !cgo

package spectest

// wasmtimeConfigs is empty without cgo: there is no wasmtime.
func wasmtimeConfigs() []config { return nil }

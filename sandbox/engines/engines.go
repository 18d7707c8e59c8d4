// Package engines starts callbox's built-in engines behind the sandbox
// contract: wazero (pure Go, the default), wasmtime (cgo), and either one
// in a locked-down worker process (isolation: process). It also holds
// what needs a real engine besides the host: Inspect (callbox inspect's
// report), the worker's lookup and its entry point for programs that
// serve as their own worker (WorkerMain), and the worker's lockdown
// report. Programs call callbacks through package host, which uses it.
package engines

import (
	"context"
	"fmt"

	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/wasmtime"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/wazero"
)

// Options configure an engine made by New.
type Options struct {
	// CacheDir, when set, keeps compiled modules on disk under
	// CacheDir/<engine name>, checksummed and keyed by module sha256,
	// engine version and code-affecting settings.
	CacheDir string
}

// WasmtimeAvailable reports whether this build includes the wasmtime
// engine (it needs cgo).
func WasmtimeAvailable() bool { return wasmtime.Available }

// Engines lists the engine names this build can run, the default first.
func Engines() []string {
	if WasmtimeAvailable() {
		return []string{config.EngineWazero, config.EngineWasmtime}
	}
	return []string{config.EngineWazero}
}

// Available reports whether this build can run the named engine.
func Available(name string) bool {
	return name == config.EngineWazero || name == config.EngineWasmtime && WasmtimeAvailable()
}

// Version is the named engine library's version ("" for an unknown name).
func Version(name string) string {
	switch name {
	case config.EngineWazero:
		return wazero.Version
	case config.EngineWasmtime:
		return wasmtime.Version
	}
	return ""
}

// CallerStack is the native stack, in bytes, that a thread calling a
// guest of the named engine under limits must have: 0 where any thread
// will do (wazero runs guests on goroutine stacks; wasmtime, on Linux, on
// x86-64 or with glibc, switches to a stack of its own when the caller's is
// short),
// else about the guest's wasm stack limit plus 1 MiB (wasmtime
// elsewhere). A foreign caller with small threads (an Erlang scheduler)
// reads it to choose where to call from.
func CallerStack(name string, limits config.Limits) uint64 {
	if name == config.EngineWasmtime {
		return wasmtime.CallerStack(limits.MaxStack)
	}
	return 0
}

// New starts the named engine (config.EngineWazero or
// config.EngineWasmtime).
func New(ctx context.Context, name string, o Options) (sandbox.Engine, error) {
	switch name {
	case config.EngineWazero:
		e, err := wazero.New(ctx, wazero.Options{CacheDir: o.CacheDir})
		if err != nil {
			return nil, err
		}
		return e, nil
	case config.EngineWasmtime:
		e, err := wasmtime.New(ctx, wasmtime.Options{CacheDir: o.CacheDir})
		if err != nil {
			return nil, err
		}
		return e, nil
	}
	return nil, fmt.Errorf("unknown engine %q (want wazero or wasmtime)", name)
}

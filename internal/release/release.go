// Package release holds the version numbers of what callbox ships, and
// reads the ones its dependencies and the running program carry.
package release

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Version is the release version of everything callbox ships: the CLI,
// the library, the Python wheel, the Rust crate and the npm package. One
// release train: CHANGELOG.md's newest entry, python/callbox's
// __version__, the crate's and the npm package's versions equal it (a
// test holds each to it).
const Version = "1.4.0"

// Module is an engine's Go module as this program was built with it.
type Module struct {
	Name    string // the engine: "wazero" or "wasmtime"
	Path    string // the Go module's path
	Version string // its version; wasmtime-go's follows wasmtime's own
}

// Engine module paths: wazero, and wasmtime's Go binding (whose major
// version follows wasmtime's).
const (
	wazeroModule   = "github.com/tetratelabs/wazero"
	wasmtimeModule = "github.com/bytecodealliance/wasmtime-go/"
)

// Engines returns the engines' modules as the running program was built
// with them (wazero first, then wasmtime-go), from the program's build
// information; a program built without module support (or an engine not
// linked in) lacks them.
func Engines() []Module {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	var wz, wt []Module
	for _, d := range info.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		switch {
		case d.Path == wazeroModule:
			wz = append(wz, Module{"wazero", d.Path, d.Version})
		case strings.HasPrefix(d.Path, wasmtimeModule):
			wt = append(wt, Module{"wasmtime", d.Path, d.Version})
		}
	}
	return append(wz, wt...)
}

// Go is the Go toolchain and platform the running program was built
// for, e.g. "go1.26.8 linux/amd64".
func Go() string { return runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH }

// Package prebuilt embeds the guest modules `callbox demo` runs, and the
// benchmark kernels callbox-bench runs (bench-*.wasm, from
// guests/bench), so both work on a machine with only Go installed. Each
// file is a byte-for-byte copy of a module built from source by `make guests`
// (guests/build/<lang>/<example>.wasm, named <lang>-<example>.wasm here);
// `make check-prebuilt`, run in CI, rebuilds them and fails on any
// difference, so these can never drift from the SDKs' sources.
package prebuilt

import (
	"embed"
	"fmt"
	"io/fs"
)

//go:embed *.wasm
var files embed.FS

// Module returns the embedded module <lang>-<name>.wasm.
func Module(lang, name string) ([]byte, error) {
	b, err := files.ReadFile(lang + "-" + name + ".wasm")
	if err != nil {
		return nil, fmt.Errorf("prebuilt module %s/%s: %w", lang, name, err)
	}
	return b, nil
}

// Names lists the embedded modules' file names.
func Names() []string {
	entries, _ := fs.ReadDir(files, ".")
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

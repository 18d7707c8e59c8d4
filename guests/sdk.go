// Package guests embeds the sources of the guest SDKs, so that `callbox
// new` can write a copy of one into a new callback project that builds
// without this repository or a package registry.
//
// Each SDK is embedded as it ships, and no more: the Rust crate
// (rust/callbox, the files `cargo package` packs), the AssemblyScript npm
// package (assemblyscript, the files `npm pack` packs), the C headers
// (c/callbox.h and the c/callbox/ it includes) and the Go package
// (go/callbox). The tests in this
// directory check the embedded files against `cargo package --list` and
// `npm pack`.
package guests

import (
	"embed"
	"fmt"
	"io/fs"
)

//go:embed rust/callbox/Cargo.toml rust/callbox/README.md rust/callbox/LICENSE rust/callbox/src
//go:embed assemblyscript/package.json assemblyscript/README.md assemblyscript/LICENSE assemblyscript/index.ts assemblyscript/asconfig.callbox.json assemblyscript/assembly
//go:embed c/callbox.h c/callbox
//go:embed go/callbox
var sdks embed.FS

// license is the path, in the embedded files, of the SDKs' license (a
// copy of the repository's LICENSE; a test keeps them identical). SDKFiles
// adds it to the SDKs that carry no copy of their own.
const license = "rust/callbox/LICENSE"

// sdkDir is the directory of lang's SDK in the embedded files, or "" for
// a language without one.
func sdkDir(lang string) string {
	switch lang {
	case "rust":
		return "rust/callbox"
	case "assemblyscript":
		return "assemblyscript"
	case "c":
		return "c"
	case "go":
		return "go/callbox"
	}
	return ""
}

// Languages lists the languages with an SDK, as SDKFiles names them.
func Languages() []string {
	return []string{"assemblyscript", "c", "go", "rust"}
}

// SDKFiles returns the source files of lang's SDK (one of Languages), by
// path relative to the SDK's directory ("src/lib.rs", "callbox/log.h"), always
// with the license as "LICENSE".
func SDKFiles(lang string) (map[string][]byte, error) {
	dir := sdkDir(lang)
	if dir == "" {
		return nil, fmt.Errorf("no guest SDK for language %q (have: %v)", lang, Languages())
	}
	sub, err := fs.Sub(sdks, dir)
	if err != nil {
		return nil, fmt.Errorf("guest SDK %s: %w", lang, err)
	}
	files := map[string][]byte{}
	err = fs.WalkDir(sub, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, path)
		files[path] = b
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("guest SDK %s: %w", lang, err)
	}
	if _, ok := files["LICENSE"]; !ok {
		if files["LICENSE"], err = sdks.ReadFile(license); err != nil {
			return nil, fmt.Errorf("guest SDK %s: %w", lang, err)
		}
	}
	return files, nil
}

package configfile_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/config/configfile"
)

// Load a YAML file, with one value overridden from the environment. Sizes
// and durations take a unit; module paths are relative to the file.
func ExampleLoadEnv() {
	dir, err := os.MkdirTemp("", "callbox-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "callbox.yaml")
	err = os.WriteFile(path, []byte(`
defaults:
  timeout: 1s
  max_memory: 64MiB
callbacks:
  scale:
    module: scale.wasm
    timeout: 50ms
  spin:
    module: hostile.wasm
    engine: wasmtime
    fuel: 10000000
`), 0o644)
	if err != nil {
		panic(err)
	}

	// configfile.Load(path) reads os.Environ() instead.
	cfg, err := configfile.LoadEnv(path, []string{"CALLBOX_CALLBACKS_SPIN_MAX_MEMORY=16MiB"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, cb := range cfg.Callbacks {
		fmt.Printf("%s: %s %s, timeout %v, max_memory %d MiB, fuel %d\n", cb.Name,
			cb.Engine, filepath.Base(cb.Module), cb.Limits.Timeout, cb.Limits.MaxMemory>>20, cb.Limits.Fuel)
	}
	// Output:
	// scale: wazero scale.wasm, timeout 50ms, max_memory 64 MiB, fuel 0
	// spin: wasmtime hostile.wasm, timeout 1s, max_memory 16 MiB, fuel 10000000
}

// A bad file is an error naming the file and the key; a bare number where
// a unit belongs is refused with the units to write instead.
func ExampleLoadEnv_errors() {
	dir, err := os.MkdirTemp("", "callbox-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "callbox.yaml")
	err = os.WriteFile(path, []byte("callbacks:\n  x:\n    module: x.wasm\n    max_memory: 64\n    timout: 1s\n"), 0o644)
	if err != nil {
		panic(err)
	}

	_, err = configfile.LoadEnv(path, nil)
	for _, part := range err.(interface{ Unwrap() []error }).Unwrap() {
		var e *config.Error
		if errors.As(part, &e) && e.File == path {
			fmt.Printf("%s: %v\n", e.Key, e.Err)
		}
	}
	// Output:
	// callbacks.x.timout: unknown key (did you mean timeout?)
	// callbacks.x.max_memory: 64 has no unit; write 64MiB or 64KiB (or 64B for bytes)
}

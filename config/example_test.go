package config_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/seed4b3e0ccb/callbox/config"
)

// A Config built in code, without a file: start every callback from
// DefaultCallback, set what differs, and check it with Validate (host.New
// does the same before it loads anything).
func Example() {
	scale := config.DefaultCallback()
	scale.Name = "scale"
	scale.Module = "guests/build/rust/scale.wasm"
	scale.Limits.Timeout = 50 * time.Millisecond
	scale.Limits.MaxMemory = 16 << 20

	spin := config.DefaultCallback()
	spin.Name = "spin"
	spin.Module = "hostile.wasm"
	spin.Signature = "(x: f32[n]) -> f32[n]"
	spin.Engine = config.EngineWasmtime
	spin.Limits.Fuel = 10_000_000

	cfg := &config.Config{Defaults: config.DefaultCallback(), Callbacks: []config.Callback{scale, spin}}
	if err := cfg.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	for _, cb := range cfg.Callbacks {
		fmt.Printf("%s: %s, timeout %v, max_memory %d MiB, fuel %d\n",
			cb.Name, cb.Engine, cb.Limits.Timeout, cb.Limits.MaxMemory>>20, cb.Limits.Fuel)
	}
	// Output:
	// scale: wazero, timeout 50ms, max_memory 16 MiB, fuel 0
	// spin: wasmtime, timeout 1s, max_memory 64 MiB, fuel 10000000
}

// Validate reports every problem at once, each an *Error naming the key.
func ExampleConfig_Validate() {
	cb := config.DefaultCallback()
	cb.Name = "scale"
	cb.Module = "scale.wasm"
	cb.Limits.MaxMemory = 100_000 // not a whole number of 64 KiB pages
	cb.Engine = "v8"
	cfg := &config.Config{Callbacks: []config.Callback{cb}}

	err := cfg.Validate()
	fmt.Println(err)
	var e *config.Error
	if errors.As(err, &e) {
		fmt.Println("first key:", e.Key)
	}
	// Output:
	// callbacks.scale.engine: bad engine "v8" (allowed: wazero or wasmtime)
	// callbacks.scale.max_memory: 100000 bytes is not a whole number of 64KiB pages (allowed: a size from 64KiB to 4GiB, e.g. 64MiB, rounded up to whole 64KiB pages)
	// first key: callbacks.scale.engine
}

package wasmtime

import "time"

// Version is the wasmtime-go release this engine is built against.
const Version = "v39.0.1"

// Options configure the engine.
type Options struct {
	// CacheDir, when set, keeps serialized compiled modules under
	// CacheDir/wasmtime, checksummed and keyed by module sha256, engine
	// version and code-affecting settings.
	CacheDir string
	// EpochInterval is the timeout check period; default 1ms.
	EpochInterval time.Duration
}

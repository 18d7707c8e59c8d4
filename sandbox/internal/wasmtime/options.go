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
	// Cores is how many guest calls that outlive an epoch tick run at
	// once; the others wait their turn, taken in 1-tick slices (see
	// RATIONALE.md, "Runaway guests stop on time on wasmtime"). 0 means
	// runtime.GOMAXPROCS(0), the cores Go itself runs on (it follows a
	// cgroup CPU limit), so guests on both engines share the same number;
	// a negative value turns the limit off and leaves the time-slicing to
	// the OS.
	Cores int
	// SharedMemory makes every instance's linear memory a sealed memfd
	// (a memory creator in the C glue), so another process handed the
	// descriptor (engine.SharedMemory) sees the guest's memory itself:
	// the process-isolation worker's zero-copy path. Linux only; the
	// memory never moves either way.
	SharedMemory bool
}

// Package config holds callbox's configuration types: global defaults plus
// one entry per callback (module, export, signature, engine, limits), or
// one entry per module for every callback it declares (Module), what
// host.New takes. A Config can be built in code and checked with Validate;
// package config/configfile loads one from a YAML, TOML or JSON file with
// CALLBOX_ environment overrides.
//
// This package owns every key's rules: the built-in defaults, the bounds,
// and (in Keys) how a file's value for a key decodes and which values are
// allowed, so that Validate and the loader accept the same configurations.
// It reads no files and does not import the loader's dependencies.
package config

import (
	"fmt"
	"time"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// Engines and isolation modes.
const (
	EngineWazero   = "wazero"
	EngineWasmtime = "wasmtime"

	IsolationPooled = "pooled"
	IsolationFresh  = "fresh"
	// IsolationProcess runs the callback's instances (pooled) in a
	// worker process of their own, locked down with seccomp, so that an
	// engine bug reaches that worker and not the caller's process.
	IsolationProcess = "process"
	// IsolationProcessFresh is both walls: every call on a new instance
	// (no state from one call reaches the next, as fresh), in a worker
	// process (as process).
	IsolationProcessFresh = "process-fresh"

	WASINone    = "none"
	WASIMinimal = "minimal"

	// Batching rules for tensor runtimes that vectorize a call (JAX's
	// vmap_method names, and callbox's own parallel). The FFI bridge hands
	// the rule to the runtime. A batched call through the host
	// (host.Request.Batch, callbox_call_batch) runs its elements one
	// call each: concurrently on pooled instances for BatchingParallel, in
	// order on one goroutine for every other rule.
	BatchingSequential   = "sequential"
	BatchingExpandDims   = "expand_dims"
	BatchingBroadcastAll = "broadcast_all"
	BatchingParallel     = "parallel"
)

// Limits are the per-callback resource limits.
type Limits struct {
	// Timeout is the wall-clock limit of one call, instantiation included.
	// Zero means no timeout; config files must set a positive one.
	Timeout time.Duration
	// MaxCPU is the CPU time one call of the callback may use, counted on
	// the thread that runs the guest: time it waits for a core on a busy
	// machine does not count, so a healthy call does not fail because
	// other processes slowed it, while a runaway is stopped as a Timeout
	// (its message names the CPU limit). Zero means none.
	MaxCPU time.Duration
	// MaxMemory is the guest's linear memory limit in bytes, rounded up to
	// whole 64 KiB pages.
	MaxMemory uint64
	// Fuel is the work budget of each call, in the unit docs/SECURITY.md
	// defines (one per instruction, bulk operations and byte-scanning
	// imports by size), the same on both engines; zero means unlimited.
	// Loading (start, _initialize and the ABI's service exports) has a
	// bound of its own.
	Fuel uint64
	// MaxStack is the wasm stack limit in bytes (engines that support it);
	// zero means the engine default.
	MaxStack uint64
	// MaxOutput caps the total bytes of a call's outputs.
	MaxOutput uint64
	// MaxError caps the guest error message, in bytes.
	MaxError uint64
	// MaxLog caps the guest log output per call, in bytes.
	MaxLog uint64
	// MaxWait bounds how long a call waits for a free instance while
	// every one of the callback's instances is busy (max_instances); the
	// call then fails as Overloaded, without running. The callback's
	// timeout starts once the call has an instance. Zero means no bound;
	// config files must set a positive one.
	MaxWait time.Duration
}

// Callback is one callback entry, with defaults applied.
type Callback struct {
	Name         string // the config key; [a-z][a-z0-9_-]*
	Module       string // path of the .wasm file, absolute once loaded from a file
	SHA256       string // expected sha256 of the module, lower-case hex; "" to skip the check
	Export       string // export name; defaults to Name
	Signature    string // signature text; "" to take it from the module
	Engine       string // EngineWazero or EngineWasmtime
	Isolation    string // IsolationPooled, IsolationFresh, IsolationProcess or IsolationProcessFresh
	MaxInstances int    // pool size for pooled isolation; concurrent calls for fresh
	WASI         string // WASINone or WASIMinimal
	Batching     string // how a runtime may vectorize calls: BatchingSequential, BatchingExpandDims, BatchingBroadcastAll, BatchingParallel; "" means sequential
	// Deterministic makes the module give the same output bits on both
	// engines and every machine: every NaN an arithmetic float operation
	// returns is the canonical NaN, and WASI's clocks and random are not
	// granted (a module importing them is refused at load).
	Deterministic bool
	// RecordFailures, when set, is a directory where every failed call of
	// the callback leaves a replay bundle (the module, its settings, the
	// call's inputs and its outcome; `callbox replay` reruns it). It
	// records the callers' inputs: set it only where they may be kept.
	// "" records nothing.
	RecordFailures string
	Limits         Limits
}

// SameSettings reports whether c and d run a callback the same way: every
// setting equal (engine, isolation, instances, WASI, batching, limits,
// export, signature text, expected sha256) whatever their names and module
// paths. Two callbacks of one module, export and signature share a content
// id; only when they have the same settings may a call by that id run on
// either (host and lowering ask this).
func (c Callback) SameSettings(d Callback) bool {
	c.Name, d.Name, c.Module, d.Module = "", "", "", ""
	c.RecordFailures, d.RecordFailures = "", "" // where failures are recorded changes no call
	return c == d
}

// Config is a loaded, validated configuration.
type Config struct {
	// File is the path the config was read from ("" when built in code).
	File string
	// CacheDir is where compiled modules are cached; "" disables the cache.
	// It, and everything in it, must be the host's user's and writable by
	// no one else (a per-user directory such as ~/.cache/callbox): the
	// engines refuse any other, since a writer could plant compiled code.
	CacheDir string
	// Worker is the path of the callbox-worker executable that
	// isolation: process starts; "" means the host's default search
	// (CALLBOX_WORKER, then beside the running program or library).
	Worker string
	// WorkerUser is who the workers of a host running as root run as: a
	// user name, "UID" or "UID:GID" ("" for nobody). A host that is not
	// root starts its workers as its own (unprivileged) user.
	WorkerUser string
	// Defaults are the values every callback starts from.
	Defaults Callback
	// Callbacks, sorted by name.
	Callbacks []Callback
	// Modules are the entries that load every callback a module declares,
	// sorted by name; their callbacks are not in Callbacks (see
	// ExpandModules).
	Modules []Module
	// Origins says where each key a file or the environment gave came
	// from, by entry ("defaults", "callbacks.<name>", "modules.<entry>",
	// "modules.<entry>.callbacks.<export>"): the key's path in File, or
	// "$" and the name of the environment variable that set it. nil for a
	// Config built in code. Origin reads it.
	Origins map[string]map[string]string
}

// OriginDefault is what Origin says of a value no file or variable gave:
// the built-in default.
const OriginDefault = "default"

// Origin says where the value of key came from for a callback whose
// settings come from entries, most specific first ("callbacks.<name>";
// for a callback a modules entry loaded, "modules.<entry>.callbacks.<export>"
// then "modules.<entry>"), falling back to the defaults block: a key path
// in File, "$NAME" for an environment variable, or OriginDefault.
func (c *Config) Origin(key string, entries ...string) string {
	for _, e := range append(entries, "defaults") {
		if at, ok := c.Origins[e][key]; ok {
			return at
		}
	}
	return OriginDefault
}

// Callback returns the callbacks entry with the given name (not one a
// modules entry declares: see ExpandModules).
func (c *Config) Callback(name string) (Callback, bool) {
	for _, cb := range c.Callbacks {
		if cb.Name == name {
			return cb, true
		}
	}
	return Callback{}, false
}

// BatchingRule is the callback's batching rule, BatchingSequential when
// none is set.
func (c Callback) BatchingRule() string {
	if c.Batching == "" {
		return BatchingSequential
	}
	return c.Batching
}

// ResolveSignature is the callback's signature: the config's (Signature)
// or the one its module declares (embedded, nil when it declares none);
// when both are given they must agree. It is the one resolution of a
// callback's signature, for a host loading the module and for lowering
// without one.
func (c Callback) ResolveSignature(embedded *abi.Signature) (*abi.Signature, error) {
	var fromConfig *abi.Signature
	if c.Signature != "" {
		s, err := abi.ParseSignature(c.Signature)
		if err != nil {
			return nil, fmt.Errorf("callbacks.%s.signature: %w", c.Name, err)
		}
		fromConfig = s
	}
	switch {
	case fromConfig != nil && embedded != nil && !fromConfig.Equal(embedded):
		return nil, fmt.Errorf("callbacks.%s.signature %q disagrees with the module's own signature %q for export %s", c.Name, fromConfig, embedded, c.Export)
	case fromConfig != nil:
		return fromConfig, nil
	case embedded != nil:
		return embedded, nil
	}
	return nil, fmt.Errorf("callback %q has no signature: give one in the config (signature:) or embed one in the module (%s section or %s export)", c.Name, abi.SignatureSection, abi.ExportSignatures)
}

// DefaultCallback is the built-in default every callback starts from before
// the file's defaults and its own keys are applied.
func DefaultCallback() Callback {
	return Callback{
		Engine:       EngineWazero,
		Isolation:    IsolationPooled,
		MaxInstances: 4,
		WASI:         WASINone,
		Batching:     BatchingSequential,
		Limits: Limits{
			Timeout:   time.Second,
			MaxMemory: 64 << 20,
			MaxOutput: 1 << 30,
			MaxError:  4 << 10,
			MaxLog:    64 << 10,
			MaxWait:   10 * time.Second,
		},
	}
}

// Bounds on limit values; a value outside them is rejected as absurd.
const (
	MaxTimeout      = time.Hour
	MinMemory       = 64 << 10
	MaxMemoryLimit  = 4 << 30
	MaxFuel         = 1 << 50
	MinStack        = 64 << 10
	MaxStackLimit   = 1 << 30
	MaxOutputLimit  = 4 << 30
	MaxErrorLimit   = 1 << 20
	MaxLogLimit     = 64 << 20
	MaxInstancesCap = 1024
)

// InWorker reports whether the callback runs in a worker process
// (isolation: process or process-fresh).
func (cb *Callback) InWorker() bool {
	return cb.Isolation == IsolationProcess || cb.Isolation == IsolationProcessFresh
}

// FreshInstances reports whether every call of the callback gets a new
// instance (isolation: fresh or process-fresh).
func (cb *Callback) FreshInstances() bool {
	return cb.Isolation == IsolationFresh || cb.Isolation == IsolationProcessFresh
}

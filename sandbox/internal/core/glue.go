package core

import (
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/cachefile"
)

// This file is the engine-neutral glue both adapters share, so that each
// adapter holds only what differs between the engines: the one entry point
// for compiling (with the table limit), the host-function adapter core, the
// export type check and the two-level compile cache.

// CallHost runs one host function for an adapter: it contains a panic in
// host code as a HostPanic abort and reports whether the guest must stop
// (an abort was recorded, by the function or by the panic). The adapter
// then unwinds the guest its own way.
func (g *GuestState) CallHost(hf *HostFunc, mem []byte, stack []uint64) (abort bool) {
	defer func() {
		if r := recover(); r != nil {
			g.Fail(&sandbox.Trap{Class: abi.HostPanic, Message: fmt.Sprintf("host function %s.%s panicked: %v (at %s)", hf.Module, hf.Name, r, PanicSite())})
			abort = true
		}
	}()
	hf.Fn(g, mem, stack)
	return g.Abort != nil
}

// PanicSite names where a recovered panic was raised, for its error
// message: the first three frames outside the Go runtime below the panic,
// innermost first ("function file:line < caller file:line < ..."). Call it
// from the deferred function that recovered.
func PanicSite() string {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	var site []string
	panicking := false
	for len(site) < 3 {
		f, more := frames.Next()
		switch {
		case f.Function == "runtime.gopanic":
			panicking = true
		case panicking && f.Function != "" && !strings.HasPrefix(f.Function, "runtime."):
			site = append(site, fmt.Sprintf("%s %s:%d", f.Function, f.File, f.Line))
		}
		if !more {
			break
		}
	}
	if len(site) == 0 {
		return "unknown"
	}
	return strings.Join(site, " < ")
}

// CacheKey names a compiled artifact: the original module's sha256 (before
// any rewrite) and everything else the artifact depends on.
func CacheKey(sum [32]byte, parts ...any) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%x", sum)
	for _, p := range parts {
		fmt.Fprintf(&b, "-%v", p)
	}
	return b.String()
}

// CompileCache is the engines' two-level cache of compiled artifacts: in
// memory for the life of the engine, and, with a directory, on disk
// (sandbox/internal/cachefile: checksummed, a bad entry reads as a miss). Entries
// are keyed by CacheKey. Safe for concurrent use; builds of one cache are
// serialised.
type CompileCache[T any] struct {
	mu   sync.Mutex
	mem  map[string]T
	disk *cachefile.Dir
	// encode is the payload stored on disk; false to store nothing.
	encode func(T) ([]byte, bool)
}

// NewCompileCache returns a cache, on disk in root/name when root (the
// configured cache directory) is not "". encode gives an artifact's
// on-disk payload (false: keep it in memory only). A cache directory
// someone other than the host's user could write is refused
// (cachefile.UntrustedError).
func NewCompileCache[T any](root, name string, encode func(T) ([]byte, bool)) (*CompileCache[T], error) {
	c := &CompileCache[T]{mem: map[string]T{}, encode: encode}
	if root != "" {
		d, err := cachefile.Open(root, name)
		if err != nil {
			return nil, err
		}
		c.disk = d
	}
	return c, nil
}

// Get returns the artifact under key: from memory, from disk (decode reads
// the payload's file; false for one it cannot use, which is then rebuilt),
// or built now and then stored in both.
func (c *CompileCache[T]) Get(key string, decode func(path string) (T, bool), build func() (T, error)) (T, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.mem[key]; ok {
		return v, nil
	}
	if c.disk != nil {
		if path, ok := c.disk.GetRaw(key); ok {
			if v, ok := decode(path); ok {
				c.mem[key] = v
				return v, nil
			}
		}
	}
	v, err := build()
	if err != nil {
		return v, err
	}
	c.mem[key] = v
	if c.disk != nil {
		if payload, ok := c.encode(v); ok {
			c.disk.PutRaw(key, payload)
		}
	}
	return v, nil
}

// Close empties the memory level, passing every artifact to release.
func (c *CompileCache[T]) Close(release func(T)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range c.mem {
		if release != nil {
			release(v)
		}
		delete(c.mem, k)
	}
}

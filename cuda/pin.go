package cuda

import (
	"fmt"
	"sync"
	"time"
	"unsafe"
)

// pinCache remembers which part of each pooled instance's linear memory is
// registered with the device. An instance's memory is pinned the first
// time it serves a GPU call (its accessible extent, Base..Base+Size) and
// each part it grows by afterwards is registered on its own, because a
// wasm engine reserves far more address space than it makes accessible,
// and a registration that includes an inaccessible page fails. The
// registrations are undone when the host closes the instance.
type pinCache struct {
	dev Device
	mu  sync.Mutex
	m   map[uint64]*pinnedMemory
}

// pinnedMemory is one instance's registered memory. Its own lock keeps a
// long registration (10-22 ms per 64 MiB) from holding up calls on other
// instances; one instance serves one call at a time, so it is rarely
// contended.
type pinnedMemory struct {
	mu      sync.Mutex
	base    unsafe.Pointer
	size    uint64           // registered extent from base
	regions []unsafe.Pointer // the start of each registration
	refused error            // a registration failed: this instance is not pinned again
}

// pinResult is what ensure did.
type pinResult struct {
	pinned bool          // registered something now
	bytes  uint64        // how much
	took   time.Duration // how long registering took
	// regions is the start of each registration, in address order; each
	// ends where the next starts. A copy must not cross from one into the
	// next (the device refuses it: pinnedPieces splits it). Only the
	// instance's own call, which holds it, appends to the list, so the
	// slice stays valid for that call.
	regions []unsafe.Pointer
}

// ensure makes base..base+size of instance id registered. It fails if a
// registration fails; the instance is then never tried again (the caller
// copies another way).
func (p *pinCache) ensure(id uint64, base unsafe.Pointer, size uint64) (pinResult, error) {
	p.mu.Lock()
	pm := p.m[id]
	if pm == nil {
		pm = &pinnedMemory{base: base}
		p.m[id] = pm
	}
	p.mu.Unlock()
	pm.mu.Lock()
	defer pm.mu.Unlock()
	if pm.refused != nil {
		return pinResult{}, pm.refused
	}
	if pm.base != base {
		// The host promised stable memory; a moved base is a host bug
		// (wazero's fallback when its reservation cannot be mapped).
		// Unpin the old memory (no copy uses it: every call re-reads the
		// base) and never pin this instance again.
		pm.refused = fmt.Errorf("instance %d's memory moved from %p to %p although the engine reports it stable", id, pm.base, base)
		for _, r := range pm.regions {
			_ = p.dev.Unregister(r)
		}
		pm.regions, pm.size = nil, 0
		return pinResult{}, pm.refused
	}
	if size <= pm.size {
		return pinResult{regions: pm.regions}, nil
	}
	start := unsafe.Add(base, pm.size)
	n := size - pm.size
	t0 := time.Now()
	if err := p.dev.Register(start, n); err != nil {
		pm.refused = fmt.Errorf("pinning %d bytes of instance %d's memory: %w", n, id, err)
		return pinResult{}, pm.refused
	}
	took := time.Since(t0)
	pm.regions = append(pm.regions, start)
	pm.size = size
	return pinResult{pinned: true, bytes: n, took: took, regions: pm.regions}, nil
}

// pinnedPieces calls fn for each part of [p, p+n) that lies within one
// registration: a range that crosses from one registration into the next
// is split where the next starts.
func pinnedPieces(regions []unsafe.Pointer, p unsafe.Pointer, n uint64, fn func(p unsafe.Pointer, off, n uint64) error) error {
	start, end := uintptr(p), uintptr(p)+uintptr(n)
	off := uint64(0)
	for _, r := range regions {
		b := uintptr(r)
		if b <= start+uintptr(off) || b >= end {
			continue
		}
		if err := fn(unsafe.Add(p, off), off, uint64(b-start)-off); err != nil {
			return err
		}
		off = uint64(b - start)
	}
	return fn(unsafe.Add(p, off), off, n-off)
}

// refused reports whether instance id could not be pinned before.
func (p *pinCache) refused(id uint64) bool {
	p.mu.Lock()
	pm := p.m[id]
	p.mu.Unlock()
	if pm == nil {
		return false
	}
	pm.mu.Lock()
	defer pm.mu.Unlock()
	return pm.refused != nil
}

// release forgets instance id and undoes its registrations. It returns the
// bytes it unpinned and the first failure.
func (p *pinCache) release(id uint64) (uint64, int, error) {
	p.mu.Lock()
	pm := p.m[id]
	delete(p.m, id)
	p.mu.Unlock()
	if pm == nil {
		return 0, 0, nil
	}
	pm.mu.Lock()
	defer pm.mu.Unlock()
	var first error
	for _, r := range pm.regions {
		if err := p.dev.Unregister(r); err != nil && first == nil {
			first = fmt.Errorf("unpinning instance %d's memory at %p: %w", id, r, err)
		}
	}
	return pm.size, len(pm.regions), first
}

// instances is the number of instances with pinned memory.
func (p *pinCache) instances() int {
	p.mu.Lock()
	pms := make([]*pinnedMemory, 0, len(p.m))
	for _, pm := range p.m {
		pms = append(pms, pm)
	}
	p.mu.Unlock()
	n := 0
	for _, pm := range pms {
		pm.mu.Lock()
		if len(pm.regions) > 0 {
			n++
		}
		pm.mu.Unlock()
	}
	return n
}

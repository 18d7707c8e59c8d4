package host

// PoolStats is a snapshot of one callback's instance pool: what an
// operator's metrics need to see that failed instances are thrown away and
// that the pool neither grows past its bound nor leaks.
type PoolStats struct {
	Live int // instances alive, idle or serving a call (at most Max)
	Idle int // instances waiting for a call
	Max  int // max_instances
	// Created counts instances created since load, the load-time probe
	// included.
	Created uint64
	// Discarded counts instances closed after a call instead of being
	// reused: every call that trapped, timed out, was cancelled or broke
	// the ABI, and, with isolation: fresh, every call.
	Discarded uint64
}

// PoolStats returns the instance pool of the named callback; false when no
// such callback is loaded. It only reads counters and takes no instance.
func (h *Host) PoolStats(name string) (PoolStats, bool) {
	h.mu.RLock()
	c, ok := h.callbacks[name]
	h.mu.RUnlock()
	if !ok {
		return PoolStats{}, false
	}
	return c.pool.stats(), true
}

// stats is the pool's snapshot.
func (p *pool) stats() PoolStats {
	p.mu.Lock()
	st := PoolStats{Live: p.live, Idle: len(p.idle), Max: cap(p.slots)}
	p.mu.Unlock()
	st.Created, st.Discarded = p.created.Load(), p.discarded.Load()
	return st
}

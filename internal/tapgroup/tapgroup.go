// Package tapgroup runs unordered taps: fire-and-forget side-effect calls
// (JAX's id_tap outside an ordered chain) whose first error is kept until
// the caller collects it at a barrier. It is the one implementation behind
// host.Host's Tap and Barrier and lowering's unordered io_call taps.
package tapgroup

import (
	"context"
	"sync"
)

// Group is a set of pending taps. Its zero value is ready to use; it is
// safe for concurrent use.
type Group struct {
	mu      sync.Mutex
	pending int
	idle    chan struct{} // closed while pending == 0; nil: none started yet
	first   error
}

// Go runs call on its own goroutine; its error, if it is the first since
// the last Take, is kept for Take.
func (g *Group) Go(call func() error) {
	g.mu.Lock()
	if g.pending == 0 {
		g.idle = make(chan struct{})
	}
	g.pending++
	g.mu.Unlock()
	go func() {
		err := call()
		g.mu.Lock()
		if err != nil && g.first == nil {
			g.first = err
		}
		g.pending--
		if g.pending == 0 {
			close(g.idle)
		}
		g.mu.Unlock()
	}()
}

// Wait waits until no tap is pending, or ctx is done (its error).
func (g *Group) Wait(ctx context.Context) error {
	g.mu.Lock()
	idle := g.idle
	g.mu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Take returns the first error among the taps since the previous Take,
// and clears it.
func (g *Group) Take() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	err := g.first
	g.first = nil
	return err
}

//go:build cgo

package wasmtime

import (
	"sync"
	"time"

	wt "github.com/bytecodealliance/wasmtime-go/v39"
)

// epochTicker advances every wasmtime engine's epoch at a fixed interval,
// but only while at least one guest call is running, so an idle host costs
// no wake-ups. Each store's deadline is one tick ahead; at every tick the
// engine calls back into callboxEpochTick, which checks the call's real
// deadline and context.
type epochTicker struct {
	interval time.Duration
	mu       sync.Mutex
	engines  []*wt.Engine
	active   int
	running  bool
	stop     chan struct{}
	done     chan struct{}
	closed   bool
}

func newEpochTicker(interval time.Duration) *epochTicker {
	return &epochTicker{interval: interval}
}

func (t *epochTicker) add(e *wt.Engine) {
	t.mu.Lock()
	t.engines = append(t.engines, e)
	t.mu.Unlock()
}

// enter marks a call as running, starting the ticker if needed.
func (t *epochTicker) enter() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.active++
	if !t.running && !t.closed {
		t.running = true
		t.stop = make(chan struct{})
		t.done = make(chan struct{})
		go t.run(t.stop, t.done)
	}
}

// exit marks a call as finished.
func (t *epochTicker) exit() {
	t.mu.Lock()
	t.active--
	t.mu.Unlock()
}

func (t *epochTicker) run(stop, done chan struct{}) {
	defer close(done)
	tk := time.NewTicker(t.interval)
	defer tk.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tk.C:
		}
		t.mu.Lock()
		if t.active == 0 {
			// Idle: stop ticking until the next call.
			t.running = false
			t.mu.Unlock()
			return
		}
		for _, e := range t.engines {
			e.IncrementEpoch()
		}
		t.mu.Unlock()
	}
}

// close stops the ticker and waits for its goroutine.
func (t *epochTicker) close() {
	t.mu.Lock()
	t.closed = true
	running, stop, done := t.running, t.stop, t.done
	t.running = false
	t.mu.Unlock()
	if running {
		close(stop)
		<-done
	}
}

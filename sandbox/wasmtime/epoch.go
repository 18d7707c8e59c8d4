//go:build cgo

package wasmtime

import (
	"sync"
	"sync/atomic"
	"time"

	wt "github.com/bytecodealliance/wasmtime-go/v39"
)

// epochTicker advances every wasmtime engine's epoch at a fixed interval,
// but only while at least one guest call is running, so an idle host costs
// no wake-ups. Each store's deadline is one tick ahead; at every tick the
// engine calls back into callboxEpochTick, which checks the call's real
// deadline and context. enter and exit are lock-free: they run on every
// call.
type epochTicker struct {
	interval time.Duration
	engines  atomic.Pointer[[]*wt.Engine]
	active   atomic.Int64
	running  atomic.Bool
	closed   atomic.Bool
	mu       sync.Mutex // serialises add
	stop     chan struct{}
	wg       sync.WaitGroup
}

func newEpochTicker(interval time.Duration) *epochTicker {
	t := &epochTicker{interval: interval, stop: make(chan struct{})}
	t.engines.Store(&[]*wt.Engine{})
	return t
}

func (t *epochTicker) add(e *wt.Engine) {
	t.mu.Lock()
	defer t.mu.Unlock()
	next := append(append([]*wt.Engine(nil), *t.engines.Load()...), e)
	t.engines.Store(&next)
}

// enter marks a call as running, starting the ticker if it is idle.
func (t *epochTicker) enter() {
	t.active.Add(1)
	t.wake()
}

func (t *epochTicker) wake() {
	if !t.running.Load() && !t.closed.Load() && t.running.CompareAndSwap(false, true) {
		t.wg.Add(1)
		go t.run()
	}
}

// exit marks a call as finished.
func (t *epochTicker) exit() { t.active.Add(-1) }

func (t *epochTicker) run() {
	defer t.wg.Done()
	tk := time.NewTicker(t.interval)
	defer tk.Stop()
	for {
		select {
		case <-t.stop:
			t.running.Store(false)
			return
		case <-tk.C:
		}
		if t.active.Load() == 0 {
			// Idle: stop. A call that entered after the load saw running
			// still true and did not start a ticker, so look once more.
			t.running.Store(false)
			if t.active.Load() == 0 || !t.running.CompareAndSwap(false, true) {
				return
			}
		}
		for _, e := range *t.engines.Load() {
			e.IncrementEpoch()
		}
	}
}

// close stops the ticker and waits for its goroutine.
func (t *epochTicker) close() {
	if t.closed.Swap(true) {
		return
	}
	close(t.stop)
	t.wg.Wait()
}

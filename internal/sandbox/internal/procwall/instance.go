//go:build linux

package procwall

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/internal/sandbox/internal/engine"
)

// Restart backoff: after a worker dies, the next one starts at once;
// after more deaths, each of a worker that lived less than stableAfter,
// each restart waits twice as long as the one before, up to maxBackoff. An
// instantiation that comes sooner waits for the restart when its deadline
// allows (asleep, not spinning), and otherwise fails at once as
// WorkerDied without starting anything, so a module that crashes every
// worker costs the host one process start per backoff period. A worker
// that lived stableAfter or longer starts the count again.
const (
	firstBackoff = 10 * time.Millisecond
	maxBackoff   = 2 * time.Second
	stableAfter  = time.Second
)

// liveWorker returns the module's worker, starting a new one when the
// last has died (and the backoff allows: see above). deadline is the
// instantiation's (zero: none).
func (m *module) liveWorker(ctx context.Context, deadline time.Time) (*worker, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for {
		if m.closed {
			return nil, errors.New("the module is closed")
		}
		if m.w != nil && m.w.alive() {
			return m.w, nil
		}
		if m.w != nil && !m.w.closing.Load() {
			m.died(m.w) // it died between calls
			m.w.close()
			m.w = nil
		}
		now := time.Now()
		if !now.Before(m.nextTry) {
			break
		}
		if cd, ok := ctx.Deadline(); ok && (deadline.IsZero() || cd.Before(deadline)) {
			deadline = cd
		}
		if !deadline.IsZero() && deadline.Before(m.nextTry) {
			return nil, &engine.Trap{Class: abi.WorkerDied, Message: fmt.Sprintf(
				"its worker died %d times in a row; the next start is in %v, past this call's deadline", m.crashes, m.nextTry.Sub(now).Round(time.Millisecond))}
		}
		wait := time.NewTimer(m.nextTry.Sub(now))
		m.mu.Unlock()
		select {
		case <-wait.C:
		case <-ctx.Done():
		}
		wait.Stop()
		m.mu.Lock()
		if err := ctx.Err(); err != nil {
			return nil, engine.InterruptTrap(ctx, m.cfg.Limits.Timeout)
		}
	}
	if m.w != nil {
		m.w.close()
	}
	m.w = nil
	w, err := m.start(ctx)
	if err != nil {
		m.died(nil)
		return nil, err
	}
	m.w = w
	return w, nil
}

// died counts the death of w (nil: one that never started) against the
// backoff (m.mu held).
func (m *module) died(w *worker) {
	if w != nil && time.Since(w.started) >= stableAfter {
		m.crashes = 0
	}
	m.crashes++
	if m.crashes > 1 {
		m.nextTry = time.Now().Add(min(firstBackoff<<(m.crashes-2), maxBackoff))
	}
}

// workerDied is called by an instance that saw its worker die.
func (m *module) workerDied(w *worker) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.w == w && !w.closing.Load() {
		m.died(w)
		m.w.close()
		m.w = nil
	}
}

// Close implements engine.Module: it ends the worker.
func (m *module) Close(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	if m.w != nil {
		m.w.close()
		m.w = nil
	}
	return nil
}

// Report returns the hardening report of the module's current worker.
func (m *module) Report() Report {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.w == nil {
		return Report{}
	}
	return m.w.report
}

// WorkerPID is the process id of the module's current worker (0: none).
func (m *module) WorkerPID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.w == nil || m.w.dead.Load() {
		return 0
	}
	return m.w.pid
}

// Instantiate implements engine.Module: the worker instantiates the
// module on a new socket and sends back the guest memory's file.
func (m *module) Instantiate(ctx context.Context, deadline time.Time) (engine.Instance, error) {
	w, err := m.liveWorker(ctx, deadline)
	if err != nil {
		return nil, fmt.Errorf("instantiate: %w", err)
	}
	host, child, err := socketPair()
	if err != nil {
		return nil, fmt.Errorf("instantiate: instance socket: %w", err)
	}
	i := &instance{m: m, w: w, sock: host, id: m.e.id.Add(1), state: engine.NewGuestState(&m.cfg.Limits, m.cfg.Logger)}
	var e enc
	e.reset(opInstance)
	e.u64(i.id)
	e.i64(deadlineNanos(time.Until(deadline).Nanoseconds(), !deadline.IsZero()))
	err = w.control(e.b, child)
	closeFD(child)
	if err != nil {
		return nil, i.lost(ctx, err)
	}
	msg, fd, err := i.roundTrip(ctx, deadline, nil)
	if err != nil {
		return nil, err
	}
	d := dec{b: msg}
	if d.u8() != opInstantiated {
		closeFD(fd)
		return nil, i.broken("instantiate", errors.New("unexpected reply"))
	}
	if err := d.error(); err != nil {
		closeFD(fd)
		i.close()
		return nil, err
	}
	reserved, size := d.u64(), d.u64()
	if d.err != nil || fd < 0 {
		closeFD(fd)
		return nil, i.broken("instantiate", fmt.Errorf("no memory file (%v)", d.err))
	}
	hm, err := mapMemory(fd, reserved)
	if err != nil {
		closeFD(fd)
		return nil, i.broken("instantiate", err)
	}
	i.mem = hm
	if i.view, err = hm.view(size); err != nil {
		return nil, i.broken("instantiate", err)
	}
	i.SetDeadline(deadline)
	return i, nil
}

// instance is one guest instance living in the worker.
type instance struct {
	m        *module
	w        *worker
	sock     int
	id       uint64
	seq      atomic.Uint64 // the call in progress, for opCancel
	mem      *hostMemory
	view     []byte
	state    *engine.GuestState
	deadline time.Time
	fuel     uint64
	fuelOK   bool
	gone     atomic.Bool // the socket is closed: the instance is dead
	kill     *time.Timer // kills the worker at a deadline (armKill)
	e        enc
	rbuf     []byte
}

var (
	_ engine.Instance     = (*instance)(nil)
	_ engine.StableMemory = (*instance)(nil)
	_ engine.Liveness     = (*instance)(nil)
)

// roundTrip sends e (nil: nothing, just read) and reads the reply. The
// worker is killed when the reply has not come by deadline plus the kill
// grace; a canceled ctx is passed on to the worker (opCancel), which
// stops the guest, and kills it if it still has not answered after the
// grace.
func (i *instance) roundTrip(ctx context.Context, deadline time.Time, e *enc) ([]byte, int, error) {
	if !deadline.IsZero() {
		i.armKill(deadline.Add(i.m.e.o.KillGrace))
	}
	var cancelStop func() bool
	if ctx.Done() != nil {
		seq := i.seq.Load()
		cancelStop = context.AfterFunc(ctx, func() {
			var c enc
			c.reset(opCancel)
			c.u64(i.id)
			c.u64(seq)
			_ = i.w.control(c.b, -1)
			time.AfterFunc(i.m.e.o.KillGrace, func() {
				if i.seq.Load() == seq && !i.gone.Load() {
					i.w.kill()
				}
			})
		})
	}
	var err error
	if e != nil {
		err = send(i.sock, e.b, -1)
	}
	var msg []byte
	fd := -1
	if err == nil {
		msg, fd, err = recv(i.sock, i.rbuf, maxMessage, e == nil) // only the instantiation's reply carries a descriptor
	}
	if !deadline.IsZero() {
		i.kill.Stop()
	}
	if cancelStop != nil {
		cancelStop()
	}
	if err != nil {
		return nil, -1, i.lost(ctx, err)
	}
	if len(msg) <= maxPacket {
		i.rbuf = msg[:cap(msg)]
	}
	return msg, fd, nil
}

// armKill arms the instance's one kill timer (made on first use, reset
// for every later exchange: no allocation per call) to kill the worker at
// when, as a deadline kill.
func (i *instance) armKill(when time.Time) {
	if i.kill == nil {
		w := i.w
		i.kill = time.AfterFunc(time.Until(when), func() { w.deadlineKill.Store(true); w.kill() })
		return
	}
	i.kill.Reset(time.Until(when))
}

// lost turns a failed exchange into the call's error: the worker died.
func (i *instance) lost(ctx context.Context, err error) error {
	i.close()
	if !errors.Is(err, errPeerGone) {
		i.w.kill()
	}
	text := i.w.exitText()
	i.m.workerDied(i.w)
	if i.w.deadlineKill.Load() {
		t := engine.TimeoutTrap(i.state.Limits().Timeout, "the guest did not stop at its deadline, so its worker was killed: "+text)
		return t
	}
	if cerr := ctx.Err(); cerr != nil {
		t := engine.InterruptTrap(ctx, i.state.Limits().Timeout)
		t.Message += " (the guest did not stop, so its worker was killed: " + text + ")"
		return t
	}
	return &engine.Trap{Class: abi.WorkerDied, Message: "worker died: " + text}
}

// broken fails an instance whose worker broke the protocol: the worker
// is killed, and the error says what it did.
func (i *instance) broken(what string, err error) error {
	i.close()
	i.w.kill()
	i.m.workerDied(i.w)
	return &engine.Trap{Class: abi.WorkerDied, Message: fmt.Sprintf("worker pid %d broke the protocol (%s: %v) and was killed", i.w.pid, what, err)}
}

// Alive implements engine.Liveness: false once the instance or its worker
// is known dead, or when the instance's socket has hung up (a worker the
// kernel has ended, but the host not yet reaped), so the pool never hands
// a call an instance whose worker is gone.
func (i *instance) Alive() bool {
	return !i.gone.Load() && !i.w.dead.Load() && !hungUp(i.sock)
}

// hungUp reports, without blocking, whether the other end of sock is gone.
func hungUp(sock int) bool {
	fds := []unix.PollFd{{Fd: int32(sock), Events: unix.POLLRDHUP}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&(unix.POLLHUP|unix.POLLRDHUP|unix.POLLERR|unix.POLLNVAL) != 0
}

// MemoryStable implements engine.StableMemory: the host's mapping never
// moves.
func (i *instance) MemoryStable() bool { return true }

// Export implements engine.Instance.
func (i *instance) Export(name string, params, results []engine.ValType) (engine.Function, error) {
	if !i.Alive() {
		return nil, &engine.Trap{Class: abi.WorkerDied, Message: "worker died: the instance's worker is gone"}
	}
	i.e.reset(opExport)
	i.e.str(name)
	i.e.bytes(valBytes(params))
	i.e.bytes(valBytes(results))
	msg, fd, err := i.roundTrip(context.Background(), i.deadline, &i.e)
	closeFD(fd)
	if err != nil {
		return nil, err
	}
	d := dec{b: msg}
	if d.u8() != opExported {
		return nil, i.broken("export", errors.New("unexpected reply"))
	}
	if err := d.error(); err != nil {
		return nil, err
	}
	idx := d.u32()
	if d.err != nil {
		return nil, i.broken("export", d.err)
	}
	return function(idx), nil
}

// function is an export's index in the worker's table.
type function uint32

func valBytes(v []engine.ValType) []byte {
	b := make([]byte, len(v))
	for k, t := range v {
		b[k] = byte(t)
	}
	return b
}

// SetDeadline implements engine.Instance.
func (i *instance) SetDeadline(deadline time.Time) { i.deadline = deadline }

// Call implements engine.Instance: one round trip to the worker.
func (i *instance) Call(ctx context.Context, fn engine.Function, stack []uint64) error {
	f, ok := fn.(function)
	if !ok {
		return fmt.Errorf("not a function of this instance: %T", fn)
	}
	if !i.Alive() {
		return &engine.Trap{Class: abi.WorkerDied, Message: "worker died: the instance's worker is gone"}
	}
	seq := i.seq.Add(1)
	now := time.Now()
	i.e.reset(opCall)
	i.e.u32(uint32(f))
	i.e.i64(deadlineNanos(i.deadline.Sub(now).Nanoseconds(), !i.deadline.IsZero()))
	cd, hasCD := ctx.Deadline()
	i.e.i64(deadlineNanos(cd.Sub(now).Nanoseconds(), hasCD))
	i.e.u64(seq)
	i.e.u32(uint32(len(stack)))
	for _, v := range stack {
		i.e.u64(v)
	}
	deadline := i.deadline
	if hasCD && (deadline.IsZero() || cd.Before(deadline)) {
		deadline = cd
	}
	msg, fd, err := i.roundTrip(ctx, deadline, &i.e)
	closeFD(fd)
	if err != nil {
		return err
	}
	d := dec{b: msg}
	if d.u8() != opReturned {
		return i.broken("call", errors.New("unexpected reply"))
	}
	callErr, size, err := i.decodeReturned(ctx, &d, stack)
	if err != nil {
		return i.broken("call", err)
	}
	if i.view, err = i.mem.view(size); err != nil {
		return i.broken("call", err)
	}
	if callErr != nil {
		if t, ok := engine.AsTrap(callErr); ok && (t.Class == abi.Timeout || t.Class == abi.Canceled) && ctx.Err() != nil {
			t.Cause = ctx.Err() // the caller's context ended it, as in process
		}
		return callErr
	}
	return nil
}

// decodeReturned reads an opReturned reply after its op: the guest's
// error, the stack (which must have as many values as were sent), the
// memory's size, the guest state (into i.state), the fuel and the log
// lines (logged on the callback's logger). err is a reply the host cannot
// trust; every length in it is bounds-checked by d.
func (i *instance) decodeReturned(ctx context.Context, d *dec, stack []uint64) (callErr error, size uint64, err error) {
	callErr = d.error()
	if n := d.count(8, "stack values"); n != len(stack) && d.err == nil {
		return nil, 0, fmt.Errorf("%d stack values back for %d sent", n, len(stack))
	}
	for k := range stack {
		stack[k] = d.u64()
	}
	size = d.u64()
	st := i.state
	st.Begin(ctx)
	st.ErrorMessage = workerText(d.str(), st.Limits().MaxError+engine.CapSlack)
	st.LogBytes, st.LogDropped = d.u64(), d.u64()
	st.MemoryDenied = d.bool()
	if d.bool() {
		st.Abort = d.trap()
	}
	i.fuel, i.fuelOK = d.u64(), d.bool()
	emitLogs(ctx, d, i.m.cfg.Logger, st.Limits().MaxLog)
	st.End() // logs the capped warning, as in process
	if d.err != nil {
		return nil, 0, d.err
	}
	return callErr, size, nil
}

// Memory implements engine.Instance: the host's view of the guest's
// memory, as long as the worker last reported it.
func (i *instance) Memory() []byte { return i.view }

// State implements engine.Instance.
func (i *instance) State() *engine.GuestState { return i.state }

// FuelConsumed implements engine.Instance.
func (i *instance) FuelConsumed() (uint64, bool) { return i.fuel, i.fuelOK }

// Close implements engine.Instance.
func (i *instance) Close(context.Context) error {
	if !i.gone.Load() {
		i.e.reset(opClose)
		_ = send(i.sock, i.e.b, -1)
	}
	i.close()
	return nil
}

func (i *instance) close() {
	if i.gone.Swap(true) {
		return
	}
	closeFD(i.sock)
	if i.mem != nil {
		i.mem.close()
	}
	i.view = nil
}

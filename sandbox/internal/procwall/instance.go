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
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/core"
)

// Restart backoff: a worker that dies before it answered madeProgress
// calls (it crashed while starting, instantiating, or in the first call a
// new instance takes after its callbox_alloc) counts towards a crash loop;
// one that answered more does not, however soon it died after (a kill -9
// from outside, the OOM killer): it was making progress. After the first crash of a
// loop the next worker starts at once; after more, each start waits
// twice as long as the one before, up to maxBackoff. An instantiation
// that comes sooner waits for the restart when its deadline allows
// (asleep, not spinning), and otherwise fails at once as WorkerDied
// without starting anything, so a module that crashes every worker costs
// the host one process start per backoff period.
const (
	firstBackoff = 10 * time.Millisecond
	maxBackoff   = 2 * time.Second
	madeProgress = 2
)

// liveWorker returns the module's worker, starting a new one when the
// last has died. One start serves every caller: it runs on a goroutine of
// its own, bounded by startTimeout, and each caller waits for it only as
// long as its own deadline (the instantiation's; zero: none) and context
// allow, so no caller's end kills a start the others wait for.
func (m *module) liveWorker(ctx context.Context, deadline time.Time) (*worker, error) {
	if cd, ok := ctx.Deadline(); ok && (deadline.IsZero() || cd.Before(deadline)) {
		deadline = cd
	}
	var expired <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		expired = t.C
	}
	m.mu.Lock()
	for {
		if m.closed {
			m.mu.Unlock()
			return nil, errors.New("the module is closed")
		}
		if m.w != nil && m.w.alive() {
			w := m.w
			m.mu.Unlock()
			return w, nil
		}
		if m.w != nil && !m.w.closing.Load() {
			m.w.close() // it died between calls
			m.died(m.w)
			m.w = nil
		}
		if m.starting == nil {
			now := time.Now()
			if !deadline.IsZero() && deadline.Before(m.nextTry) {
				m.mu.Unlock()
				return nil, &sandbox.Trap{Class: abi.WorkerDied, Message: fmt.Sprintf(
					"its worker died %d times in a row, each time before it had answered %d calls; the next start is in %v, past this call's deadline", m.crashes, madeProgress, m.nextTry.Sub(now).Round(time.Millisecond))}
			}
			m.starting = make(chan struct{})
			ctx, cancel := context.WithCancel(context.Background())
			m.cancelStart = cancel
			go m.restart(ctx, m.starting, m.nextTry)
		}
		started := m.starting
		m.mu.Unlock()
		select {
		case <-started:
		case <-ctx.Done():
			t := core.InterruptTrap(ctx, m.cfg.Limits.Timeout)
			t.Message += " (waiting for its worker to start)"
			return nil, t
		case <-expired:
			return nil, core.TimeoutTrap(m.cfg.Limits.Timeout, "waiting for its worker to start")
		}
		m.mu.Lock()
		if m.startErr != nil && (m.w == nil || !m.w.alive()) {
			err := m.startErr
			m.mu.Unlock()
			return nil, err
		}
	}
}

// restart starts a worker for the module at notBefore (the backoff's
// earliest start), on its own goroutine, and hands it to the waiters
// (closing started). ctx ends only when the module closes.
func (m *module) restart(ctx context.Context, started chan struct{}, notBefore time.Time) {
	var w *worker
	err := ctx.Err()
	if wait := time.Until(notBefore); wait > 0 && err == nil {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			err = ctx.Err()
		}
		t.Stop()
	}
	if err == nil {
		w, err = m.start(ctx)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cancelStart()
	m.starting, m.startErr = nil, err
	switch {
	case err != nil:
		m.died(nil)
	case m.closed:
		w.close()
	default:
		m.w = w
		if ev := m.cfg.Workers; ev != nil {
			ev.WorkerStarted()
		}
	}
	close(started)
}

// died counts the death of w (nil: one that never started) against the
// backoff (m.mu held): a worker that served resets the count instead. The
// module's WorkerEvents hears of it.
func (m *module) died(w *worker) {
	if ev := m.cfg.Workers; ev != nil {
		cause := "start_failed"
		if w != nil {
			cause = w.cause() // it has been reaped: close waited for it
		}
		ev.WorkerDied(cause)
	}
	if w != nil && w.answered.Load() >= madeProgress {
		m.crashes, m.nextTry = 0, time.Time{}
		return
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
		m.w.close()
		m.died(w)
		m.w = nil
	}
}

// Close implements core.Module: it ends the worker.
// A restart in progress is stopped (its worker killed) and waited for,
// so that no worker outlives its module.
func (m *module) Close(context.Context) error {
	m.mu.Lock()
	m.closed = true
	if m.w != nil {
		m.w.close()
		m.w = nil
	}
	started, cancel := m.starting, m.cancelStart
	m.mu.Unlock()
	if started != nil {
		cancel()
		<-started
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

// Instantiate implements core.Module: the worker instantiates the
// module on a new socket and sends back the guest memory's file.
func (m *module) Instantiate(ctx context.Context, deadline time.Time) (sandbox.Instance, error) {
	w, err := m.liveWorker(ctx, deadline)
	if err != nil {
		return nil, fmt.Errorf("instantiate: %w", err)
	}
	host, child, err := socketPair()
	if err != nil {
		return nil, fmt.Errorf("instantiate: instance socket: %w", err)
	}
	i := &instance{m: m, w: w, sock: host, id: m.e.id.Add(1), state: core.NewGuestState(&m.cfg.Limits, m.cfg.Logger)}
	var e enc
	e.reset(opInstance)
	e.u64(i.id)
	e.i64(deadlineNanos(time.Until(deadline).Nanoseconds(), !deadline.IsZero()))
	err = w.control(e.b, child)
	closeFD(child)
	if err != nil {
		return nil, i.lost(ctx, fmt.Errorf("%w: %w", errNotSent, err))
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
		err = i.broken("instantiate", err)
		i.release()
		return nil, err
	}
	i.SetDeadline(deadline)
	if !m.e.o.SocketOnly {
		i.ringBell(ctx, deadline)
	}
	return i, nil
}

// ringBell sets up the instance's doorbell (bell.go). Where it cannot (no
// memfd, a worker that could not map it), the instance keeps the socket
// for every exchange: slower, the same otherwise.
func (i *instance) ringBell(ctx context.Context, deadline time.Time) {
	fd, err := newBellFile()
	if err != nil {
		return
	}
	b, err := mapBell(fd, hostSpin)
	if err != nil {
		closeFD(fd)
		return
	}
	i.e.reset(opBell)
	err = send(i.sock, i.e.b, fd)
	closeFD(fd)
	if err != nil {
		b.close()
		return
	}
	msg, rfd, err := i.roundTrip(ctx, deadline, nil)
	closeFD(rfd)
	d := dec{b: msg}
	if err != nil || d.u8() != opBellReady || d.error() != nil {
		b.close()
		return
	}
	i.bell = b
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
	state    *core.GuestState
	deadline time.Time
	fuel     uint64
	fuelOK   bool
	gone     atomic.Bool // the socket is closed: the instance is dead
	kill     *time.Timer // kills the worker past a deadline (armKill)
	// grace is the kill grace of the exchange in progress (for its
	// error's words).
	grace time.Duration
	e     enc
	rbuf  []byte
	// bell is the instance's doorbell (nil: every exchange on the socket)
	// and bseq its last request's sequence.
	bell *bell
	bseq uint32
}

var (
	_ sandbox.Instance     = (*instance)(nil)
	_ sandbox.StableMemory = (*instance)(nil)
	_ sandbox.Liveness     = (*instance)(nil)
)

// roundTrip sends e (nil: nothing, just read) and reads the reply. The
// worker stops a guest at its deadline by itself; the host kills the
// worker only when no reply has come by deadline plus the kill grace
// (grace.go), naming this instance as the culprit. A canceled ctx is
// passed on to the worker (opCancel), which stops the guest, and the
// worker is killed the same way if it has still not answered after the
// grace. A failed send (the worker is gone) is the errNotSent error: the
// worker never saw the request.
func (i *instance) roundTrip(ctx context.Context, deadline time.Time, e *enc) ([]byte, int, error) {
	i.grace = i.m.e.killGrace()
	if !deadline.IsZero() {
		i.armKill(deadline.Add(i.grace))
	}
	var cancelStop func() bool
	if ctx.Done() != nil {
		seq, grace := i.seq.Load(), i.grace
		cancelStop = context.AfterFunc(ctx, func() {
			var c enc
			c.reset(opCancel)
			c.u64(i.id)
			c.u64(seq)
			_ = i.w.control(c.b, -1)
			time.AfterFunc(grace, func() {
				if i.seq.Load() == seq && !i.gone.Load() {
					i.w.killFor(i.culprit())
				}
			})
		})
	}
	var err error
	var msg []byte
	fd := -1
	switch {
	case i.bell != nil && e != nil:
		msg, err = i.ring(e.b)
	default:
		if e != nil {
			if err = send(i.sock, e.b, -1); err != nil {
				err = fmt.Errorf("%w: %w", errNotSent, err)
			}
		}
		if err == nil {
			msg, fd, err = recv(i.sock, i.rbuf, maxMessage, e == nil) // only the instantiation's reply carries a descriptor
		}
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

// ring is one exchange through the doorbell: the request posted (on the
// socket when it does not fit), the reply awaited and copied out of the
// shared page (or read from the socket where the worker put it there).
// A worker that died before it took the request never saw it
// (errNotSent).
func (i *instance) ring(req []byte) ([]byte, error) {
	b := i.bell
	i.bseq++
	seq := i.bseq
	if len(req) <= areaMax {
		b.post(offReqSeq, offReqLen, reqArea, offWorkerZz, req, uint32(len(req)), seq)
	} else {
		b.post(offReqSeq, offReqLen, reqArea, offWorkerZz, nil, lenOnSocket, seq)
		if err := send(i.sock, req, -1); err != nil {
			return nil, fmt.Errorf("%w: %w", errNotSent, err)
		}
	}
	if _, err := b.await(offRepSeq, offHostZz, seq, true, i.peerAlive); err != nil {
		if b.word(offAckSeq).Load() != seq {
			return nil, fmt.Errorf("%w: %w", errNotSent, errPeerGone)
		}
		return nil, errPeerGone
	}
	n := b.word(offRepLen).Load()
	switch {
	case n == lenOnSocket:
		msg, fd, err := recv(i.sock, i.rbuf, maxMessage, false)
		closeFD(fd)
		return msg, err
	case n > areaMax:
		return nil, fmt.Errorf("the worker's reply claims %d bytes in the doorbell, which holds %d", n, areaMax)
	}
	if cap(i.rbuf) < int(n) {
		i.rbuf = make([]byte, max(int(n), maxPacket))
	}
	msg := i.rbuf[:n]
	copy(msg, b.mem[repArea:repArea+int(n)])
	return msg, nil
}

// peerAlive is the doorbell's check of a worker it waits for: not reaped,
// the socket not hung up, the instance not closed.
func (i *instance) peerAlive() bool {
	select {
	case <-i.w.exited:
		return false
	default:
	}
	return !i.gone.Load() && !hungUp(i.sock)
}

// armKill arms the instance's one kill timer (made on first use, reset
// for every later exchange: no allocation per call) to kill the worker at
// when, naming this instance as the culprit.
func (i *instance) armKill(when time.Time) {
	if i.kill == nil {
		i.kill = time.AfterFunc(time.Until(when), func() { i.w.killFor(i.culprit()) })
		return
	}
	i.kill.Reset(time.Until(when))
}

// culprit is the kill reason of a worker killed because this instance's
// exchange did not end within the grace: what every other call on the
// worker is told.
func (i *instance) culprit() *killReason {
	return &killReason{culprit: i.id, cause: "killed_unresponsive", what: fmt.Sprintf(
		"the host killed it because another call of callback %q did not end within %v of its deadline or cancellation", i.m.cfg.Name, i.grace)}
}

// errNotSent marks a request the worker never received (the send
// failed): nothing of the call ran.
var errNotSent = errors.New("the request was not sent")

// lost turns a failed exchange into the call's error: the worker died.
// A call fails for its own reasons only: when the host killed the worker
// because this very exchange would not end, the call is its own Timeout
// (or Canceled); when it killed it because of another call, this call is
// WorkerDied naming that cause; any other death is WorkerDied naming the
// signal or status. A request that never reached the worker is marked
// core.ErrNotStarted, so the host may run the call on a new worker.
func (i *instance) lost(ctx context.Context, err error) error {
	i.close()
	if !errors.Is(err, errPeerGone) && !errors.Is(err, errNotSent) {
		i.w.killFor(&killReason{what: "the host lost its connection to it (" + err.Error() + ")", cause: "killed_protocol"})
	}
	text := i.w.exitText()
	i.m.workerDied(i.w)
	if r := i.w.killed.Load(); r != nil {
		if r.culprit == i.id {
			t := i.stopped(ctx)
			t.Message += fmt.Sprintf(" (its worker did not answer within %v, so it was killed: %s)", i.grace, text)
			return t
		}
		return &sandbox.Trap{Class: abi.WorkerDied, Message: "worker died: " + r.what + ": " + text}
	}
	t := &sandbox.Trap{Class: abi.WorkerDied, Message: "worker died: " + text}
	if errors.Is(err, errNotSent) {
		t.Message = "worker died before the call reached it: " + text
		t.Cause = sandbox.ErrNotStarted
	}
	return t
}

// stopped is the trap of an exchange this instance's own deadline or its
// caller's context ended: the caller's context decides when it is done
// (a deadline is a Timeout, a cancellation Canceled), else the callback's
// timeout.
func (i *instance) stopped(ctx context.Context) *sandbox.Trap {
	if ctx.Err() != nil {
		return core.InterruptTrap(ctx, i.state.Limits().Timeout)
	}
	return core.TimeoutTrap(i.state.Limits().Timeout, "")
}

// broken fails an instance whose worker broke the protocol: the worker
// is killed, and the error says what it did.
func (i *instance) broken(what string, err error) error {
	i.close()
	i.w.kill()
	i.m.workerDied(i.w)
	return &sandbox.Trap{Class: abi.WorkerDied, Message: fmt.Sprintf("worker pid %d broke the protocol (%s: %v) and was killed", i.w.pid, what, err)}
}

// Alive implements core.Liveness: false once the instance or its worker
// is known dead, or when the instance's socket has hung up (a worker the
// kernel has ended, but the host not yet reaped), so the pool never hands
// a call an instance whose worker is gone.
//
// With a doorbell it asks no system call (a poll of the socket costs more
// than the rest of the round trip): a worker that died and is not reaped
// yet passes, and the call's ring then finds it gone without having
// reached it (errNotSent), which the host treats as Alive's false.
func (i *instance) Alive() bool {
	if i.gone.Load() || i.w.dead.Load() {
		return false
	}
	if i.bell != nil {
		select {
		case <-i.w.exited:
			return false
		default:
			return true
		}
	}
	return !hungUp(i.sock)
}

// hungUp reports, without blocking, whether the other end of sock is gone.
func hungUp(sock int) bool {
	fds := []unix.PollFd{{Fd: int32(sock), Events: unix.POLLRDHUP}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&(unix.POLLHUP|unix.POLLRDHUP|unix.POLLERR|unix.POLLNVAL) != 0
}

// MemoryStable implements core.StableMemory: the host's mapping never
// moves.
func (i *instance) MemoryStable() bool { return true }

// Export implements core.Instance.
func (i *instance) Export(name string, params, results []sandbox.ValType) (sandbox.Function, error) {
	if !i.Alive() {
		return nil, &sandbox.Trap{Class: abi.WorkerDied, Message: "worker died: the instance's worker is gone"}
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

func valBytes(v []sandbox.ValType) []byte {
	b := make([]byte, len(v))
	for k, t := range v {
		b[k] = byte(t)
	}
	return b
}

// SetDeadline implements core.Instance.
func (i *instance) SetDeadline(deadline time.Time) { i.deadline = deadline }

// Call implements core.Instance: one round trip to the worker.
func (i *instance) Call(ctx context.Context, fn sandbox.Function, stack []uint64) error {
	f, ok := fn.(function)
	if !ok {
		return fmt.Errorf("not a function of this instance: %T", fn)
	}
	if !i.Alive() {
		return &sandbox.Trap{Class: abi.WorkerDied, Message: "worker died before the call reached it: the instance's worker is gone", Cause: sandbox.ErrNotStarted}
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
	i.w.answered.Add(1)
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
		if t, ok := sandbox.AsTrap(callErr); ok && (t.Class == abi.Timeout || t.Class == abi.Canceled) {
			if !deadline.IsZero() && !time.Now().Before(deadline) {
				i.m.e.late.observe(time.Since(deadline))
			}
			if ctx.Err() != nil {
				// The caller's context ended it, as in process: a
				// deadline is a Timeout (the worker may have seen the
				// host's cancel first), a cancellation Canceled.
				st := i.stopped(ctx)
				st.Frames = t.Frames
				return st
			}
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
	st.ErrorMessage = workerText(d.str(), st.Limits().MaxError+core.CapSlack)
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

// Memory implements core.Instance: the host's view of the guest's
// memory, as long as the worker last reported it.
func (i *instance) Memory() []byte { return i.view }

// State implements core.Instance.
func (i *instance) LastCall() sandbox.CallReport { return i.state.Report() }

// FuelConsumed implements core.Instance.
func (i *instance) FuelConsumed() (uint64, bool) { return i.fuel, i.fuelOK }

// Close implements core.Instance. It is the only place the host's
// mapping of the guest memory is released: an instance whose worker
// died keeps it until then, so a view the host took before the death
// (the frame a call renews from, a result being read) stays readable,
// holding what the memory held when the worker stopped.
func (i *instance) Close(context.Context) error {
	if !i.gone.Load() && i.bell == nil {
		i.e.reset(opClose)
		_ = send(i.sock, i.e.b, -1)
	}
	i.close()
	i.release()
	return nil
}

// close disconnects the instance from its worker (through the doorbell,
// where it has one, so the worker's side ends at once). The memory
// mapping is kept (see Close).
func (i *instance) close() {
	if i.gone.Swap(true) {
		return
	}
	if i.bell != nil {
		i.bseq++
		i.bell.post(offReqSeq, offReqLen, reqArea, offWorkerZz, nil, lenClose, i.bseq)
	}
	closeFD(i.sock)
}

// release unmaps the guest memory; the instance must be closed.
func (i *instance) release() {
	if i.mem != nil {
		i.mem.close()
		i.mem = nil
	}
	i.view = nil
	i.bell.close()
}

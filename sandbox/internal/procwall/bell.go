//go:build linux

package procwall

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The doorbell: an instance's requests and replies through a page pair
// both processes map, instead of a socket message each way.
//
// A round trip over the instance socket costs two sendmsg/read pairs and,
// when the peer sleeps in read, two wake-ups through the scheduler: 11-21
// µs for a 1 KiB call on the development VM. Through the bell, the host
// writes the request into shared memory and bumps a sequence word; a
// worker that is spinning for its next request (it spins a while after
// each reply) sees it at once, and the host spins a while for the reply.
// Either side that stops spinning sleeps on the word with a shared futex,
// and the other wakes it only when it said it sleeps, so a call between
// two spinning sides makes no system call at all. Spinning adapts: a side
// whose spins keep ending without the word changing stops spinning (and
// tries again every so often), so a machine with more callers than cores
// does not lose its CPU to spinning.
//
// The bell carries what fits its areas; a longer message, and every
// message carrying a descriptor, goes on the socket as before, the bell
// saying so (lenOnSocket). The socket stays the instance's lifeline:
// hungUp and the worker's death are seen there, and a worker waiting on
// the bell checks it every bellPoll. Nothing the worker writes into the
// bell is trusted: lengths are checked against the areas and every reply
// is copied out before it is decoded.
const (
	bellSize    = 128 << 10
	reqArea     = 4 << 10  // the request area's offset
	repArea     = 64 << 10 // the reply area's offset
	areaMax     = 60 << 10 // each area's capacity
	offReqSeq   = 0        // host -> worker: the request's sequence
	offReqLen   = 4
	offWorkerZz = 8  // the worker sleeps on offReqSeq
	offAckSeq   = 12 // the worker took this request
	offRepSeq   = 64 // worker -> host: the reply's sequence (its request's)
	offRepLen   = 68
	offHostZz   = 72 // the host sleeps on offRepSeq

	lenOnSocket uint32 = 0xFFFFFFFF // the message is on the socket
	lenClose    uint32 = 0xFFFFFFFE // the host closes the instance
)

// Spinning: how long a side spins before it sleeps, at most, and how a
// side whose spins miss backs off (halving, down to none; a full spin is
// tried again every spinRetry exchanges).
const (
	hostSpin   = 20 * time.Microsecond
	workerSpin = 50 * time.Microsecond
	spinRetry  = 64
	// pureSpins is how many looks a spin takes before it yields the core
	// between looks (sched_yield).
	pureSpins = 2048
	// bellPoll bounds a sleep on the bell: the sleeper then checks that
	// its peer is alive (the host: the worker not reaped; the worker:
	// its socket not hung up).
	bellPoll = 5 * time.Millisecond
)

// bell is one side's mapping of an instance's doorbell.
type bell struct {
	mem  []byte
	spin spinner
}

// newBellFile makes a doorbell's file (host side), sealed at its size:
// the worker it goes to could otherwise truncate it, and the host's next
// touch of its mapping would fault (SIGBUS) in the host.
func newBellFile() (int, error) {
	fd, err := unix.MemfdCreate("callbox-bell", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, fmt.Errorf("memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, bellSize); err != nil {
		closeFD(fd)
		return -1, fmt.Errorf("ftruncate: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		closeFD(fd)
		return -1, fmt.Errorf("sealing: %w", err)
	}
	return fd, nil
}

// mapBell maps a doorbell's file; the descriptor may be closed after.
func mapBell(fd int, spin time.Duration) (*bell, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("doorbell: %w", err)
	}
	if st.Size != bellSize {
		return nil, fmt.Errorf("doorbell: a file of %d bytes, not %d", st.Size, bellSize)
	}
	mem, err := unix.Mmap(fd, 0, bellSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("doorbell: mmap: %w", err)
	}
	return &bell{mem: mem, spin: spinner{max: spin, budget: spin}}, nil
}

func (b *bell) close() {
	if b != nil && b.mem != nil {
		_ = unix.Munmap(b.mem)
		b.mem = nil
	}
}

func (b *bell) word(off int) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&b.mem[off]))
}

// post publishes msg in the area at areaOff (or lenOnSocket or lenClose as
// its length: the caller passes a nil msg) as sequence seq, and wakes the
// peer if it sleeps.
func (b *bell) post(seqOff, lenOff, areaOff, sleepOff int, msg []byte, n, seq uint32) {
	if msg != nil {
		copy(b.mem[areaOff:areaOff+areaMax], msg)
	}
	b.word(lenOff).Store(n)
	b.word(seqOff).Store(seq)
	if b.word(sleepOff).Load() != 0 {
		futexWake(b.word(seqOff))
	}
}

// errBellGone: the peer stopped answering (the alive check failed).
var errBellGone = errors.New("the peer is gone")

// await waits until the word at seqOff is seq (want) or, with want false,
// differs from seq, spinning first, then sleeping on it; alive is asked
// after every bellPoll of sleep. It returns the word's value.
func (b *bell) await(seqOff, sleepOff int, seq uint32, want bool, alive func() bool) (uint32, error) {
	w := b.word(seqOff)
	done := func(v uint32) bool { return (v == seq) == want }
	if v := w.Load(); done(v) {
		return v, nil
	}
	if v, ok := b.spin.run(w, done); ok {
		return v, nil
	}
	sleep := b.word(sleepOff)
	for {
		sleep.Store(1)
		v := w.Load()
		if done(v) {
			sleep.Store(0)
			return v, nil
		}
		futexWait(w, v, bellPoll)
		sleep.Store(0)
		if v := w.Load(); done(v) {
			return v, nil
		}
		if !alive() {
			return 0, errBellGone
		}
	}
}

// spinner spins on a word for up to budget, adapting the budget to
// whether spins end in time.
type spinner struct {
	max, budget time.Duration
	misses      int
}

// run spins until done(word) or the budget is spent.
func (s *spinner) run(w *atomic.Uint32, done func(uint32) bool) (uint32, bool) {
	if s.budget <= 0 {
		if s.misses++; s.misses%spinRetry != 0 {
			return 0, false
		}
		s.budget = s.max // try a full spin again now and then
	}
	start := time.Now()
	for k := 1; ; k++ {
		if v := w.Load(); done(v) {
			s.budget = s.max
			return v, true
		}
		if k > pureSpins {
			// Past a short pure spin, give the core to any thread that
			// is ready (the peer, on a busy machine) between looks.
			_, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		}
		if k%64 == 0 && time.Since(start) >= s.budget {
			s.budget /= 2
			if s.budget < time.Microsecond {
				s.budget = 0
			}
			return 0, false
		}
	}
}

// futexWait sleeps while *w is v, for at most timeout (a shared futex: the
// word is in memory two processes map).
func futexWait(w *atomic.Uint32, v uint32, timeout time.Duration) {
	ts := unix.NsecToTimespec(timeout.Nanoseconds())
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWaitOp, uintptr(v),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// futexWake wakes the sleepers on w.
func futexWake(w *atomic.Uint32) {
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWakeOp, 1<<30, 0, 0, 0)
}

// The futex operations used (linux/futex.h), shared (not FUTEX_PRIVATE).
const (
	futexWaitOp uintptr = 0
	futexWakeOp uintptr = 1
)

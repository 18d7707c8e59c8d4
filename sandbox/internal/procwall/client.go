//go:build linux

package procwall

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/procwall/hardening"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/validate"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/wasmtime"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/wazero"
)

// Available reports whether this platform can run process isolation.
const Available = true

// Options configure an Engine.
type Options struct {
	// Engine is the engine the workers run: config.EngineWazero or
	// config.EngineWasmtime.
	Engine string
	// Worker is the path of the worker executable (cmd/callbox-worker).
	Worker string
	// KillGrace, when set, fixes how long past a call's deadline the host
	// waits for a worker's reply before it kills the worker; 0 means the
	// grace follows the machine (grace.go).
	KillGrace time.Duration
	// User is who the workers run as when the host runs as root (UID <
	// 0: the host's own user); see ResolveUser.
	User User
	// SocketOnly exchanges every request and reply over the instance
	// socket, without the doorbell (bell.go). New sets it when the
	// environment has CALLBOX_PROCESS_BELL=off (the benchmarks measure the
	// doorbell against it; an operator can turn the doorbell's spinning
	// off with it).
	SocketOnly bool
}

// Engine runs each compiled module in a worker process of its own.
type Engine struct {
	o  Options
	id atomic.Uint64 // instance ids
	// late tracks how late timed-out calls reply: the kill grace follows
	// it (grace.go).
	late lateness
	// validator checks modules in the host before any worker starts, so
	// that a refusal is the same InvalidArgument, with the same reason,
	// under every isolation; the worker validates again as it compiles.
	// The validators are the engines' decoders (wazero's, pure Go, and
	// wasmtime's wasmparser): the compilers stay in the worker.
	validator *validate.Validator
}

var _ sandbox.Engine = (*Engine)(nil)

// New checks the worker executable and returns the engine; workers start
// at Compile.
func New(_ context.Context, o Options) (*Engine, error) {
	if o.Engine != config.EngineWazero && o.Engine != config.EngineWasmtime {
		return nil, fmt.Errorf("unknown engine %q (want wazero or wasmtime)", o.Engine)
	}
	st, err := os.Stat(o.Worker)
	if err != nil {
		return nil, fmt.Errorf("isolation: process needs the worker executable: %w", err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("isolation: process: the worker %s is not an executable file", o.Worker)
	}
	if os.Getenv("CALLBOX_PROCESS_BELL") == "off" {
		o.SocketOnly = true
	}
	return &Engine{o: o, validator: validate.New()}, nil
}

// Name implements core.Engine: the engine the workers run.
func (e *Engine) Name() string { return e.o.Engine }

// Version implements core.Engine.
func (e *Engine) Version() string {
	if e.o.Engine == config.EngineWasmtime {
		return wasmtime.Version
	}
	return wazero.Version
}

// killGrace is how long past a deadline the host waits for a reply now.
func (e *Engine) killGrace() time.Duration {
	if e.o.KillGrace > 0 {
		return e.o.KillGrace
	}
	return e.late.grace()
}

// Supports implements core.Engine: both engines enforce fuel and stack
// limits, and the host's mapping of a guest's memory never moves.
func (e *Engine) Supports(sandbox.Feature) bool { return true }

// Validate implements core.Engine, in the host.
func (e *Engine) Validate(ctx context.Context, wasm []byte, sum [32]byte) error {
	return e.validator.Validate(ctx, wasm, sum)
}

// Close implements core.Engine; each module's worker ends with its
// module.
func (e *Engine) Close(ctx context.Context) error { return e.validator.Close(ctx) }

// Compile implements core.Engine: it starts the module's worker and
// has it compile the module.
func (e *Engine) Compile(ctx context.Context, wasm []byte, cfg sandbox.ModuleConfig) (sandbox.Module, error) {
	if cfg.Profile != nil {
		return nil, errors.New("the guest profiler runs callbacks in process: profile one under isolation: pooled (callbox profile does)")
	}
	m := &module{e: e, wasm: wasm, cfg: cfg}
	w, err := m.start(ctx)
	if err != nil {
		return nil, err
	}
	m.w = w
	if ev := cfg.Workers; ev != nil {
		ev.WorkerStarted()
	}
	return m, nil
}

// worker is one worker process, seen from the host.
type worker struct {
	cmd     *exec.Cmd
	pid     int
	started time.Time
	ctl     int        // the control socket; -1 once closed (ctlMu)
	ctlMu   sync.Mutex // serializes writes to ctl and its closing
	report  Report
	exited  chan struct{} // closed once the process is reaped
	state   *os.ProcessState
	waitErr error       // Wait's error, when state is nil
	dead    atomic.Bool // the process exited, or is being killed
	// killed says why the host killed the worker, when it did (nil: it
	// did not, or not yet), so that each call on it is told its own part.
	killed  atomic.Pointer[killReason]
	closing atomic.Bool // the host closed it on purpose
	// answered counts the calls the worker answered (module.died).
	answered atomic.Int32
}

// Report is the worker's account of its lockdown.
type Report = hardening.Report

// module is a compiled module and the worker that holds it.
type module struct {
	e *Engine
	// wasm is kept for the next worker, which compiles it again.
	wasm []byte
	cfg  sandbox.ModuleConfig

	mu      sync.Mutex
	w       *worker
	crashes int       // deaths in a row of workers that never served (died)
	nextTry time.Time // the earliest restart after a crash
	closed  bool
	// starting is closed when the restart in progress ends (nil: none);
	// startErr is how the last one failed.
	starting    chan struct{}
	startErr    error
	cancelStart context.CancelFunc // ends the restart in progress
}

// fileSize is the largest a guest memory file of the module may grow:
// its max_memory (whole pages: config validates it), or all a 32-bit guest
// can address (RLIMIT_FSIZE).
func (m *module) fileSize() uint64 {
	if l := m.cfg.Limits.MaxMemory; l > 0 {
		return l
	}
	return config.MaxMemoryLimit
}

// addressSpace sizes a worker's RLIMIT_AS: the runtime's own needs, and a
// reservation per instance (wasmtime reserves a guard region beside each
// memory).
func (m *module) addressSpace() uint64 {
	const base = 4 << 30
	per := m.fileSize()
	if m.e.o.Engine == config.EngineWasmtime {
		per = 4<<30 + 512<<20 // wasmtime's 4 GiB reservation, its guard, the instance's stacks
	}
	n := uint64(max(m.cfg.Instances, 1)) + 1 // one more: a pool replaces a broken instance before the old one is gone
	return base + n*per
}

// killReason is why the host killed a worker.
type killReason struct {
	// culprit is the instance whose call would not end (0: none): its
	// call fails for its own deadline or cancellation.
	culprit uint64
	// what the other calls on the worker are told.
	what string
	// cause is the death's word for the metrics (WorkerEvents).
	cause string
}

// cause is why w died, in one of WorkerEvents' words.
func (w *worker) cause() string {
	if r := w.killed.Load(); r != nil {
		return r.cause
	}
	if w.state == nil {
		return "unknown"
	}
	ws, ok := w.state.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		return "unknown"
	case ws.Signaled():
		return signalName(ws.Signal())
	default:
		return fmt.Sprintf("exit_%d", ws.ExitStatus())
	}
}

// killFor kills the worker for r (the first reason given stands).
func (w *worker) killFor(r *killReason) {
	w.killed.CompareAndSwap(nil, r)
	w.kill()
}

// startTimeout bounds a worker's start (exec, lock-down and the module's
// compile) when no caller waits for it alone: a restart serves every
// caller of the module, so none of their deadlines or cancellations ends
// it.
const startTimeout = 5 * time.Minute

// start spawns a worker, reads its hello and has it compile the module.
// ctx, when it can end, is the one caller the start is for (the load):
// its end kills the start; a restart passes context.Background().
func (m *module) start(ctx context.Context) (*worker, error) {
	host, child, err := socketPair()
	if err != nil {
		return nil, fmt.Errorf("worker socket: %w", err)
	}
	files := uint64(64 + 4*max(m.cfg.Instances, 1))
	user := m.e.o.User
	if os.Geteuid() != 0 {
		user = User{UID: -1, GID: -1} // the worker is already unprivileged
	}
	cmd := exec.Command(m.e.o.Worker, m.e.o.Engine, fmt.Sprint(m.addressSpace()), fmt.Sprint(files), fmt.Sprint(m.fileSize()),
		fmt.Sprint(user.UID), fmt.Sprint(user.GID), fmt.Sprint(m.cfg.Limits.MaxStack), fmt.Sprint(m.cfg.Deterministic))
	// Its name is the worker's, whatever the file: a program that serves
	// as its own worker (WorkerMain) knows it was started as one by it.
	cmd.Args[0] = sandbox.WorkerName
	// The worker starts with two variables, which it clears; both are
	// read before. glibc's malloc opens two files the seccomp allowlist
	// forbids, each the first time it needs it:
	// /sys/devices/system/cpu/online to bound its arenas (a fixed
	// arena_max skips it) and /proc/sys/vm/overcommit_memory when it
	// shrinks a thread arena's heap (a trim threshold no heap reaches
	// means it never does). The Go runtime's periodic GOMAXPROCS update
	// reads /proc/self/cgroup, an open the allowlist forbids too:
	// updatemaxprocs=0, read once at the runtime's start, turns it off in
	// any program serving as a worker.
	cmd.Env = []string{
		"GLIBC_TUNABLES=glibc.malloc.arena_max=8:glibc.malloc.trim_threshold=4611686018427387904",
		"GODEBUG=updatemaxprocs=0",
	}
	cmd.ExtraFiles = []*os.File{os.NewFile(uintptr(child), "callbox-worker-control")}
	if os.Getenv("CALLBOX_WORKER_STDERR") != "" {
		cmd.Stderr = os.Stderr // a worker's own crash report, for debugging
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	_ = cmd.ExtraFiles[0].Close()
	if err != nil {
		closeFD(host)
		return nil, fmt.Errorf("starting the worker %s: %w", m.e.o.Worker, err)
	}
	w := &worker{cmd: cmd, pid: cmd.Process.Pid, ctl: host, exited: make(chan struct{}), started: time.Now()}
	go func() {
		w.waitErr = cmd.Wait()
		w.state = cmd.ProcessState // nil when another waiter took the status
		w.dead.Store(true)
		close(w.exited)
	}()
	fail := func(err error) (*worker, error) {
		w.kill()
		<-w.exited
		w.closeControl()
		if errors.Is(err, errPeerGone) {
			why := ""
			if r := w.killed.Load(); r != nil {
				why = r.what + ": "
			}
			return nil, &sandbox.Trap{Class: abi.WorkerDied, Message: "the worker died while starting: " + why + w.exitText()}
		}
		return nil, err
	}
	timer := time.AfterFunc(startTimeout, func() {
		w.killFor(&killReason{what: fmt.Sprintf("it did not finish starting within %v", startTimeout), cause: "killed_start"})
	})
	defer timer.Stop()
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() {
			w.killFor(&killReason{what: "the load (or the module) it was starting for ended", cause: "killed_start"})
		})
		defer stop()
	}
	msg, fd, err := recv(host, nil, maxMessage, false)
	closeFD(fd)
	if err != nil {
		return fail(err)
	}
	d := dec{b: msg}
	if op, v := d.u8(), d.u32(); op != opHello || v != protocolVersion {
		return fail(fmt.Errorf("the worker %s speaks protocol %d (op %d); this host speaks %d", m.e.o.Worker, v, op, protocolVersion))
	}
	if err := json.Unmarshal(d.bytes(), &w.report); err != nil || d.err != nil {
		return fail(fmt.Errorf("the worker's hello: %w", errors.Join(err, d.err)))
	}
	if tid := w.report.RealtimeThread; tid != 0 {
		w.report.Add("realtime_ticker", raiseRealtime(w.pid, tid),
			fmt.Sprintf("thread %d (wasmtime's epoch ticker) runs at SCHED_FIFO 1, set by the host", tid))
	}
	req, err := json.Marshal(compileRequest{Name: m.cfg.Name, Limits: m.cfg.Limits, WASI: m.cfg.WASI, SHA256: hex.EncodeToString(m.cfg.SHA256[:]), Deterministic: m.cfg.Deterministic})
	if err != nil {
		return fail(err)
	}
	mfd, err := moduleFile(m.wasm)
	if err != nil {
		return fail(err)
	}
	var e enc
	e.reset(opCompile)
	e.bytes(req)
	err = send(host, e.b, mfd)
	closeFD(mfd)
	if err != nil {
		return fail(err)
	}
	msg, fd, err = recv(host, nil, maxMessage, false)
	closeFD(fd)
	if err != nil {
		return fail(err)
	}
	d = dec{b: msg}
	if d.u8() != opCompiled {
		return fail(errors.New("the worker did not answer the compile request"))
	}
	if err := d.error(); err != nil || d.err != nil {
		return fail(errors.Join(err, d.err))
	}
	return w, nil
}

// moduleFile puts the module bytes in a sealed memfd.
func moduleFile(wasm []byte) (int, error) {
	fd, err := unix.MemfdCreate("callbox-module", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, err
	}
	for off := 0; off < len(wasm); {
		n, err := unix.Write(fd, wasm[off:])
		if err != nil {
			closeFD(fd)
			return -1, err
		}
		off += n
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE|unix.F_SEAL_SEAL); err != nil {
		closeFD(fd)
		return -1, err
	}
	return fd, nil
}

func socketPair() (int, int, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, -1, err
	}
	return fds[0], fds[1], nil
}

// kill ends the worker (SIGKILL to it).
func (w *worker) kill() {
	w.dead.Store(true)
	_ = w.cmd.Process.Kill()
}

// exitText says how the worker ended, once it has (it waits a moment for
// the kernel to reap a worker whose socket has just closed).
func (w *worker) exitText() string {
	select {
	case <-w.exited:
	case <-time.After(time.Second):
		// It closed the socket but lives on: it broke the protocol.
		w.kill()
		<-w.exited
		return fmt.Sprintf("worker pid %d closed the instance's socket without exiting, and was killed", w.pid)
	}
	st := w.state
	if st == nil {
		// A process that ignores SIGCHLD, or reaps its children itself
		// (an Erlang VM), leaves the kernel no status to give.
		return fmt.Sprintf("worker pid %d exited; its exit status is unknown (%v: this process ignores SIGCHLD or reaps its children itself)", w.pid, w.waitErr)
	}
	ws, ok := st.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		return fmt.Sprintf("worker pid %d ended: %v", w.pid, st)
	case ws.Signaled():
		sig := ws.Signal()
		why := ""
		switch sig {
		case syscall.SIGSYS:
			why = ": it made a system call outside its seccomp allowlist"
		case syscall.SIGKILL:
			why = " (kill -9, the kernel's OOM killer, or the host)"
		}
		return fmt.Sprintf("worker pid %d killed by signal %s%s", w.pid, signalName(sig), why)
	default:
		return fmt.Sprintf("worker pid %d exited with status %d", w.pid, ws.ExitStatus())
	}
}

func signalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	return fmt.Sprintf("%d", int(sig))
}

// control sends a message on the control socket (with fd when >= 0),
// unless the socket is closed: a closed descriptor's number may already
// be another file's.
func (w *worker) control(msg []byte, fd int) error {
	w.ctlMu.Lock()
	defer w.ctlMu.Unlock()
	if w.ctl < 0 {
		return errPeerGone
	}
	return send(w.ctl, msg, fd)
}

// alive reports whether the worker can serve: not known dead, and its
// control socket not hung up (the kernel ended it; the host has not yet
// reaped it).
func (w *worker) alive() bool {
	if w.dead.Load() {
		return false
	}
	w.ctlMu.Lock()
	defer w.ctlMu.Unlock()
	return w.ctl >= 0 && !hungUp(w.ctl)
}

// closeControl closes the control socket once.
func (w *worker) closeControl() {
	w.ctlMu.Lock()
	defer w.ctlMu.Unlock()
	closeFD(w.ctl)
	w.ctl = -1
}

// close ends the worker on purpose.
func (w *worker) close() {
	w.closing.Store(true)
	w.closeControl() // the worker exits when its control socket closes
	select {
	case <-w.exited:
	case <-time.After(time.Second):
		w.kill()
		<-w.exited
	}
}

// raiseRealtime gives thread tid of worker pid the real-time priority
// (SCHED_FIFO 1) that wasmtime's epoch ticker asks for and the worker,
// holding no capability, cannot take: the host can when it holds
// CAP_SYS_NICE (a root host). The id comes in the hello, which the worker
// sends before it reads a byte of a guest, so it is our code's word; the
// thread must still be one of pid's, never another process's.
func raiseRealtime(pid, tid int) error {
	if tid <= 0 {
		return fmt.Errorf("not raised: thread id %d", tid)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d", pid, tid)); err != nil {
		return fmt.Errorf("not raised: thread %d is not the worker's (%w)", tid, err)
	}
	if err := unix.SchedSetAttr(tid, &unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: 1}, 0); err != nil {
		return fmt.Errorf("not raised: the host may not set a real-time priority (%w); ticks wait for the scheduler like any thread's", err)
	}
	return nil
}

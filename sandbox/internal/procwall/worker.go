//go:build linux

package procwall

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/core"
)

// The worker's side. Serve runs in the worker process once it is locked
// down: it says hello with its hardening report, compiles the one module
// the host sends, then serves instances, each on its own socket and
// goroutine, until the host closes the control socket.

// compileRequest is opCompile's body.
type compileRequest struct {
	Name          string
	Limits        config.Limits
	WASI          bool
	SHA256        string
	Deterministic bool
}

// maxModuleBytes bounds the module a worker reads from its memfd.
const maxModuleBytes = 1 << 30

// Serve runs the worker protocol on the control socket ctl with eng, the
// engine the worker started before it locked itself down. report is the
// lockdown's report, sent in the hello.
func Serve(eng sandbox.Engine, ctl int, report any, o ServeOptions) error {
	if err := hello(ctl, report); err != nil {
		return err
	}
	var e enc
	msg, fd, err := recv(ctl, nil, maxMessage, true)
	if err != nil {
		return err
	}
	s := &server{ctl: ctl, calls: map[uint64]*running{}, probe: o.Probe}
	mod, cerr := s.compile(eng, msg, fd)
	closeFD(fd)
	e.reset(opCompiled)
	e.err(cerr)
	if err := send(ctl, e.b, -1); err != nil || cerr != nil {
		return errors.Join(err, cerr) // a refused module ends the worker with status 1
	}
	s.mod = mod
	var buf []byte
	for {
		msg, fd, err := recv(ctl, buf, maxMessage, true)
		if errors.Is(err, errPeerGone) {
			return nil // the host let go: the worker's work is done
		}
		if err != nil {
			return err
		}
		d := dec{b: msg}
		switch d.u8() {
		case opInstance:
			id, deadline := d.u64(), d.i64()
			if d.err != nil || fd < 0 {
				closeFD(fd)
				return fmt.Errorf("opInstance: %v (descriptor %d)", d.err, fd)
			}
			go s.serveInstance(fd, id, deadline)
		case opCancel:
			s.cancel(d.u64(), d.u64())
			closeFD(fd)
		default:
			closeFD(fd)
			return fmt.Errorf("unknown control op %d", msg[0])
		}
	}
}

// ServeOptions are the worker's test hooks.
type ServeOptions struct {
	// Probe, when set, sees the text of every guest log line in the
	// worker. Only the test build of the worker sets it (it makes the
	// worker try a forbidden system call on cue); release workers never.
	Probe func(text string)
}

// server is one worker's state.
type server struct {
	probe func(string)
	ctl   int
	mod   sandbox.Module
	mu    sync.Mutex
	// calls are the guest entries in progress, by instance id, so that
	// opCancel can reach them.
	calls map[uint64]*running
}

type running struct {
	seq    uint64
	cancel context.CancelFunc
}

func (s *server) compile(eng sandbox.Engine, msg []byte, fd int) (sandbox.Module, error) {
	d := dec{b: msg}
	if d.u8() != opCompile {
		return nil, errors.New("the first message was not a compile request")
	}
	var req compileRequest
	if err := json.Unmarshal(d.bytes(), &req); err != nil || d.err != nil {
		return nil, fmt.Errorf("compile request: %w", errors.Join(err, d.err))
	}
	wasm, err := readFile(fd)
	if err != nil {
		return nil, fmt.Errorf("reading the module: %w", err)
	}
	cfg := sandbox.ModuleConfig{Name: req.Name, Limits: req.Limits, WASI: req.WASI, Deterministic: req.Deterministic, Logger: slog.New(captureHandler{probe: s.probe})}
	if sum, err := hex.DecodeString(req.SHA256); err == nil && len(sum) == len(cfg.SHA256) {
		copy(cfg.SHA256[:], sum)
	}
	// The one compile path: the module is validated here too, as it
	// arrived, before the worker's engine rewrites it.
	return sandbox.Compile(context.Background(), eng, wasm, cfg)
}

// readFile reads the whole of a memfd.
func readFile(fd int) ([]byte, error) {
	if fd < 0 {
		return nil, errors.New("no descriptor came with the request")
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Size < 0 || st.Size > maxModuleBytes {
		return nil, fmt.Errorf("a module of %d bytes", st.Size)
	}
	b := make([]byte, st.Size)
	for off := 0; off < len(b); {
		n, err := unix.Pread(fd, b[off:], int64(off))
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, errors.New("the module file ended early")
		}
		off += n
	}
	return b, nil
}

func (s *server) arm(ctx context.Context, id, seq uint64) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	s.calls[id] = &running{seq: seq, cancel: cancel}
	s.mu.Unlock()
	return ctx, func() {
		s.mu.Lock()
		delete(s.calls, id)
		s.mu.Unlock()
		cancel()
	}
}

func (s *server) cancel(id, seq uint64) {
	s.mu.Lock()
	r := s.calls[id]
	s.mu.Unlock()
	if r != nil && r.seq == seq {
		r.cancel()
	}
}

// at is the deadline nanos (deadlineNanos) stand for, read now.
func at(nanos int64) time.Time {
	if nanos < 0 {
		return time.Time{}
	}
	return time.Now().Add(time.Duration(clampNanos(nanos)))
}

// served is one instance on the worker's side.
type served struct {
	inst  sandbox.Instance
	fns   []sandbox.Function
	logs  logBuf
	stack []uint64
}

func (s *server) serveInstance(sock int, id uint64, deadline int64) {
	defer closeFD(sock)
	sv := &served{}
	ctx := context.WithValue(context.Background(), logKey{}, &sv.logs)
	cctx, done := s.arm(ctx, id, 0)
	inst, err := s.mod.Instantiate(cctx, at(deadline))
	done()
	var e enc
	e.reset(opInstantiated)
	e.err(err)
	memFD := -1
	if err == nil {
		sv.inst = inst
		defer inst.Close(context.Background())
		fd, reserved := -1, uint64(0)
		if sm, ok := inst.(sandbox.SharedMemory); ok {
			fd, reserved = sm.MemoryFile()
		}
		if fd < 0 {
			// Both engines put guest memory in a memfd (their
			// SharedMemory options); one that could not make the file
			// fell back to private memory the host cannot see.
			e.reset(opInstantiated)
			e.err(&sandbox.Trap{Class: abi.HostPanic, Message: "instantiate: the guest's memory is not a file the host can map (memfd_create failed in the worker)"})
			_ = send(sock, e.b, -1)
			return
		}
		memFD = fd
		e.u64(reserved)
		e.u64(uint64(len(inst.Memory())))
	}
	if send(sock, e.b, memFD) != nil || err != nil {
		return
	}
	var buf []byte
	var bl *bell
	defer func() { bl.close() }()
	var last uint32 // the doorbell's last request
	for {
		var msg []byte
		if bl == nil {
			m, fd, err := recv(sock, buf, maxMessage, true)
			if err != nil {
				closeFD(fd)
				return
			}
			if len(m) > 0 && m[0] == opBell {
				b, err := mapBell(fd, workerSpin)
				closeFD(fd)
				e.reset(opBellReady)
				e.err(err)
				if send(sock, e.b, -1) != nil {
					b.close()
					return
				}
				bl = b
				continue
			}
			closeFD(fd)
			msg = m
		} else {
			v, err := bl.await(offReqSeq, offWorkerZz, last, false, func() bool { return !hungUp(sock) })
			if err != nil {
				return
			}
			last = v
			bl.word(offAckSeq).Store(v)
			switch n := bl.word(offReqLen).Load(); {
			case n == lenClose:
				return
			case n == lenOnSocket:
				m, fd, err := recv(sock, buf, maxMessage, false)
				closeFD(fd)
				if err != nil {
					return
				}
				msg = m
			case n > areaMax:
				return
			default:
				if cap(buf) < int(n) {
					buf = make([]byte, max(int(n), maxPacket))
				}
				msg = buf[:n]
				copy(msg, bl.mem[reqArea:reqArea+int(n)])
			}
		}
		if len(msg) <= maxPacket {
			buf = msg[:cap(msg)]
		}
		d := dec{b: msg}
		e.reset(0)
		switch d.u8() {
		case opExport:
			sv.export(&d, &e)
		case opCall:
			s.call(ctx, id, sv, &d, &e)
		default:
			return // opClose, or a message the host never sends
		}
		if !reply(sock, bl, e.b, last) {
			return
		}
	}
}

// reply sends a reply on the socket or, once the instance has a doorbell,
// through it as the answer to request seq (on the socket, the doorbell
// saying so, when it does not fit).
func reply(sock int, bl *bell, msg []byte, seq uint32) bool {
	if bl == nil {
		return send(sock, msg, -1) == nil
	}
	if len(msg) <= areaMax {
		bl.post(offRepSeq, offRepLen, repArea, offHostZz, msg, uint32(len(msg)), seq)
		return true
	}
	bl.post(offRepSeq, offRepLen, repArea, offHostZz, nil, lenOnSocket, seq)
	return send(sock, msg, -1) == nil
}

func (sv *served) export(d *dec, e *enc) {
	name := d.str()
	params, results := valTypes(d.bytes()), valTypes(d.bytes())
	e.reset(opExported)
	if d.err != nil {
		e.err(d.err)
		return
	}
	fn, err := sv.inst.Export(name, params, results)
	e.err(err)
	if err == nil {
		sv.fns = append(sv.fns, fn)
		e.u32(uint32(len(sv.fns) - 1))
	}
}

func valTypes(b []byte) []sandbox.ValType {
	out := make([]sandbox.ValType, len(b))
	for i, v := range b {
		out[i] = sandbox.ValType(v)
	}
	return out
}

func (s *server) call(ctx context.Context, id uint64, sv *served, d *dec, e *enc) {
	fn, deadline, callerDeadline, seq := d.u32(), d.i64(), d.i64(), d.u64()
	n := d.count(8, "stack values")
	if cap(sv.stack) < n {
		sv.stack = make([]uint64, n)
	}
	stack := sv.stack[:n]
	for i := range stack {
		stack[i] = d.u64()
	}
	e.reset(opReturned)
	if d.err != nil || int(fn) >= len(sv.fns) {
		e.err(fmt.Errorf("call request: %v (function %d of %d)", d.err, fn, len(sv.fns)))
		return
	}
	sv.logs.reset()
	if callerDeadline >= 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, at(callerDeadline))
		defer cancel()
	}
	cctx, done := s.arm(ctx, id, seq)
	sv.inst.SetDeadline(at(deadline))
	err := sv.inst.Call(cctx, sv.fns[fn], stack)
	done()
	mem := sv.inst.Memory()
	e.err(err)
	e.u32(uint32(len(stack)))
	for _, v := range stack {
		e.u64(v)
	}
	e.u64(uint64(len(mem)))
	st := sv.inst.(core.Stateful).GuestState()
	e.str(st.ErrorMessage)
	e.u64(st.LogBytes)
	e.u64(st.LogDropped)
	e.bool(st.MemoryDenied)
	e.bool(st.Abort != nil)
	if st.Abort != nil {
		e.trap(st.Abort)
	}
	fuel, known := sv.inst.FuelConsumed()
	e.u64(fuel)
	e.bool(known)
	sv.logs.encode(e)
}

// Refuse sends the hello of a worker that could not lock itself down: the
// report says which step failed, and the host refuses the worker.
func Refuse(ctl int, report any) error { return hello(ctl, report) }

// hello sends the worker's first message: the protocol's version and the
// lockdown's report.
func hello(ctl int, report any) error {
	rep, err := json.Marshal(report)
	if err != nil {
		return err
	}
	var e enc
	e.reset(opHello)
	e.u32(protocolVersion)
	e.bytes(rep)
	return send(ctl, e.b, -1)
}

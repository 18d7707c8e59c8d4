package core

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"log/slog"
	"time"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/meter"
)

// HostFunc is one function the host offers guests, defined once here and
// registered by each engine with its own API. Fn reads its parameters from
// stack and writes its results back to stack[0:], wazero-style. When Fn
// records an abort (GuestState.Fail), the engine adapter stops the guest
// right after Fn returns.
type HostFunc struct {
	Module  string
	Name    string
	Params  []sandbox.ValType
	Results []sandbox.ValType
	Fn      func(g *GuestState, mem []byte, stack []uint64)
}

// HostFuncs lists the functions a module may import (sandbox.Imports:
// callbox.error and callbox.log always, the WASI profile when granted),
// each with its implementation.
func HostFuncs(wasi bool) []HostFunc {
	impls := hostImpls()
	imports := sandbox.Imports(wasi)
	fns := make([]HostFunc, len(imports))
	for i, imp := range imports {
		fn, ok := impls[imp.Module+"."+imp.Name]
		if !ok {
			panic("callbox: no implementation of the import " + imp.Module + "." + imp.Name)
		}
		fns[i] = HostFunc{Module: imp.Module, Name: imp.Name, Params: imp.Type.Params, Results: imp.Type.Results, Fn: fn}
	}
	return fns
}

// WASI errno values used by the profile.
const (
	errnoSuccess    = 0
	errnoBadf       = 8
	errnoInval      = 28
	errnoNosys      = 52
	errnoSpipe      = 70
	errnoNotcapable = 76
)

func errno(v uint64) func(*GuestState, []byte, []uint64) {
	return func(_ *GuestState, _ []byte, s []uint64) { s[0] = v }
}

// stdio: fd 0..2 exist (as character devices); nothing else does.
func isStdio(fd uint64) bool { return uint32(fd) <= 2 }

// badfUnlessStdio returns EBADF for non-stdio fds and ENOTCAPABLE otherwise:
// the operation exists but this profile grants no capability for it.
func badfUnlessStdio(_ *GuestState, _ []byte, s []uint64) {
	if isStdio(s[0]) {
		s[0] = errnoNotcapable
		return
	}
	s[0] = errnoBadf
}

// guestOut bounds-checks an output location the guest passed to WASI.
func guestOut(g *GuestState, mem []byte, ptr uint64, n uint64, what string) []byte {
	b, err := abi.GuestBytes(mem, uint64(uint32(ptr)), n, "WASI "+what)
	if err != nil {
		g.violation(err)
		return nil
	}
	return b
}

func putU32s(g *GuestState, mem []byte, what string, ptrs []uint64, vals ...uint32) {
	for i, p := range ptrs {
		if b := guestOut(g, mem, p, 4, what); b != nil {
			binary.LittleEndian.PutUint32(b, vals[i])
		}
	}
}

// hostImpls are the implementations of the imports sandbox.Imports
// lists, keyed "module.name".
func hostImpls() map[string]func(*GuestState, []byte, []uint64) {
	zeroSizes := func(what string) func(*GuestState, []byte, []uint64) {
		return func(g *GuestState, mem []byte, s []uint64) {
			putU32s(g, mem, what, []uint64{s[0], s[1]}, 0, 0)
			s[0] = errnoSuccess
		}
	}
	wasi := map[string]func(*GuestState, []byte, []uint64){
		"args_get":          errno(errnoSuccess),
		"args_sizes_get":    zeroSizes("args_sizes_get"),
		"environ_get":       errno(errnoSuccess),
		"environ_sizes_get": zeroSizes("environ_sizes_get"),
		"clock_res_get":     wasiClockRes,
		"clock_time_get":    wasiClockTime,
		"fd_write":          wasiFdWrite,
		"fd_read":           wasiFdRead,
		"fd_close": func(_ *GuestState, _ []byte, s []uint64) {
			if isStdio(s[0]) {
				s[0] = errnoSuccess
				return
			}
			s[0] = errnoBadf
		},
		"fd_fdstat_get":       wasiFdstat,
		"fd_filestat_get":     wasiFilestat,
		"fd_prestat_get":      errno(errnoBadf),
		"fd_prestat_dir_name": errno(errnoBadf),
		"fd_seek": func(_ *GuestState, _ []byte, s []uint64) {
			if isStdio(s[0]) {
				s[0] = errnoSpipe
				return
			}
			s[0] = errnoBadf
		},
		"fd_tell": func(_ *GuestState, _ []byte, s []uint64) {
			if isStdio(s[0]) {
				s[0] = errnoSpipe
				return
			}
			s[0] = errnoBadf
		},
		"poll_oneoff": wasiPollOneoff,
		"proc_exit": func(g *GuestState, _ []byte, s []uint64) {
			g.Fail(&sandbox.Trap{Class: abi.GuestError, Message: fmt.Sprintf("guest called proc_exit(%d)", int32(uint32(s[0])))})
		},
		"proc_raise":  errno(errnoNosys),
		"sched_yield": errno(errnoSuccess),
		"random_get":  wasiRandom,
	}
	// Capability-bearing calls exist so that wasi-libc and Go's wasip1
	// modules link, and deny.
	for _, name := range []string{"fd_advise", "fd_allocate", "fd_datasync", "fd_fdstat_set_flags", "fd_fdstat_set_rights", "fd_filestat_set_size", "fd_filestat_set_times", "fd_pread", "fd_pwrite", "fd_readdir", "fd_renumber", "fd_sync"} {
		wasi[name] = badfUnlessStdio
	}
	for _, name := range []string{"path_create_directory", "path_filestat_get", "path_filestat_set_times", "path_link", "path_open", "path_readlink", "path_remove_directory", "path_rename", "path_symlink", "path_unlink_file", "sock_accept", "sock_recv", "sock_send", "sock_shutdown"} {
		wasi[name] = errno(errnoBadf)
	}
	impls := map[string]func(*GuestState, []byte, []uint64){
		abi.ImportModule + "." + abi.ImportError: func(g *GuestState, mem []byte, s []uint64) {
			g.HostError(mem, uint32(s[0]), uint32(s[1]))
		},
		abi.ImportModule + "." + abi.ImportLog: func(g *GuestState, mem []byte, s []uint64) {
			g.HostLog(mem, int32(uint32(s[0])), uint32(s[1]), uint32(s[2]))
		},
	}
	for name, fn := range wasi {
		impls[sandbox.WASIModule+"."+name] = fn
	}
	return impls
}

func wasiClockRes(g *GuestState, mem []byte, s []uint64) {
	if uint32(s[0]) > 3 {
		s[0] = errnoInval
		return
	}
	if b := guestOut(g, mem, s[1], 8, "clock_res_get"); b != nil {
		binary.LittleEndian.PutUint64(b, 1000)
	}
	s[0] = errnoSuccess
}

// clockNow reads WASI clock id. The monotonic clocks count from the
// instance's creation.
func (g *GuestState) clockNow(id uint32) (uint64, bool) {
	switch id {
	case 0: // realtime
		return uint64(time.Now().UnixNano()), true
	case 1, 2, 3: // monotonic, process and thread CPU time (approximated by monotonic)
		return uint64(time.Since(g.born).Nanoseconds()), true
	}
	return 0, false
}

func wasiClockTime(g *GuestState, mem []byte, s []uint64) {
	now, ok := g.clockNow(uint32(s[0]))
	if !ok {
		s[0] = errnoInval
		return
	}
	if b := guestOut(g, mem, s[2], 8, "clock_time_get"); b != nil {
		binary.LittleEndian.PutUint64(b, now)
	}
	s[0] = errnoSuccess
}

// iovecs reads a WASI iovec array (u32 ptr, u32 len pairs), bounds-checked.
func iovecs(g *GuestState, mem []byte, ptr, n uint64, what string) [][]byte {
	arr := guestOut(g, mem, ptr, uint64(uint32(n))*8, what+" iovecs")
	if arr == nil {
		return nil
	}
	out := make([][]byte, 0, uint32(n))
	for i := 0; i+8 <= len(arr); i += 8 {
		p := uint64(binary.LittleEndian.Uint32(arr[i:]))
		l := uint64(binary.LittleEndian.Uint32(arr[i+4:]))
		b := guestOut(g, mem, p, l, what+" buffer")
		if b == nil {
			return nil
		}
		out = append(out, b)
	}
	return out
}

func wasiFdWrite(g *GuestState, mem []byte, s []uint64) {
	fd := uint32(s[0])
	if fd != 1 && fd != 2 {
		s[0] = errnoBadf
		return
	}
	bufs := iovecs(g, mem, s[1], s[2], "fd_write")
	if g.Abort != nil {
		return
	}
	// The line splitter reads every byte until the log cap is reached,
	// and none after.
	scan := uint64(8 * len(bufs))
	for _, b := range bufs {
		scan += uint64(len(b))
	}
	if !g.ChargeBytes(min(scan, 8*uint64(len(bufs))+g.logRoom())) {
		return
	}
	total := uint32(0)
	for _, b := range bufs {
		if fd == 1 {
			g.stdout.write(g, b, "stdout", slog.LevelInfo)
		} else {
			g.stderr.write(g, b, "stderr", slog.LevelWarn)
		}
		total += uint32(len(b))
	}
	putU32s(g, mem, "fd_write", []uint64{s[3]}, total)
	s[0] = errnoSuccess
}

func wasiFdRead(g *GuestState, mem []byte, s []uint64) {
	if uint32(s[0]) != 0 {
		s[0] = errnoBadf
		return
	}
	iovecs(g, mem, s[1], s[2], "fd_read") // validate, then report EOF
	putU32s(g, mem, "fd_read", []uint64{s[3]}, 0)
	s[0] = errnoSuccess
}

const (
	filetypeCharDevice = 2
	rightFdRead        = 1 << 1
	rightFdWrite       = 1 << 6
)

func wasiFdstat(g *GuestState, mem []byte, s []uint64) {
	fd := uint32(s[0])
	if fd > 2 {
		s[0] = errnoBadf
		return
	}
	b := guestOut(g, mem, s[1], 24, "fd_fdstat_get")
	if b == nil {
		return
	}
	clear(b)
	b[0] = filetypeCharDevice
	rights := uint64(rightFdWrite)
	if fd == 0 {
		rights = rightFdRead
	}
	binary.LittleEndian.PutUint64(b[8:], rights)
	s[0] = errnoSuccess
}

func wasiFilestat(g *GuestState, mem []byte, s []uint64) {
	if uint32(s[0]) > 2 {
		s[0] = errnoBadf
		return
	}
	b := guestOut(g, mem, s[1], 64, "fd_filestat_get")
	if b == nil {
		return
	}
	clear(b)
	b[16] = filetypeCharDevice
	s[0] = errnoSuccess
}

func wasiRandom(g *GuestState, mem []byte, s []uint64) {
	b := guestOut(g, mem, s[0], uint64(uint32(s[1])), "random_get")
	if b == nil || !g.ChargeBytes(uint64(len(b))) {
		return
	}
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	s[0] = errnoSuccess
}

// poll_oneoff supports clock subscriptions (sleeps); fd subscriptions
// complete at once with EBADF. A sleep ends early when the call's context
// is done or its deadline passes, and then the call is aborted as
// InterruptTrap says. (Engines interrupt guest code at the timeout but cannot
// interrupt a host function, so without the deadline here a guest asking
// to sleep for a day would hold its caller for a day.)
func wasiPollOneoff(g *GuestState, mem []byte, s []uint64) {
	const subSize, eventSize = 48, 32
	n := uint64(uint32(s[2]))
	if n == 0 {
		s[0] = errnoInval
		return
	}
	subs := guestOut(g, mem, s[0], n*subSize, "poll_oneoff subscriptions")
	events := guestOut(g, mem, s[1], n*eventSize, "poll_oneoff events")
	if subs == nil || events == nil {
		return
	}
	le := binary.LittleEndian
	var sleep time.Duration = -1
	fdEvents := 0
	for i := uint64(0); i < n; i++ {
		sub := subs[i*subSize:]
		if sub[8] != 0 {
			fdEvents++
			continue
		}
		id := le.Uint32(sub[16:])
		timeout := le.Uint64(sub[24:])
		flags := le.Uint16(sub[40:])
		d := time.Duration(min(timeout, uint64(1<<62)))
		if flags&1 != 0 { // absolute time
			now, _ := g.clockNow(id)
			d = time.Duration(int64(timeout) - int64(now))
		}
		if d < 0 {
			d = 0
		}
		if sleep < 0 || d < sleep {
			sleep = d
		}
	}
	if fdEvents == 0 && sleep > 0 {
		timedOut := false
		if !g.deadline.IsZero() {
			if rest := time.Until(g.deadline); rest < sleep {
				sleep, timedOut = max(rest, 0), true
			}
		}
		if g.Blocking != nil {
			g.Blocking()
		}
		t := time.NewTimer(sleep)
		select {
		case <-t.C:
			if timedOut {
				g.Fail(TimeoutTrap(g.limits.Timeout, "in poll_oneoff"))
				return
			}
		case <-g.ctx.Done():
			t.Stop()
			g.Fail(InterruptTrap(g.ctx, g.limits.Timeout))
			return
		}
	}
	count := uint32(0)
	for i := uint64(0); i < n; i++ {
		sub := subs[i*subSize:]
		ev := events[count*eventSize : (count+1)*eventSize]
		if sub[8] == 0 && fdEvents > 0 {
			continue // only fd events fire when there are any
		}
		clear(ev)
		copy(ev[0:8], sub[0:8])
		ev[10] = sub[8]
		if sub[8] != 0 {
			le.PutUint16(ev[8:], errnoBadf)
		}
		count++
	}
	putU32s(g, mem, "poll_oneoff", []uint64{s[3]}, count)
	s[0] = errnoSuccess
}

// GrowDeniedFunc is the host side of the metering rewrite's grow hook
// (sandbox/internal/meter): the guest's memory.grow of pages was refused.
// It records MemoryDenied when the refusal is the callback's memory limit
// (the memory plus the pages asked for pass max_memory), not the module's
// own declared maximum.
func GrowDeniedFunc() HostFunc {
	return HostFunc{Module: meter.RefillModule, Name: meter.GrowDeniedName, Params: []sandbox.ValType{sandbox.I32},
		Fn: func(g *GuestState, mem []byte, s []uint64) {
			want := uint64(len(mem)) + uint64(uint32(s[0]))*abi.PageSize
			if g.limits.MaxMemory > 0 && want > g.limits.MaxMemory {
				g.MemoryDenied = true
			}
		}}
}

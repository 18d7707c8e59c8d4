package host_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
	"github.com/seed4b3e0ccb/callbox/internal/testing/workerbin"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

// The second wall's own tests: what the worker process is allowed, and
// what happens when it dies. The hostile suite under isolation: process
// is TestHostileProcess.

func workerPath(t testing.TB, probe bool) string {
	t.Helper()
	if !engines.ProcessIsolationAvailable() {
		t.Skip("isolation: process needs Linux")
	}
	p, err := workerbin.Path(probe)
	require.NoError(t, err)
	return p
}

// processHost loads the testkit's scale export and the probe guest's
// exports, every one under isolation: process.
func processHost(t *testing.T, engine string, probe bool, tweak func(*config.Callback)) *host.Host {
	t.Helper()
	ctx := context.Background()
	h, err := host.New(ctx, nil, host.WithWorker(workerPath(t, probe)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close(ctx) })
	cb := config.DefaultCallback()
	cb.Name, cb.Export, cb.Signature, cb.Engine, cb.Isolation = "scale", "scale", testkitSigs["scale"], engine, config.IsolationProcess
	cb.MaxInstances = 2
	if tweak != nil {
		tweak(&cb)
	}
	require.NoError(t, h.LoadModule(ctx, cb, testkitWasm(t)))
	spin := cb
	spin.Name, spin.Export, spin.Signature = "spin", "spin", testkitSigs["spin"]
	spin.Limits.Timeout = 20 * time.Second
	require.NoError(t, h.LoadModule(ctx, spin, testkitWasm(t)))
	src, err := os.ReadFile(filepath.Join("testdata", "probe.wat"))
	require.NoError(t, err)
	probeWasm, err := wat.Compile(string(src))
	require.NoError(t, err)
	for _, name := range []string{"open", "socket", "execve", "fork", "hang", "crash", "ok"} {
		p := cb
		p.Name, p.Export, p.Signature = "probe-"+name, name, "() -> s32[]"
		require.NoError(t, h.LoadModule(ctx, p, probeWasm))
	}
	return h
}

func scaleOK(t *testing.T, h *host.Host) {
	t.Helper()
	outs, err := h.Invoke(context.Background(), "scale", abi.From([]float32{1, 2, 3}), abi.Scalar[float32](2))
	require.NoError(t, err)
	require.Equal(t, []float32{2, 4, 6}, abi.MustView[float32](outs[0]))
}

func workerOf(t *testing.T, h *host.Host, name string) host.WorkerInfo {
	t.Helper()
	c, err := h.Lookup(name)
	require.NoError(t, err)
	w, ok := c.Worker()
	require.True(t, ok, "%s runs in a worker", name)
	return w
}

// procField reads one "Key:\tvalue" line of /proc/<pid>/status.
func procField(t *testing.T, pid int, key string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^` + key + `:\s*(.*)$`).FindSubmatch(b)
	require.NotNil(t, m, "%s in /proc/%d/status", key, pid)
	return strings.TrimSpace(string(m[1]))
}

// hostHoldsSysNice reports whether this process may give another
// process's thread a real-time priority (CAP_SYS_NICE, bit 23, in its
// effective set).
func hostHoldsSysNice(t *testing.T) bool {
	eff, err := strconv.ParseUint(procField(t, os.Getpid(), "CapEff"), 16, 64)
	require.NoError(t, err)
	return eff&(1<<23) != 0
}

// TestProcessLockedDown reads what the kernel says of a running worker:
// seccomp in filter mode, no_new_privs, its limits, an empty environment
// and no descriptor but its sockets and guest memory files.
func TestProcessLockedDown(t *testing.T) {
	for _, engine := range engineNames() {
		t.Run(engine, func(t *testing.T) {
			h := processHost(t, engine, false, nil)
			scaleOK(t, h)
			w := workerOf(t, h, "scale")
			require.NotZero(t, w.PID)
			assert.Equal(t, "2", procField(t, w.PID, "Seccomp"), "seccomp filter mode")
			assert.Equal(t, "1", procField(t, w.PID, "NoNewPrivs"))
			filters, err := strconv.Atoi(procField(t, w.PID, "Seccomp_filters"))
			require.NoError(t, err)
			assert.GreaterOrEqual(t, filters, 1)

			limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", w.PID))
			require.NoError(t, err)
			assert.Regexp(t, `(?m)^Max core file size\s+0\s+0\s`, string(limits))
			assert.Regexp(t, `(?m)^Max open files\s+\d+\s+\d+\s`, string(limits))
			assert.NotRegexp(t, `(?m)^Max open files\s+1048576`, string(limits), "the descriptor limit was lowered")
			assert.NotRegexp(t, `(?m)^Max address space\s+unlimited`, string(limits), "max_memory is set: the address space is bounded")
			assert.Regexp(t, `(?m)^Max file size\s+\d+\s+\d+\s`, string(limits), "guest memory files are bounded")

			env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", w.PID))
			require.NoError(t, err)
			// The kernel keeps the environment the process started with;
			// the worker started with one glibc tunable and cleared it.
			assert.NotContains(t, string(env), "HOME=", "the host's environment is not passed on")

			fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", w.PID))
			require.NoError(t, err)
			for _, fd := range fds {
				target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", w.PID, fd.Name()))
				if err != nil {
					continue
				}
				n, _ := strconv.Atoi(fd.Name())
				ok := n <= 2 && target == "/dev/null" || strings.HasPrefix(target, "socket:") ||
					strings.HasPrefix(target, "/memfd:") || strings.HasPrefix(target, "anon_inode:")
				assert.True(t, ok, "descriptor %d of the worker points at %s", n, target)
			}

			// No capability in any set; a root host's worker runs as
			// nobody (the default worker_user).
			for _, set := range []string{"CapEff", "CapPrm", "CapInh", "CapAmb"} {
				assert.Equal(t, "0000000000000000", procField(t, w.PID, set), set)
			}
			if os.Geteuid() == 0 {
				assert.Equal(t, "0000000000000000", procField(t, w.PID, "CapBnd"), "the bounding set is empty")
				assert.Equal(t, "65534\t65534\t65534\t65534", procField(t, w.PID, "Uid"), "real, effective, saved and file-system uid")
				assert.Equal(t, "65534\t65534\t65534\t65534", procField(t, w.PID, "Gid"))
				status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", w.PID))
				require.NoError(t, err)
				assert.Regexp(t, `(?m)^Groups:[ \t]*$`, string(status), "no supplementary groups")
			} else {
				assert.Equal(t, fmt.Sprint(os.Getuid()), strings.Fields(procField(t, w.PID, "Uid"))[1], "a host that is not root: its own user")
			}

			applied := map[string]bool{}
			for _, s := range w.Hardening {
				applied[s.Name] = s.Applied
			}
			for _, must := range []string{"seccomp", "no_new_privs", "descriptors", "environment", "rlimit_core", "rlimit_nofile", "rlimit_fsize", "rlimit_as", "rlimit_memlock", "dumpable", "capabilities"} {
				assert.True(t, applied[must], "hardening step %s applied: %+v", must, w.Hardening)
			}
			_, reported := applied["landlock"]
			assert.True(t, reported, "landlock is reported, applied or not")

			// wasmtime's epoch ticker: the worker, with no capability
			// left, names it in its hello; a host holding CAP_SYS_NICE
			// raises it to SCHED_FIFO 1, and the kernel says so.
			raised, named := applied["realtime_ticker"]
			if engine != config.EngineWasmtime {
				assert.False(t, named, "only wasmtime has a ticker")
				return
			}
			require.True(t, named, "the ticker is reported, raised or not: %+v", w.Hardening)
			fifo := 0
			tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", w.PID))
			require.NoError(t, err)
			for _, task := range tasks {
				stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", w.PID, task.Name()))
				require.NoError(t, err)
				fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
				if fields[38] == "1" { // field 41, policy: SCHED_FIFO
					fifo++
				}
			}
			if hostHoldsSysNice(t) {
				assert.True(t, raised, "%+v", w.Hardening)
				assert.Equal(t, 1, fifo, "one worker thread, the ticker, runs at SCHED_FIFO")
			} else {
				assert.False(t, raised)
				assert.Zero(t, fifo)
			}
		})
	}
}

// TestProcessForbiddenSyscalls: the test build of the worker tries a
// forbidden system call after lock-down; each kills the worker (SIGSYS),
// the call fails as WorkerDied naming the signal with no output written,
// and the next call is served by a new worker.
func TestProcessForbiddenSyscalls(t *testing.T) {
	for _, engine := range engineNames() {
		for _, call := range []string{"open", "socket", "execve", "fork"} {
			t.Run(engine+"/"+call, func(t *testing.T) {
				h := processHost(t, engine, true, nil)
				ok := abi.Scalar[int32](0)
				_, err := h.Do(context.Background(), &host.Request{Callback: "probe-ok", Outputs: []host.Tensor{ok}})
				require.NoError(t, err, "the harmless probe runs")
				require.Equal(t, []int32{7}, abi.MustView[int32](ok))
				before := workerOf(t, h, "probe-"+call).PID

				out := abi.Scalar[int32](-1)
				_, err = h.Do(context.Background(), &host.Request{Callback: "probe-" + call, Outputs: []host.Tensor{out}})
				require.Error(t, err)
				var ce *host.CallbackError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, host.WorkerDied, ce.Kind(), "%v", err)
				assert.ErrorIs(t, err, abi.WorkerDied)
				assert.Contains(t, err.Error(), "killed by signal SIGSYS")
				assert.Contains(t, err.Error(), "seccomp allowlist")
				assert.Equal(t, []int32{-1}, abi.MustView[int32](out), "no output is written")

				_, err = h.Do(context.Background(), &host.Request{Callback: "probe-ok", Outputs: []host.Tensor{ok}})
				require.NoError(t, err, "a new worker serves the next call")
				assert.NotEqual(t, before, workerOf(t, h, "probe-"+call).PID)
			})
		}
	}
}

// TestProcessCannotReachItsHost: after lock-down, the test build of the
// worker tries each call that names another process or changes limits or
// privileges. Each is refused (an errno: the call then succeeds) or kills
// the worker (SIGSYS: the call fails as WorkerDied naming it), on both
// engines, and the host's own resource limits and scheduling priority are
// the same after as before.
func TestProcessCannotReachItsHost(t *testing.T) {
	cases := []struct {
		name   string
		killed bool
	}{
		{"prlimit-parent", true},      // prlimit64 on another pid: not allowed
		{"prlimit-raise", false},      // its own limit above the hard one: EPERM (no CAP_SYS_RESOURCE)
		{"prctl-mm", false},           // PR_SET_MM: EPERM from the filter
		{"prctl-dumpable", false},     // becoming dumpable again: EPERM from the filter
		{"ptrace", true},              // not allowed
		{"process_vm_writev", true},   // not allowed
		{"kill-parent", true},         // not allowed, whatever the signal
		{"setpriority-parent", false}, // EPERM from the filter
		{"mlock", false},              // 1 MiB: past RLIMIT_MEMLOCK, no CAP_IPC_LOCK: ENOMEM
		{"capset", true},              // not allowed
		{"setuid", true},              // not allowed
	}
	hostLimits := func() string {
		b, err := os.ReadFile("/proc/self/limits")
		require.NoError(t, err)
		return string(b)
	}
	hostPriority := func() int {
		p, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
		require.NoError(t, err)
		return p
	}
	for _, engine := range engineNames() {
		t.Run(engine, func(t *testing.T) {
			h := processHost(t, engine, true, nil)
			src, err := os.ReadFile(filepath.Join("testdata", "probe.wat"))
			require.NoError(t, err)
			cb := config.DefaultCallback()
			cb.Name, cb.Export, cb.Signature, cb.Engine, cb.Isolation = "probe-named", "named", "(call: u8[n]) -> s32[]", engine, config.IsolationProcess
			// Room for a new worker's start (and the backoff after quick
			// deaths) within the call, on a loaded machine.
			cb.Limits.Timeout = 20 * time.Second
			require.NoError(t, h.LoadModule(context.Background(), cb, wat.Must(string(src))))
			for _, c := range cases {
				limits, priority := hostLimits(), hostPriority()
				out := abi.Scalar[int32](-1)
				_, err := h.Do(context.Background(), &host.Request{Callback: "probe-named", Inputs: []host.Tensor{abi.From([]byte(c.name))}, Outputs: []host.Tensor{out}})
				if c.killed {
					require.ErrorIs(t, err, host.WorkerDied, c.name)
					assert.Contains(t, err.Error(), "killed by signal SIGSYS", c.name)
					assert.Equal(t, []int32{-1}, abi.MustView[int32](out), "%s: no output", c.name)
				} else {
					require.NoError(t, err, "%s is refused with an errno, and the call goes on", c.name)
					assert.Equal(t, []int32{7}, abi.MustView[int32](out), c.name)
					pid := workerOf(t, h, "probe-named").PID
					assert.Equal(t, "0 kB", procField(t, pid, "VmLck"), "%s: the worker locked no memory", c.name)
					wl, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
					require.NoError(t, err)
					assert.NotRegexp(t, `(?m)^Max open files\s+1048576`, string(wl), "%s: the worker's own limit was not raised", c.name)
				}
				assert.Equal(t, limits, hostLimits(), "%s: the host's resource limits are unchanged", c.name)
				assert.Equal(t, priority, hostPriority(), "%s: the host's priority is unchanged", c.name)
			}
		})
	}
}

// spinStarted waits until the worker has spent cpu CPU ticks more than it
// had at the start: the spinning guest is running.
func spinStarted(t *testing.T, pid int, ticks int) {
	t.Helper()
	read := func() int {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		require.NoError(t, err)
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		u, _ := strconv.Atoi(f[11])
		return u
	}
	start := read()
	require.Eventually(t, func() bool { return read() >= start+ticks }, 15*time.Second, time.Millisecond, "the guest never started spinning")
}

// busy runs the testkit's busy export (n rounds of an LCG) on h.
func busy(ctx context.Context, h *host.Host, n int32) (int32, error) {
	out := abi.Scalar[int32](-1)
	_, err := h.Do(ctx, &host.Request{Callback: "busy", Inputs: []host.Tensor{abi.Scalar[int32](n)}, Outputs: []host.Tensor{out}})
	return abi.MustView[int32](out)[0], err
}

// busyHost adds the busy export, under a 20 s timeout, to processHost.
func busyHost(t *testing.T, engine string, probe bool) *host.Host {
	h := processHost(t, engine, probe, nil)
	cb := config.DefaultCallback()
	cb.Name, cb.Export, cb.Signature, cb.Engine, cb.Isolation = "busy", "busy", "(n: s32[]) -> s32[]", engine, config.IsolationProcess
	cb.Limits.Timeout = 20 * time.Second
	require.NoError(t, h.LoadModule(context.Background(), cb, testkitWasm(t)))
	return h
}

// processEnded reports whether pid is gone: reaped, so every thread has
// exited and every descriptor it held is closed (a zombie leader alone
// says neither).
func processEnded(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return errors.Is(err, os.ErrNotExist)
}

// TestProcessKill9: kill -9 of a worker mid-call fails that call as
// WorkerDied naming SIGKILL, writes nothing, and the next call succeeds
// on a new worker.
func TestProcessKill9(t *testing.T) {
	for _, engine := range engineNames() {
		t.Run(engine, func(t *testing.T) {
			h := busyHost(t, engine, false)
			small, err := busy(context.Background(), h, 10)
			require.NoError(t, err)
			pid := workerOf(t, h, "busy").PID
			var wg sync.WaitGroup
			var got int32
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err = busy(context.Background(), h, 1<<31-1)
			}()
			spinStarted(t, pid, 5)
			require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
			wg.Wait()
			require.Error(t, err)
			assert.ErrorIs(t, err, abi.WorkerDied, "%v", err)
			assert.Contains(t, err.Error(), "killed by signal SIGKILL")
			assert.Equal(t, int32(-1), got, "no output is written")

			again, err := busy(context.Background(), h, 10)
			require.NoError(t, err, "the next call succeeds")
			assert.Equal(t, small, again)
			assert.NotEqual(t, pid, workerOf(t, h, "busy").PID, "on a new worker")
			st, _ := h.PoolStats("busy")
			assert.Equal(t, 1, st.Live, "the dead worker's instances are gone")

			// Killed while idle: once it is gone, its idle instance is
			// not handed out again (the pool asks engine.Liveness).
			idle := workerOf(t, h, "busy").PID
			require.NoError(t, syscall.Kill(idle, syscall.SIGKILL))
			require.Eventually(t, func() bool { return processEnded(idle) }, 10*time.Second, time.Millisecond)
			again, err = busy(context.Background(), h, 10)
			require.NoError(t, err, "the call after an idle worker's death succeeds")
			assert.Equal(t, small, again)
		})
	}
}

// TestProcessDeadlineKill: a guest stuck where neither epoch nor fuel
// reaches (a host function that never returns, in the test worker) is
// ended by killing its worker at the deadline plus the kill grace: the
// call is a Timeout that says so, and the next call succeeds.
func TestProcessDeadlineKill(t *testing.T) {
	for _, engine := range engineNames() {
		t.Run(engine, func(t *testing.T) {
			const timeout = 300 * time.Millisecond
			h := processHost(t, engine, true, func(cb *config.Callback) { cb.Limits.Timeout = timeout })
			out := abi.Scalar[int32](-1)
			start := time.Now()
			_, err := h.Do(context.Background(), &host.Request{Callback: "probe-hang", Outputs: []host.Tensor{out}})
			elapsed := time.Since(start)
			require.Error(t, err)
			assert.ErrorIs(t, err, abi.Timeout, "%v", err)
			assert.Contains(t, err.Error(), "timeout after 300ms")
			assert.Regexp(t, `its worker did not answer within \S+, so it was killed`, err.Error())
			assert.GreaterOrEqual(t, elapsed, timeout)
			// The guest never returns on its own, so any end proves the
			// kill; the bound only keeps a broken kill from hanging the
			// test, far above the grace (1 s on an idle machine).
			assert.Less(t, elapsed, timeout+40*time.Second, "ended by the kill after the deadline")
			assert.Equal(t, []int32{-1}, abi.MustView[int32](out))
			_, err = h.Do(context.Background(), &host.Request{Callback: "probe-ok", Outputs: []host.Tensor{out}})
			require.NoError(t, err)
		})
	}
}

// TestProcessCancel: canceling the caller's context stops the guest in
// its worker (Canceled, wrapping context.Canceled), and the worker lives
// on to serve the next call.
func TestProcessCancel(t *testing.T) {
	for _, engine := range engineNames() {
		t.Run(engine, func(t *testing.T) {
			h := busyHost(t, engine, false)
			_, err := busy(context.Background(), h, 10)
			require.NoError(t, err)
			pid := workerOf(t, h, "busy").PID
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err = busy(ctx, h, 1<<31-1)
			}()
			spinStarted(t, pid, 5)
			cancel()
			wg.Wait()
			require.Error(t, err)
			assert.ErrorIs(t, err, abi.Canceled, "%v", err)
			assert.ErrorIs(t, err, context.Canceled)
			_, err = busy(context.Background(), h, 10)
			require.NoError(t, err)
			assert.Equal(t, pid, workerOf(t, h, "busy").PID, "the worker was not killed")
		})
	}
}

// TestProcessRestartBackoff: a module that crashes every worker gets a
// new one at once after the first death, then waits longer after each;
// a call waits for the restart (asleep) while its deadline allows, and
// past that fails at once as WorkerDied, starting no process.
func TestProcessRestartBackoff(t *testing.T) {
	const timeout = 300 * time.Millisecond
	h := processHost(t, config.EngineWazero, true, func(cb *config.Callback) { cb.Limits.Timeout = timeout })
	out := abi.Scalar[int32](-1)
	// crash calls until a call reaches a worker or is refused by the
	// backoff: on a loaded machine a worker's start (exec, lock-down,
	// compile) can outlast the call's 300 ms, a Timeout while waiting for
	// it that says nothing of the backoff (the start goes on, and the next
	// call finds the worker).
	crash := func() error {
		for range 50 {
			_, err := h.Do(context.Background(), &host.Request{Callback: "probe-crash", Outputs: []host.Tensor{out}})
			if errors.Is(err, abi.Timeout) && strings.Contains(err.Error(), "waiting for its worker to start") {
				continue
			}
			return err
		}
		t.Fatal("50 calls in a row timed out waiting for a worker to start")
		return nil
	}
	err := crash()
	require.ErrorIs(t, err, abi.WorkerDied)
	assert.Contains(t, err.Error(), "exited with status 2", "the Go runtime's exit on an unrecovered panic")
	err = crash() // the second worker starts at once, and crashes
	require.ErrorIs(t, err, abi.WorkerDied)
	assert.Contains(t, err.Error(), "exited with status 2")
	// Now each restart waits twice as long as the last: 10, 20, 40, 80,
	// 160 ms fit in the call's 300 ms (the call waits, then its new worker
	// crashes); 320 ms does not, and the call fails at once.
	for range 10 {
		err = crash()
		if err != nil && strings.Contains(err.Error(), "next start is in") {
			break
		}
		require.ErrorIs(t, err, abi.WorkerDied)
	}
	require.ErrorIs(t, err, abi.WorkerDied)
	assert.Regexp(t, `died \d+ times in a row, each time before it had answered 2 calls; the next start is in \d+ms, past this call's deadline`, err.Error())
	assert.Zero(t, workerOf(t, h, "probe-crash").PID, "a restart past the deadline is not waited for: no worker was started")
	var ce *host.CallbackError
	require.True(t, errors.As(err, &ce))
	assert.Equal(t, "probe-crash", ce.Callback)
}

// TestProcessWorkerStartFails: a worker that dies before it says hello
// (here a program that is not a worker at all) fails the load as
// WorkerDied with its exit status, naming the callback; a worker path
// that does not exist fails it as InvalidArgument, naming the path.
func TestProcessWorkerStartFails(t *testing.T) {
	if !engines.ProcessIsolationAvailable() {
		t.Skip("isolation: process needs Linux")
	}
	ctx := context.Background()
	dir := t.TempDir()
	fake := filepath.Join(dir, "callbox-worker")
	require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\nexit 7\n"), 0o755))
	cb := config.DefaultCallback()
	cb.Name, cb.Export, cb.Signature, cb.Isolation = "scale", "scale", testkitSigs["scale"], config.IsolationProcess

	h, err := host.New(ctx, nil, host.WithWorker(fake))
	require.NoError(t, err)
	defer h.Close(ctx)
	err = h.LoadModule(ctx, cb, testkitWasm(t))
	require.Error(t, err)
	var le *host.LoadError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, host.WorkerDied, le.Kind(), "%v", err)
	assert.Contains(t, err.Error(), `callback "scale"`)
	assert.Contains(t, err.Error(), "the worker died while starting")
	assert.Contains(t, err.Error(), "exited with status 7")

	missing := filepath.Join(dir, "no-such-worker")
	h2, err := host.New(ctx, nil, host.WithWorker(missing))
	require.NoError(t, err)
	defer h2.Close(ctx)
	err = h2.LoadModule(ctx, cb, testkitWasm(t))
	require.ErrorAs(t, err, &le)
	assert.Equal(t, host.InvalidArgument, le.Kind(), "%v", err)
	assert.Contains(t, err.Error(), missing)
}

// TestProcessEverySettingLoads: every per-callback setting that changes
// how an engine is built or a module compiled (max_stack, which is a
// wasmtime engine of its own; fuel, the metered rewrite; max_cpu; WASI;
// a SIMD module) loads under isolation: process on both engines and
// serves a call: the engines a worker needs exist before its filter.
func TestProcessEverySettingLoads(t *testing.T) {
	simd := wat.Must(`(module
  (memory (export "memory") 1)
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 1024))
  (func (export "double") (param $f i32) (result i32)
    (local $in i32) (local $out i32)
    (local.set $in (i32.load offset=16 (i32.load offset=16 (local.get $f))))
    (local.set $out (i32.load offset=16 (i32.add (i32.load offset=16 (local.get $f)) (i32.const 32))))
    (v128.store (local.get $out) (f32x4.add (v128.load (local.get $in)) (v128.load (local.get $in))))
    (i32.const 0)))`)
	settings := map[string]func(*config.Callback){
		"max_stack 64KiB": func(cb *config.Callback) { cb.Limits.MaxStack = 64 << 10 },
		"max_stack 4MiB":  func(cb *config.Callback) { cb.Limits.MaxStack = 4 << 20 },
		"fuel":            func(cb *config.Callback) { cb.Limits.Fuel = 1_000_000 },
		"fuel and stack":  func(cb *config.Callback) { cb.Limits.Fuel = 1_000_000; cb.Limits.MaxStack = 256 << 10 },
		"max_cpu":         func(cb *config.Callback) { cb.Limits.MaxCPU = time.Second },
		"wasi":            func(cb *config.Callback) { cb.WASI = config.WASIMinimal },
		"small memory":    func(cb *config.Callback) { cb.Limits.MaxMemory = 2 << 16 },
		"one instance":    func(cb *config.Callback) { cb.MaxInstances = 1 },
	}
	for _, engine := range engineNames() {
		t.Run(engine, func(t *testing.T) {
			ctx := context.Background()
			h, err := host.New(ctx, nil, host.WithWorker(workerPath(t, false)), host.WithLogger(slog.New(slog.DiscardHandler)))
			require.NoError(t, err)
			t.Cleanup(func() { _ = h.Close(ctx) })
			i := 0
			for name, set := range settings {
				i++
				cb := config.DefaultCallback()
				cb.Name, cb.Export, cb.Signature, cb.Engine, cb.Isolation = fmt.Sprintf("scale%d", i), "scale", testkitSigs["scale"], engine, config.IsolationProcess
				cb.Limits.Timeout = 10 * time.Second
				set(&cb)
				require.NoError(t, h.LoadModule(ctx, cb, testkitWasm(t)), name)
				outs, err := h.Invoke(ctx, cb.Name, abi.From([]float32{1, 2}), abi.Scalar[float32](3))
				require.NoError(t, err, name)
				assert.Equal(t, []float32{3, 6}, abi.MustView[float32](outs[0]), name)
			}
			cb := config.DefaultCallback()
			cb.Name, cb.Export, cb.Signature, cb.Engine, cb.Isolation = "double", "double", "(x: f32[4]) -> f32[4]", engine, config.IsolationProcess
			cb.Limits.Timeout = 10 * time.Second
			require.NoError(t, h.LoadModule(ctx, cb, simd), "a SIMD module")
			outs, err := h.Invoke(ctx, "double", abi.From([]float32{1, 2, 3, 4}))
			require.NoError(t, err)
			assert.Equal(t, []float32{2, 4, 6, 8}, abi.MustView[float32](outs[0]))
		})
	}
}

// counter's count export adds one to its instance's count and returns it:
// 1, 2, 3 on a pooled instance, 1 every time on a fresh one.
const counter = `(module
  (memory (export "memory") 1)
  (global $n (mut i32) (i32.const 0))
  (func (export "callbox_abi_version") (result i32) (i32.const 1))
  (func (export "callbox_alloc") (param i32 i32) (result i32) (i32.const 1024))
  (func (export "count") (param $f i32) (result i32)
    (global.set $n (i32.add (global.get $n) (i32.const 1)))
    (i32.store (i32.load offset=16 (i32.load offset=16 (local.get $f))) (global.get $n))
    (i32.const 0)))`

// TestProcessFreshHasNoState: isolation: process-fresh is both walls:
// each call on a new instance, as fresh (no state from one call reaches
// the next), in a worker process, as process (the worker itself is
// reused); process alone keeps its instances' state.
func TestProcessFreshHasNoState(t *testing.T) {
	wasm := wat.Must(counter)
	for _, engine := range engineNames() {
		t.Run(engine, func(t *testing.T) {
			ctx := context.Background()
			h, err := host.New(ctx, nil, host.WithWorker(workerPath(t, false)), host.WithLogger(slog.New(slog.DiscardHandler)))
			require.NoError(t, err)
			t.Cleanup(func() { _ = h.Close(ctx) })
			counts := map[string][]int32{}
			for _, iso := range []string{config.IsolationProcess, config.IsolationProcessFresh} {
				cb := config.DefaultCallback()
				cb.Name, cb.Export, cb.Signature, cb.Engine, cb.Isolation = iso, "count", "() -> s32[]", engine, iso
				cb.Limits.Timeout, cb.MaxInstances = 10*time.Second, 1
				require.NoError(t, h.LoadModule(ctx, cb, wasm))
				pid := workerOf(t, h, iso).PID
				require.NotZero(t, pid)
				for range 3 {
					out := abi.Scalar[int32](0)
					_, err := h.Do(ctx, &host.Request{Callback: iso, Outputs: []host.Tensor{out}})
					require.NoError(t, err)
					counts[iso] = append(counts[iso], abi.MustView[int32](out)[0])
				}
				assert.Equal(t, pid, workerOf(t, h, iso).PID, "%s: one worker serves every call", iso)
				st, _ := h.PoolStats(iso)
				if iso == config.IsolationProcessFresh {
					assert.Equal(t, 0, st.Live, "no instance outlives its call")
				}
			}
			assert.Equal(t, []int32{1, 2, 3}, counts[config.IsolationProcess], "a pooled instance keeps its state")
			assert.Equal(t, []int32{1, 1, 1}, counts[config.IsolationProcessFresh], "every call starts from a new instance")
		})
	}
}

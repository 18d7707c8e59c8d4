//go:build linux

package procwall_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
	"github.com/seed4b3e0ccb/callbox/internal/testing/workerbin"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/procwall"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/wasmtime"
)

// TestMemoryOutlivesTheWorker: a view of an instance's memory stays
// readable after its worker dies and a call fails, until the host closes
// the instance. The host renews a call whose request never reached a
// dead worker by copying the inputs it staged out of the old instance's
// memory; when a failed exchange unmapped that memory, the copy read
// unmapped pages and the host process died of SIGSEGV (once in CI, in
// TestProcessChaos under the race detector).
func TestMemoryOutlivesTheWorker(t *testing.T) {
	worker, err := workerbin.Path(false)
	require.NoError(t, err)
	engines := []string{config.EngineWazero}
	if wasmtime.Available {
		engines = append(engines, config.EngineWasmtime)
	}
	wasm := wat.Must(`(module (memory (export "memory") 1)
		(func (export "f") (param i32) (result i32) local.get 0))`)
	ctx := context.Background()
	for _, name := range engines {
		e, err := procwall.New(ctx, procwall.Options{Engine: name, Worker: worker})
		require.NoError(t, err)
		m, err := e.Compile(ctx, wasm, sandbox.ModuleConfig{Name: "f", Limits: config.Limits{Timeout: 10 * time.Second}})
		require.NoError(t, err, name)
		inst, err := m.Instantiate(ctx, time.Time{})
		require.NoError(t, err, name)
		fn, err := inst.Export("f", []sandbox.ValType{sandbox.I32}, []sandbox.ValType{sandbox.I32})
		require.NoError(t, err, name)
		view := inst.Memory()
		copy(view[100:], "staged inputs")

		// A stopped worker takes the request but never answers: the
		// call's own deadline makes the host kill it, and the exchange
		// fails after the request was sent (the path that unmapped).
		pid := m.(interface{ WorkerPID() int }).WorkerPID()
		require.Positive(t, pid, name)
		require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
		// The stop takes effect when each of the worker's threads next
		// enters the kernel; until then it may still answer.
		require.Eventually(t, func() bool { return processState(pid) == "T" }, 30*time.Second, 5*time.Millisecond, name)
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		err = inst.Call(cctx, fn, []uint64{7})
		cancel()
		require.ErrorIs(t, err, abi.Timeout, name)
		assert.False(t, inst.(interface{ Alive() bool }).Alive(), name)
		assert.Equal(t, "staged inputs", string(view[100:113]), "%s: the view after the failed call", name)
		assert.Equal(t, "staged inputs", string(inst.Memory()[100:113]), "%s: Memory after the failed call", name)

		require.NoError(t, inst.Close(ctx))
		assert.Nil(t, inst.Memory(), name)
		require.NoError(t, m.Close(ctx))
		require.NoError(t, e.Close(ctx))
	}
}

// processState is the state letter of /proc/PID/stat ("T": stopped).
func processState(pid int) string {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+3 > len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

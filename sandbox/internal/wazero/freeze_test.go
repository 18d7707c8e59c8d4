package wazero_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"

	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/validate"
)

// freezeChild is the environment variable that makes this test binary
// the child of TestUnmeteredLoopFreezesTheProcess.
const freezeChild = "CALLBOX_TEST_FREEZE_CHILD"

// TestUnmeteredLoopFreezesTheProcess shows why every module wazero runs
// must keep its meter: a guest loop with no exit to Go, compiled by plain
// wazero, cannot be preempted, so the next garbage collection, which must
// stop every goroutine, waits for it forever, and every other goroutine
// waits with it. A child process runs such a loop; once it is looping, a
// ticker goroutine prints, then runtime.GC is called: the collection never
// returns and the ticker falls silent. (With the meter, host's
// TestRunawayGuestLetsGCFinish sees the same collection take
// milliseconds.) The test waits seconds for what must not happen, so a
// loaded machine can only make it pass, never fail.
func TestUnmeteredLoopFreezesTheProcess(t *testing.T) {
	if os.Getenv(freezeChild) != "" {
		freeze()
		return
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^TestUnmeteredLoopFreezesTheProcess$")
	cmd.Env = append(os.Environ(), freezeChild+"=1", "GOMAXPROCS=4")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	// Up to "collecting": the child is looping and its ticker runs.
	ticks := 0
	for line := range lines {
		if line == "tick" {
			ticks++
		}
		if line == "collecting" {
			break
		}
	}
	require.Positive(t, ticks, "the child's ticker ran while the guest looped")
	// Then nothing: no "collected", no tick, for as long as we wait.
	var after []string
	wait := time.After(3 * time.Second)
	for waiting := true; waiting; {
		select {
		case line, ok := <-lines:
			if !ok {
				waiting = false
				break
			}
			after = append(after, line)
		case <-wait:
			waiting = false
		}
	}
	go func() { // the child is killed on return; let its last lines go
		for range lines {
		}
	}()
	assert.NotContains(t, after, "collected", "the collection finished while the unmetered guest looped")
	assert.LessOrEqual(t, strings.Count(strings.Join(after, "\n"), "tick"), 1,
		"the ticker went on during the collection (at most one tick already on its way is allowed)")
}

// freeze is the child: an unmetered endless loop on plain wazero, a
// ticker, then a garbage collection.
func freeze() {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCoreFeatures(validate.WazeroFeatures))
	mod, err := rt.Instantiate(ctx, wat.Must(`(module (memory (export "memory") 1)
  (func (export "spin") (loop $l (i32.store (i32.const 0) (i32.add (i32.load (i32.const 0)) (i32.const 1))) (br $l))))`))
	if err != nil {
		panic(err)
	}
	go func() { _, _ = mod.ExportedFunction("spin").Call(ctx) }()
	mem := mod.ExportedMemory("memory")
	for {
		b, _ := mem.Read(0, 4)
		if binary.LittleEndian.Uint32(b) > 1_000_000 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	go func() {
		for {
			fmt.Println("tick")
			time.Sleep(20 * time.Millisecond)
		}
	}()
	time.Sleep(100 * time.Millisecond)
	fmt.Println("collecting")
	runtime.GC()
	fmt.Println("collected")
	select {}
}

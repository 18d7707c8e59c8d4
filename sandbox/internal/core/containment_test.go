package core_test

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/core"
)

// Regression tests for containment bugs found by the hostile suite and the
// fuzzers, at the level of the engine-neutral import code.

func hostFunc(t *testing.T, module, name string) core.HostFunc {
	for _, hf := range core.HostFuncs(true) {
		if hf.Module == module && hf.Name == name {
			return hf
		}
	}
	t.Fatalf("no host function %s.%s", module, name)
	return core.HostFunc{}
}

// Replacement characters are 3 bytes: a message of invalid UTF-8 used to
// grow to twice max_error.
func TestErrorCapHoldsForInvalidUTF8(t *testing.T) {
	lim := config.Limits{MaxError: 4096, MaxLog: 4096}
	g := core.NewGuestState(&lim, nil)
	mem := []byte(strings.Repeat("\xffA", 4096))
	g.HostError(mem, 0, uint32(len(mem)))
	msg, marker, ok := strings.Cut(g.ErrorMessage, "…[truncated ")
	require.True(t, ok)
	assert.LessOrEqual(t, len(msg), 4096)
	assert.True(t, utf8.ValidString(msg))
	assert.Equal(t, "\uFFFDA", msg[:4])
	assert.Equal(t, "6144 bytes]", marker, "1024 of the 4096 pairs fit: each is 4 bytes once replaced")

	// A cut never splits a rune.
	lim.MaxError = 4
	g.HostError([]byte("añb€"), 0, 7)
	assert.Equal(t, "añb…[truncated 3 bytes]", g.ErrorMessage)
}

// A long stdout write with no newline used to rescan the whole buffer for
// every 4 KiB line: quadratic host CPU that no timeout interrupts.
func TestStdoutFloodIsLinear(t *testing.T) {
	lim := config.Limits{MaxError: 64, MaxLog: 64 << 10}
	g := core.NewGuestState(&lim, nil)
	mem := make([]byte, 64<<20)
	for i := range mem {
		mem[i] = 'x'
	}
	binary.LittleEndian.PutUint32(mem[0:], 16)
	binary.LittleEndian.PutUint32(mem[4:], uint32(len(mem)-16))
	fdWrite := hostFunc(t, sandbox.WASIModule, "fd_write")
	g.Begin(context.Background())
	start := time.Now()
	for i := 0; i < 5; i++ {
		stack := []uint64{1, 0, 1, 8}
		fdWrite.Fn(g, mem, stack)
		require.Nil(t, g.Abort)
		require.Equal(t, uint64(0), stack[0])
	}
	g.End()
	// A generous bound (CI runs this under -race on 2 cores): a cost
	// quadratic in the 320 MiB written would take far longer; what the host
	// keeps is bounded exactly by the assertion below.
	assert.Less(t, time.Since(start), 30*time.Second, "320 MiB of stdout must cost linear time")
	assert.Equal(t, uint64(64<<10), g.LogBytes)
}

// A WASI sleep used to wait for the caller's context only: a guest could
// hold its caller for as long as it liked, past any timeout.
func TestPollOneoffHonoursTimeout(t *testing.T) {
	lim := config.Limits{Timeout: 50 * time.Millisecond, MaxError: 64, MaxLog: 64}
	g := core.NewGuestState(&lim, nil)
	mem := make([]byte, 256)
	binary.LittleEndian.PutUint32(mem[16:], 1)      // clock: monotonic
	binary.LittleEndian.PutUint64(mem[24:], 3600e9) // one hour
	poll := hostFunc(t, sandbox.WASIModule, "poll_oneoff")
	g.SetDeadline(time.Now().Add(lim.Timeout))
	g.Begin(context.Background())
	start := time.Now()
	poll.Fn(g, mem, []uint64{0, 64, 1, 128})
	g.End()
	assert.Less(t, time.Since(start), time.Second)
	require.NotNil(t, g.Abort)
	assert.Equal(t, abi.Timeout, g.Abort.Class)

	// A sleep within the timeout still sleeps and succeeds.
	binary.LittleEndian.PutUint64(mem[24:], uint64(5*time.Millisecond))
	g.SetDeadline(time.Now().Add(lim.Timeout))
	g.Begin(context.Background())
	stack := []uint64{0, 64, 1, 128}
	poll.Fn(g, mem, stack)
	g.End()
	assert.Nil(t, g.Abort)
	assert.Equal(t, uint64(0), stack[0])
}

// Capping reads no more of a message than it keeps: megabytes of invalid
// UTF-8 cost the host no more than a few KiB.
func TestErrorCapReadsOnlyTheCap(t *testing.T) {
	lim := config.Limits{MaxError: 4096, MaxLog: 4096}
	g := core.NewGuestState(&lim, nil)
	mem := make([]byte, 64<<20)
	for i := range mem {
		mem[i] = 0xff
	}
	start := time.Now()
	for i := 0; i < 100; i++ {
		g.HostError(mem, 0, uint32(len(mem)))
	}
	assert.Less(t, time.Since(start), time.Second, "100 calls over 64 MiB of invalid UTF-8")
	assert.True(t, strings.HasPrefix(g.ErrorMessage, strings.Repeat("\uFFFD", 1365)+"…[truncated"))
}

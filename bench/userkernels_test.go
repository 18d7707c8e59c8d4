package bench

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// BenchmarkUserKernels is target 13 of docs/PERFORMANCE.md on its own
// (make bench runs it with the rest): the users' kernels against Go's
// loops, and their raw loops on every engine variant, 7 interleaved
// repetitions. Run it with -benchtime 1x:
//
//	go test -run XXX -bench UserKernels -benchtime 1x .  (in bench/)
func BenchmarkUserKernels(b *testing.B) {
	for i := 0; i < b.N; i++ {
		for _, r := range MeasureUserKernels(context.Background(), DefaultReps, 200*time.Millisecond) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
			b.Logf("%s (%s): Go's loop %.0f µs", r.Kernel.Name, r.Kernel.Lang, median(r.GoWall)/1e3)
			for _, e := range Engines() {
				b.Logf("  callbox %s: kernel %.2fx Go, whole call %.2fx", e, r.GuestRatio(e), r.CallRatio(e))
			}
			for _, v := range []string{RawWazero, RawWazeroMetered, RawWasmtimeEpoch, RawWasmtimePlain} {
				b.Logf("  raw %s: %.2fx Go", v, r.RawRatio(v))
			}
		}
	}
}

// Every user kernel's callback and raw loop computes Go's result on every
// engine variant (measureUserKernel compares them bit for bit before it
// times anything), and the target reads a check per kernel.
func TestMeasureUserKernels(t *testing.T) {
	res := MeasureUserKernels(context.Background(), 2, time.Millisecond)
	require.Len(t, res, len(UserKernels))
	raws := []string{RawWazero, RawWazeroMetered}
	if engines.WasmtimeAvailable() {
		raws = append(raws, RawWasmtimeEpoch, RawWasmtimePlain)
	}
	for _, r := range res {
		require.NoError(t, r.Err)
		assert.Len(t, r.Go, 2)
		for _, e := range Engines() {
			assert.Len(t, r.Call[e], 2, e)
			assert.Greater(t, r.GuestRatio(e), 0.0, e)
			assert.Greater(t, r.CallRatio(e), 0.0, e)
		}
		for _, v := range raws {
			assert.False(t, math.IsNaN(r.RawRatio(v)), "%s: %s", r.Kernel.Name, v)
		}
	}
	rep := &Report{UserKernels: res}
	tg := rep.userKernelsTarget()
	assert.Equal(t, 13, tg.N)
	targeted := 0
	for _, k := range UserKernels {
		if !k.Tuned {
			targeted++
		}
	}
	require.Equal(t, 3, targeted, "clip, normalize, digitize; clip_unchecked is shown, not held to the target")
	require.Len(t, tg.Checks, targeted)
	for _, c := range tg.Checks {
		assert.True(t, c.Measured, c.What)
	}
	var md strings.Builder
	require.NoError(t, rep.WriteMarkdown(&md, "performance.png"))
	assert.Contains(t, md.String(), "### Users' kernels")
	assert.Contains(t, md.String(), "| `digitize` (C) | Go's loop |")
	assert.Contains(t, md.String(), "raw loop (loops.c), wazero, metered")
	assert.Contains(t, md.String(), "**clip (AssemblyScript, ")
}

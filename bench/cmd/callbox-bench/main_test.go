package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A tiny run of callbox-bench: it prints the table and the targets,
// writes the chart and the report, and the report links the chart.
func TestBenchCommandWritesReport(t *testing.T) {
	dir := t.TempDir()
	report := filepath.Join(dir, "PERFORMANCE.md")
	elixir := filepath.Join(dir, "bench-elixir.txt")
	require.NoError(t, os.WriteFile(elixir, []byte("elixir copy_f32 wazero 1KiB call median_ns_per_call 800.0 min 790.0 ratio_to_capi median 1.45 best_round 1.4\n"), 0o644))
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--no-targets", "--quiet", "--run", "^tiny-1KiB/(go-native|raw-wazero|callbox-wazero)$",
		"--benchtime", "2ms", "--reps", "1", "--write", report, "--elixir-bench", elixir}, &stdout, &stderr)
	require.Equal(t, exitOK, code, stderr.String())
	assert.Contains(t, stdout.String(), "callbox wazero: pooled, timeout, copy")
	assert.Contains(t, stdout.String(), "target 1:")

	md, err := os.ReadFile(report)
	require.NoError(t, err)
	assert.Contains(t, string(md), "| callbox wazero: pooled, timeout, copy |")
	assert.Contains(t, string(md), "(performance.png)")
	assert.Contains(t, string(md), "`callbox-bench --benchtime=2ms")
	assert.NotContains(t, string(md), "--elixir-bench", "an input file is no part of the command that reproduces the run")
	assert.Contains(t, string(md), "## Through the Elixir NIF")
	assert.Contains(t, string(md), "| 15 | Elixir: a 1 KiB call through the NIF")
	assert.Contains(t, string(md), "wazero: Callbox.call/3 / callbox_call from C: 1.45x")
	png, err := os.ReadFile(filepath.Join(dir, "performance.png"))
	require.NoError(t, err)
	assert.Equal(t, []byte("\x89PNG"), png[:4])
}

func TestBenchCommandRejectsBadFilter(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--run", "("}, &stdout, &stderr)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr.String(), "--run")
}

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
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--no-targets", "--quiet", "--run", "^tiny-1KiB/(go-native|raw-wazero|callbox-wazero)$",
		"--benchtime", "2ms", "--reps", "1", "--write", report}, &stdout, &stderr)
	require.Equal(t, exitOK, code, stderr.String())
	assert.Contains(t, stdout.String(), "callbox wazero: pooled, timeout, copy")
	assert.Contains(t, stdout.String(), "target 1:")

	md, err := os.ReadFile(report)
	require.NoError(t, err)
	assert.Contains(t, string(md), "| callbox wazero: pooled, timeout, copy |")
	assert.Contains(t, string(md), "(performance.png)")
	assert.Contains(t, string(md), "`callbox-bench --benchtime=2ms")
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

package engines_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFindWorker: CALLBOX_WORKER wins; without it, a worker beside the
// program is found; with none anywhere the error says where it looked
// (each place once: the test binary is both the program and the file
// this code runs from) and how to name one or do without.
func TestFindWorker(t *testing.T) {
	t.Setenv(engines.WorkerEnv, "/opt/cb/callbox-worker")
	w, err := engines.FindWorker()
	require.NoError(t, err)
	assert.Equal(t, "/opt/cb/callbox-worker", w)

	t.Setenv(engines.WorkerEnv, "")
	exe, err := os.Executable()
	require.NoError(t, err)
	beside := filepath.Join(filepath.Dir(exe), engines.WorkerName)
	if _, err := os.Stat(beside); err == nil {
		t.Skipf("%s exists already", beside)
	}
	_, err = engines.FindWorker()
	require.Error(t, err)
	assert.Equal(t, 1, strings.Count(err.Error(), beside), "names where it looked, each place once: %v", err)
	assert.Contains(t, err.Error(), "host.WorkerMain")
	assert.Contains(t, err.Error(), "worker key")
	assert.Contains(t, err.Error(), engines.WorkerEnv)

	require.NoError(t, os.WriteFile(beside, []byte("#!/bin/sh\n"), 0o755))
	t.Cleanup(func() { _ = os.Remove(beside) })
	w, err = engines.FindWorker()
	require.NoError(t, err)
	assert.Equal(t, beside, w, "the test binary is the file this code runs from")
}

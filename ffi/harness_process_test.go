//go:build cgo

// The C harness and the process around the library: many opens and
// closes (RSS), the signal handlers it chains to, a fork after use.

package main

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// TestHarnessOpenCloseSoak opens and closes a host a thousand times from C
// (the config text, both engines' callbacks, a call on each engine on
// every tenth):
// a closed host releases everything, so the RSS after the first hundred
// rounds bounds it at the end. Before closed hosts were retired from the
// handle table, 300 rounds grew the RSS by over 100 MiB.
func TestHarnessOpenCloseSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("a thousand opens: not in -short")
	}
	r := harnessGroups(t, false, nil, "soak1000")
	var rounds int
	var first, half, last int64
	_, err := fmt.Sscanf(r.vals["soak"], "%d %d %d %d", &rounds, &first, &half, &last)
	require.NoError(t, err, "soak line %q", r.vals["soak"])
	t.Logf("RSS after %d rounds: %d MiB, after %d: %d MiB, after %d: %d MiB", rounds/10, first>>10, rounds/2, half>>10, rounds, last>>10)
	assert.Less(t, last-first, int64(soakGrowthKiB), "RSS grew from %d to %d KiB over %d open/close rounds", first, last, rounds-rounds/10)
}

// soakGrowthKiB bounds the RSS growth of 900 open/close rounds.
const soakGrowthKiB = 32 << 10

// TestHarnessSignalFlags: cancel_on_signal keeps the program's SA_RESTART
// choice and mask (issue: Ctrl-C no longer interrupted Python's os.read).
func TestHarnessSignalFlags(t *testing.T) {
	r := harnessGroups(t, false, nil, "sigflags")
	r.ok(t, "sigflags_token", "sigflags_install_plain", "sigflags_install_restart", "sigflags_install_ignored", "sigflags_free")
	assert.Equal(t, "restart=0 mask_term=1", r.vals["sigflags_plain"], "a handler without SA_RESTART stays without it, with its mask")
	assert.Equal(t, "restart=1", r.vals["sigflags_restart"])
	assert.Equal(t, "restart=1", r.vals["sigflags_ignored"], "an ignored signal interrupted nothing before")
}

// TestHarnessFork forks a child after the parent used the library: the
// child's every entry fails at once with FailedPrecondition naming spawn
// and forkserver (the Go runtime does not survive fork, and entering it
// would hang), and the parent keeps serving.
func TestHarnessFork(t *testing.T) {
	r := harnessGroups(t, false, nil, "fork")
	r.ok(t, "fork_parent_before", "fork_parent_after", "fork_signal_token")
	assert.Equal(t, "Timeout", r.vals["fork_signal_call"], "a signal to the fork child canceled the parent's call")
	assert.Equal(t, "0", r.vals["fork_child_exit"], "the child finished (a hang would end in SIGALRM)")
	for _, label := range []string{"fork_child_open", "fork_child_call"} {
		r.fails(t, label, abi.FailedPrecondition, "forked from one that had loaded libcallbox", `"spawn"`, "forkserver")
	}
	assert.Equal(t, "0", r.vals["fork_child_handle"], "a failed open leaves 0")
	r.xfails(t, "fork_child_xla", abi.CodeFailedPrecondition, "callbox_xla_ffi: this process was forked")
	assert.Equal(t, "0", r.vals["fork_child_dtypes"])
	// Every entry of the header that returns a callbox_error, read from
	// callbox.h so that a new entry cannot go untested: each refused at
	// once, naming itself. (Not from exports.c's guards: an entry whose
	// guard was removed would leave that list too.)
	hdr, err := os.ReadFile("include/callbox.h")
	require.NoError(t, err)
	entries := regexp.MustCompile(`(?m)^callbox_error \*(callbox_[a-z_]+)\(`).FindAllStringSubmatch(string(hdr), -1)
	require.Greater(t, len(entries), 20, "callbox.h's entries")
	for _, m := range entries {
		name := m[1]
		if name == "callbox_open" || name == "callbox_call" { // fork_child_open and fork_child_call above
			continue
		}
		r.fails(t, "fork_entry_"+name, abi.FailedPrecondition, name+": this process was forked")
	}
	assert.Equal(t, "0", r.vals["fork_child_cancel_token"], "no token made")
	assert.Equal(t, "0", r.vals["fork_child_default_host"], "no host reported")
	assert.Equal(t, "9", r.vals["fork_child_cuda_call"], "FAILED_PRECONDITION")
	assert.Equal(t, "-1", r.vals["fork_child_cuda_stats"])
	ms, err := strconv.Atoi(r.vals["fork_child_ms"])
	require.NoError(t, err)
	assert.Less(t, ms, 5000, "the child's errors come at once (a hang ends at its 10 s alarm)")
}

package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProfile: callbox profile prints the callback's functions and writes
// a pprof file go tool pprof reads, whose samples add up to the fuel it
// printed; a callback whose every call fails exits as a failed call
// does; a missing -o directory is a usage error before anything runs.
func TestProfile(t *testing.T) {
	dir := workspace(t, "")
	p := func(name string) string { return filepath.Join(dir, name) }
	code, out, stderr := cli(t, "profile", "-c", p("config.yaml"), "scale", "--in", p("x.npy"), "--in", p("f.npy"), "-n", "5", "-o", p("guest.pprof"))
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, out, `callback "scale" on wazero: 5 calls in `)
	assert.Contains(t, out, "self fuel")
	assert.Contains(t, out, " scale\n", "the export names its function in a stripped module")
	assert.Contains(t, out, "wrote "+p("guest.pprof"))

	f, err := os.Open(p("guest.pprof"))
	require.NoError(t, err)
	defer f.Close()
	pp, err := profile.Parse(f)
	require.NoError(t, err)
	assert.Equal(t, "fuel", pp.DefaultSampleType)
	require.NotEmpty(t, pp.Sample)
	names := map[string]bool{}
	for _, s := range pp.Sample {
		for _, l := range s.Location {
			names[l.Line[0].Function.Name] = true
		}
	}
	assert.True(t, names["scale"], "%v", names)

	code, _, stderr = cli(t, "profile", "-c", p("config.yaml"), "spin", "--in", p("x.npy"), "-n", "2")
	assert.Equal(t, exitCallback, code)
	assert.Contains(t, stderr, "every call failed")
	assert.Contains(t, stderr, "timeout after 50ms")

	code, _, stderr = cli(t, "profile", "-c", p("config.yaml"), "scale", "--in", p("x.npy"), "--in", p("f.npy"), "-o", p("nodir/guest.pprof"))
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "nodir")
}

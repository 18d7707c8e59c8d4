package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/ffi/include"
	"github.com/seed4b3e0ccb/callbox/internal/release"
)

// TestVersion: callbox version names the release, the guest ABI, the C
// API (callbox.h's) and both engines with the versions this binary was
// built with; --short prints the release alone.
func TestVersion(t *testing.T) {
	code, out, stderr := cli(t, "version")
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, `(?m)^callbox +`+release.Version+`$`, out)
	assert.Regexp(t, `(?m)^guest ABI +v1$`, out)
	assert.Regexp(t, `(?m)^C API +`+include.Version()+` `, out)
	assert.Regexp(t, `(?m)^wazero +v[0-9]+\.[0-9]+\.[0-9]+ +\(github.com/tetratelabs/wazero\)$`, out)
	assert.Regexp(t, `(?m)^wasmtime +v[0-9]+\.[0-9]+\.[0-9]+ +\(github.com/bytecodealliance/wasmtime-go/v[0-9]+\)$`, out)
	assert.Regexp(t, `(?m)^go +go1\.`, out)

	code, out, _ = cli(t, "version", "--short")
	require.Equal(t, exitOK, code)
	assert.Equal(t, release.Version+"\n", out)
}

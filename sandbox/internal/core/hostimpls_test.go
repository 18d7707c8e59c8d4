package core

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/sandbox"
)

// TestEveryImportHasOneImplementation: the imports the contract lists
// (sandbox.Imports, which the load check holds modules to) and the
// implementations here are the same set, each name once, so every engine
// provides exactly what a module may import.
func TestEveryImportHasOneImplementation(t *testing.T) {
	impls := hostImpls()
	seen := map[string]bool{}
	for _, imp := range sandbox.Imports(true) {
		key := imp.Module + "." + imp.Name
		require.False(t, seen[key], "%s listed twice", key)
		seen[key] = true
		assert.Contains(t, impls, key, "no implementation of %s", key)
	}
	for key := range impls {
		assert.True(t, seen[key], "%s is implemented but not a listed import", key)
	}
	assert.Len(t, sandbox.Imports(false), 2, "without WASI: callbox.error and callbox.log")
	assert.Len(t, HostFuncs(true), len(seen))
}

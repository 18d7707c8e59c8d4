package release_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/ffi/include"
	"github.com/seed4b3e0ccb/callbox/internal/release"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile("../../" + path)
	require.NoError(t, err)
	return string(b)
}

// TestOneReleaseTrain: the changelog's newest entry, the Python package
// and the release constant name one version, and the entry names the C
// API version callbox.h defines.
func TestOneReleaseTrain(t *testing.T) {
	changelog := read(t, "CHANGELOG.md")
	m := regexp.MustCompile(`(?m)^## \[([0-9]+\.[0-9]+\.[0-9]+)\]`).FindStringSubmatch(changelog)
	require.NotNil(t, m, "CHANGELOG.md has no release entry")
	assert.Equal(t, release.Version, m[1], "CHANGELOG.md's newest entry")
	entry := changelog[strings.Index(changelog, m[0]):]
	if next := strings.Index(entry[len(m[0]):], "\n## "); next >= 0 {
		entry = entry[:len(m[0])+next]
	}
	capi := include.Version()
	assert.Contains(t, entry, "C API "+capi[:strings.LastIndex(capi, ".")], "the newest entry names the C API version")

	py := regexp.MustCompile(`(?m)^__version__ = "([^"]+)"$`).FindStringSubmatch(read(t, "python/callbox/__init__.py"))
	require.NotNil(t, py)
	assert.Equal(t, release.Version, py[1], "python/callbox/__init__.py's __version__")
}

// TestLicenseCopies: the Python package carries the root LICENSE
// unchanged (its sdist cannot reach files above python/).
func TestLicenseCopies(t *testing.T) {
	root := read(t, "LICENSE")
	require.Contains(t, root, "Apache License")
	assert.Equal(t, root, read(t, "python/LICENSE"), "python/LICENSE differs from LICENSE: cp LICENSE python/")
}

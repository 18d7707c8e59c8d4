package host_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHostDoesNotLinkTheConfigLoader: a program that embeds callbox, or the
// c-shared library, builds its config.Config in code and must not link the
// file loader (config/configfile) or viper and its dependencies.
func TestHostDoesNotLinkTheConfigLoader(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/seed4b3e0ccb/callbox/config")
	for _, dep := range deps {
		assert.False(t, strings.Contains(dep, "spf13/") || strings.HasSuffix(dep, "/config/configfile"),
			"host depends on %s", dep)
	}
}

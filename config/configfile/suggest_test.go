package configfile

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/config"
)

func TestLoadedConfigsValidate(t *testing.T) {
	for name, content := range equivalentConfigs {
		cfg, err := LoadEnv(writeConfig(t, name, content), []string{"CALLBOX_DEFAULTS_TIMEOUT=1h"})
		require.NoError(t, err, name)
		assert.NoError(t, cfg.Validate(), name)
	}
}

func TestSuggest(t *testing.T) {
	keys := keyNames(config.Keys(), true)
	tests := map[string]string{
		"timout":     "timeout",
		"Timeout":    "timeout",
		"max_mem":    "max_memory",
		"maxmemory":  "max_memory",
		"max-stack":  "max_stack",
		"fule":       "fuel",
		"wsai":       "wasi",
		"color":      "",
		"instances":  "",
		"signatures": "signature",
	}
	for key, want := range tests {
		got, ok := closest(key, keys)
		if want == "" {
			assert.False(t, ok, "%s: unexpected suggestion %s", key, got)
			continue
		}
		assert.Equal(t, want, got, key)
	}
}

func TestEditDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "abc", 3}, {"abc", "", 3}, {"fuel", "fuel", 0},
		{"fule", "fuel", 1}, {"timout", "timeout", 1}, {"kitten", "sitting", 3},
		{"ca", "abc", 3}, {"max_mem", "max_log", 3},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, editDistance(tt.a, tt.b), "%q %q", tt.a, tt.b)
		assert.Equal(t, tt.want, editDistance(tt.b, tt.a), "%q %q", tt.b, tt.a)
	}
}

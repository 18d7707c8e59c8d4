package lowering

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/config/configfile"
)

func TestConfigCatalogErrors(t *testing.T) {
	dir := t.TempDir()
	prebuilt := func(name string) string {
		p, err := filepath.Abs(filepath.Join("..", "guests", "prebuilt", name))
		require.NoError(t, err)
		return p
	}
	write := func(body string) *config.Config {
		path := filepath.Join(dir, "c.yaml")
		require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
		cfg, err := configfile.Load(path)
		require.NoError(t, err)
		return cfg
	}

	// The signature comes from the module's section when the config has none.
	cat, err := ConfigCatalog(write("callbacks:\n  scale:\n    module: " + prebuilt("rust-scale.wasm") + "\n"))
	require.NoError(t, err)
	c, ok := cat.Callee("scale")
	require.True(t, ok)
	assert.Equal(t, "(x: f32[n], factor: f32[]) -> f32[n]", c.Signature.String())

	// A config signature that disagrees with the module's is refused.
	_, err = ConfigCatalog(write("callbacks:\n  scale:\n    module: " + prebuilt("rust-scale.wasm") + "\n    signature: \"(x: f32[n]) -> f32[n]\"\n"))
	assert.ErrorContains(t, err, `callbacks.scale.signature "(x: f32[n]) -> f32[n]" disagrees with the module's own signature "(x: f32[n], factor: f32[]) -> f32[n]" for export scale`)

	// A module whose signatures only its export can tell needs a host.
	_, err = ConfigCatalog(write("callbacks:\n  softmax:\n    module: " + prebuilt("assemblyscript-softmax.wasm") + "\n"))
	assert.ErrorContains(t, err, "has no signature section and the config gives none; lower with a running host (HostCatalog)")
}

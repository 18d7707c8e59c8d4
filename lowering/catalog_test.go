package lowering

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/config/configfile"
	"github.com/seed4b3e0ccb/callbox/host"
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

// TestCatalogsNameAnAmbiguousIDsCallbacksByName: two callbacks of one
// module, export and signature share a content id. Under the same
// settings a program names them by id; under different limits the host
// would refuse the id, so both catalogs, the config's and the host's,
// give the program their names instead.
func TestCatalogsNameAnAmbiguousIDsCallbacksByName(t *testing.T) {
	mod, err := filepath.Abs(filepath.Join("..", "guests", "prebuilt", "rust-scale.wasm"))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "c.yaml")
	entry := func(name, timeout string) string {
		return "  " + name + ":\n    module: " + mod + "\n    export: scale\n    timeout: " + timeout + "\n"
	}
	require.NoError(t, os.WriteFile(path, []byte("callbacks:\n"+entry("fast", "100ms")+entry("fast_too", "100ms")+entry("slow", "3s")), 0o644))
	cfg, err := configfile.Load(path)
	require.NoError(t, err)
	fromConfig, err := ConfigCatalog(cfg)
	require.NoError(t, err)
	h, err := host.New(context.Background(), cfg)
	require.NoError(t, err)
	defer h.Close(context.Background())
	for _, cat := range []Catalog{fromConfig, HostCatalog(h)} {
		for _, n := range []string{"fast", "fast_too", "slow"} {
			c, ok := cat.Callee(n)
			require.True(t, ok)
			assert.True(t, c.Ambiguous, n)
			assert.Equal(t, n, c.Key(), "named by name")
		}
	}

	require.NoError(t, os.WriteFile(path, []byte("callbacks:\n"+entry("fast", "100ms")+entry("fast_too", "100ms")), 0o644))
	cfg, err = configfile.Load(path)
	require.NoError(t, err)
	same, err := ConfigCatalog(cfg)
	require.NoError(t, err)
	c, _ := same.Callee("fast")
	assert.False(t, c.Ambiguous)
	assert.Equal(t, c.ID, c.Key(), "the same settings: named by id")
}

package configfile

import (
	"github.com/seed4b3e0ccb/callbox/config"

	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to Load as a YAML, a TOML and a JSON file.
// Load must not panic; it returns exactly one of a config.Config and an error; a
// config.Config it returns passes Validate; every problem it reports names the
// file or an environment variable.
func FuzzLoad(f *testing.F) {
	for _, content := range equivalentConfigs {
		f.Add([]byte(content))
	}
	if example, err := os.ReadFile(examplePath); err == nil {
		f.Add(example)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		for _, ext := range []string{".yaml", ".toml", ".json"} {
			path := filepath.Join(dir, "config"+ext)
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := Load(path)
			if (cfg == nil) == (err == nil) {
				t.Fatalf("%s: got config %v and error %v", ext, cfg, err)
			}
			if cfg != nil {
				if verr := cfg.Validate(); verr != nil {
					t.Fatalf("%s: loaded config fails Validate: %v", ext, verr)
				}
				continue
			}
			checkErrorsNamePlace(t, err, path)
		}
	})
}

// checkErrorsNamePlace requires every part of err to be an *config.Error naming
// path, or an environment variable.
func checkErrorsNamePlace(t *testing.T, err error, path string) {
	t.Helper()
	parts := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		parts = joined.Unwrap()
	}
	for _, part := range parts {
		var e *config.Error
		if !errors.As(part, &e) {
			t.Fatalf("not a *config.Error: %v", part)
		}
		if e.File != path && !strings.HasPrefix(e.Key, envPrefix) {
			t.Fatalf("error names neither the file nor a variable: %v", e)
		}
	}
}

// FuzzLoadEnv fuzzes the environment overrides: a YAML file (fuzzed) and
// CALLBOX_ variables (fuzzed, one NAME=value per line; a line without the
// CALLBOX_ prefix gets it). LoadEnv must not panic; it returns exactly one
// of a config.Config and an error; a config.Config passes Validate; every problem names
// the file or the variable.
func FuzzLoadEnv(f *testing.F) {
	base := "callbox.yaml"
	yaml := equivalentConfigs["config.yaml"]
	for _, env := range []string{
		"CALLBOX_DEFAULTS_TIMEOUT=2s\nCALLBOX_CALLBACKS_SCALE_MAX_MEMORY=1MiB",
		"CALLBOX_CALLBACKS_SCALE_ENGINE=wazero\nCALLBOX_CACHE_DIR=/tmp/x",
		"CALLBOX_DEFAULTS_MAX_INSTANCES=0x10\nCALLBOX_DEFAULTS_FUEL=-1",
		"CALLBOX_CALLBACKS_NOPE_TIMEOUT=1s\nCALLBOX_DEFAULTS_BOGUS=1",
		"CALLBOX_CALLBACKS_SCALE_SIGNATURE=(x: f32[n]) -> $x\nCALLBOX_CALLBACKS_SCALE_WASI=minimal",
		"DEFAULTS_TIMEOUT=99999999999h\nCALLBOX_DEFAULTS_MAX_MEMORY=5GiB\nCALLBOX_DEFAULTS_MAX_LOG=",
	} {
		f.Add([]byte(yaml), env)
	}
	f.Add([]byte("callbacks: {a: {module: m.wasm, signature: '() -> u8[]'}}"), "CALLBOX_CALLBACKS_A_ISOLATION=fresh")
	f.Fuzz(func(t *testing.T, data []byte, env string) {
		path := filepath.Join(t.TempDir(), base)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var environ []string
		for _, line := range strings.Split(env, "\n") {
			if !strings.HasPrefix(line, envPrefix) {
				line = envPrefix + line
			}
			environ = append(environ, line)
		}
		cfg, err := LoadEnv(path, environ)
		if (cfg == nil) == (err == nil) {
			t.Fatalf("got config %v and error %v", cfg, err)
		}
		if cfg != nil {
			if verr := cfg.Validate(); verr != nil {
				t.Fatalf("loaded config fails Validate: %v", verr)
			}
			return
		}
		checkErrorsNamePlace(t, err, path)
	})
}

package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to Load as a YAML, a TOML and a JSON file.
// Load must not panic; it returns exactly one of a Config and an error; a
// Config it returns passes Validate; every problem it reports names the
// file or an environment variable.
func FuzzLoad(f *testing.F) {
	for _, content := range equivalentConfigs {
		f.Add([]byte(content))
	}
	if example, err := os.ReadFile("example.yaml"); err == nil {
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

// checkErrorsNamePlace requires every part of err to be an *Error naming
// path, or an environment variable.
func checkErrorsNamePlace(t *testing.T, err error, path string) {
	t.Helper()
	parts := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		parts = joined.Unwrap()
	}
	for _, part := range parts {
		var e *Error
		if !errors.As(part, &e) {
			t.Fatalf("not a *config.Error: %v", part)
		}
		if e.File != path && !strings.HasPrefix(e.Key, envPrefix) {
			t.Fatalf("error names neither the file nor a variable: %v", e)
		}
	}
}

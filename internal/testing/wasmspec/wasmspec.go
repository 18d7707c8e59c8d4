// Package wasmspec reads the WebAssembly specification test suite that
// the wazero module this project depends on ships (wast2json's JSON
// scripts and their .wasm modules, under the module's
// internal/integration_test/spectest/<suite>/testdata), from the module
// cache, for tests: it is never copied into this repository.
package wasmspec

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Enabled are the suites of the features callbox enables, as wazero's
// testdata folders name them: WebAssembly 2.0 (SIMD included), tail calls
// and extended constant expressions.
var Enabled = []string{"v2", "tail-call", "extended-const"}

// Script is one .wast file as wast2json wrote it.
type Script struct {
	SourceFile string    `json:"source_filename"`
	Commands   []Command `json:"commands"`

	// Dir is the folder of the script's .json and .wasm files; Name the
	// suite and the .wast file's base name ("v2/i32").
	Dir, Name string
}

// Command is one command of a script.
type Command struct {
	Type       string  `json:"type"`
	Line       int     `json:"line"`
	Filename   string  `json:"filename"`
	Name       string  `json:"name"`
	As         string  `json:"as"`
	Text       string  `json:"text"`
	ModuleType string  `json:"module_type"`
	Action     *Action `json:"action"`
	Expected   []Value `json:"expected"`
}

// Action is what an assert_return, assert_trap, assert_exhaustion or
// action command does.
type Action struct {
	Type   string  `json:"type"` // "invoke" or "get"
	Module string  `json:"module"`
	Field  string  `json:"field"`
	Args   []Value `json:"args"`
}

// Value is an argument or an expected result: a number's bits as an
// unsigned decimal, "nan:canonical", "nan:arithmetic", "null", a list of
// lanes for v128, or absent (any reference).
type Value struct {
	Type     string          `json:"type"`
	LaneType string          `json:"lane_type"`
	Value    json.RawMessage `json:"value"`
}

// Where names a command for messages: "v2/i32.wast:12".
func (s *Script) Where(c Command) string { return fmt.Sprintf("%s.wast:%d", s.Name, c.Line) }

// Binary reports whether a command's module is a binary one (wast2json
// also writes text modules for assert_malformed, which no engine reads).
func (c Command) Binary() bool {
	return c.ModuleType != "text" && strings.HasSuffix(c.Filename, ".wasm")
}

// Module reads a command's module file.
func (s *Script) Module(c Command) ([]byte, error) {
	return os.ReadFile(filepath.Join(s.Dir, c.Filename))
}

// Root is wazero's spectest folder in the module cache.
func Root() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/tetratelabs/wazero").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m github.com/tetratelabs/wazero (the spec suite ships with it): %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "internal", "integration_test", "spectest"), nil
}

// Load reads every script of the named suites, sorted by suite order,
// then file name.
func Load(suites ...string) ([]*Script, error) {
	root, err := Root()
	if err != nil {
		return nil, err
	}
	var out []*Script
	for _, suite := range suites {
		dir := filepath.Join(root, suite, "testdata")
		files, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("no spec test scripts in %s (run go mod download)", dir)
		}
		sort.Strings(files)
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			s := &Script{Dir: dir, Name: suite + "/" + strings.TrimSuffix(filepath.Base(f), ".json")}
			if err := json.Unmarshal(raw, s); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// Invalid is one module the suite says no engine may accept.
type Invalid struct {
	Where string // "v2/i32.wast:12"
	Text  string // the suite's reason
	Wasm  []byte
}

// Invalids lists the binary assert_invalid and assert_malformed modules of
// the named suites.
func Invalids(suites ...string) ([]Invalid, error) {
	scripts, err := Load(suites...)
	if err != nil {
		return nil, err
	}
	var out []Invalid
	for _, s := range scripts {
		for _, c := range s.Commands {
			if (c.Type != "assert_invalid" && c.Type != "assert_malformed") || !c.Binary() {
				continue
			}
			wasm, err := s.Module(c)
			if err != nil {
				return nil, err
			}
			out = append(out, Invalid{Where: s.Where(c), Text: c.Text, Wasm: wasm})
		}
	}
	return out, nil
}

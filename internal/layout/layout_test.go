// Package layout checks that the package graph follows the design: data
// flows one way (config → host → sandbox), abi is the vocabulary every
// side shares, and no package reaches up to a layer above it.
package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/seed4b3e0ccb/callbox"

// pkg is what `go list -json` says of one package: its non-test imports,
// direct and transitive (a package's tests may import more: a test helper
// may load callbacks through host).
type pkg struct {
	ImportPath string
	Name       string
	Dir        string
	GoFiles    []string
	Deps       []string
}

// under reports whether path is dir or a package below it (both relative
// to the module).
func under(path, dir string) bool {
	rel := strings.TrimPrefix(path, module+"/")
	return rel == dir || strings.HasPrefix(rel, dir+"/")
}

// rule is one layer's constraint: a package under dir may depend on a
// package of ours only if allowed says so.
type rule struct {
	dir     string
	what    string
	allowed func(dep string) bool
	exact   bool // the package dir alone, not the ones below it
}

var rules = []rule{
	{"abi", "abi imports no package of ours", func(dep string) bool { return under(dep, "abi") }, false},
	{"config", "config builds only on abi", func(dep string) bool { return under(dep, "abi") || under(dep, "config") }, false},
	{"sandbox", "the engine layer sits below host: it builds on abi and config only", func(dep string) bool {
		return under(dep, "abi") || under(dep, "config") || under(dep, "sandbox")
	}, false},
	{"sandbox", "the contract is a leaf: the engines implement it, it imports none of them", func(dep string) bool {
		return under(dep, "abi") || under(dep, "config") || under(dep, "sandbox/internal/wasmbin") || under(dep, "sandbox/internal/meter")
	}, true},
	{"internal", "internal packages sit below host (only their tests may use it)", func(dep string) bool {
		for _, up := range []string{"host", "lowering", "ffi", "cuda", "cmd", "examples", "python"} {
			if under(dep, up) {
				return false
			}
		}
		return true
	}, false},
}

// violations lists every dependency of ours that breaks a rule.
func violations(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		if !under(p.ImportPath, "internal/testing") {
			for _, dep := range p.Deps {
				if under(dep, "internal/testing") {
					out = append(out, p.ImportPath+" imports "+dep+" (internal/testing holds helpers for tests only)")
				}
			}
		}
		for _, r := range rules {
			if !under(p.ImportPath, r.dir) || r.exact && p.ImportPath != module+"/"+r.dir {
				continue
			}
			for _, dep := range p.Deps {
				if strings.HasPrefix(dep, module+"/") && !r.allowed(dep) {
					out = append(out, p.ImportPath+" imports "+dep+" ("+r.what+")")
				}
			}
		}
	}
	return out
}

// list runs `go list -json` over the module rooted at dir.
func list(t *testing.T, dir string) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Name,Dir,GoFiles,Deps", "./...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestNoBackArrow: no package depends on a layer above its own.
func TestNoBackArrow(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := list(t, root)
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages; is %s the module root?", len(pkgs), root)
	}
	for _, v := range violations(pkgs) {
		t.Error(v)
	}
}

// The rules catch the back-arrow this layout removed (internal/bench,
// which drove host, below it) and the others they name.
func TestRulesCatchBackArrows(t *testing.T) {
	for _, c := range []struct{ from, to string }{
		{"internal/bench", "host"},
		{"sandbox", "host"},
		{"sandbox/internal/core", "host"},
		{"sandbox", "internal/testing/wat"},
		{"sandbox", "sandbox/internal/wazero"},
		{"host", "internal/testing/hostile"},
		{"abi", "config"},
		{"config", "sandbox"},
		{"internal/testing/wat", "cmd/callbox"},
	} {
		got := violations([]pkg{{ImportPath: module + "/" + c.from, Deps: []string{module + "/" + c.to}}})
		if len(got) == 0 {
			t.Errorf("%s importing %s: no violation", c.from, c.to)
		}
	}
	for _, c := range []struct{ from, to string }{
		{"host", "sandbox"},
		{"host", "sandbox/engines"},
		{"sandbox", "config"},
		{"sandbox/engines", "sandbox/internal/wazero"},
		{"bench", "host"},
		{"internal/tapgroup", "abi"},
	} {
		if got := violations([]pkg{{ImportPath: module + "/" + c.from, Deps: []string{module + "/" + c.to}}}); len(got) != 0 {
			t.Errorf("%s importing %s is allowed, got %q", c.from, c.to, got)
		}
	}
}

// TestLibraryGoModHasNoToolDependencies: what only the benchmark suite or
// an example needs (the Extism SDK, gonum/plot, an OpenTelemetry SDK or
// exporter, Prometheus) lives in that nested module's go.mod, never in the
// library's, so a program depending on callbox downloads none of it.
func TestLibraryGoModHasNoToolDependencies(t *testing.T) {
	mod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range []string{"extism", "gonum.org", "go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters", "prometheus"} {
		if strings.Contains(string(mod), dep) {
			t.Errorf("the library's go.mod requires %s", dep)
		}
	}
}

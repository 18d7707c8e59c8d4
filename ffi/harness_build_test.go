//go:build cgo

// The C harness (testdata/harness.c and the harness_*.c beside it, one a
// topic) drives a freshly built libcallbox through its C API and its XLA
// FFI handler, from C threads the Go runtime did not create. This file
// builds the library and the harness once per run; harness_run_test.go
// writes a config, runs harness groups and parses every line they print;
// the harness_*_test.go files beside them assert on a group each, by topic
// as the C files are.

package main

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// buildHarness builds libcallbox.so, the harness and the bench program
// into a temporary directory shared by the tests of this run.
func buildHarness(t testing.TB) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler (cc) on PATH: the C harness needs one")
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "callbox-harness-")
		if buildErr != nil {
			return
		}
		goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
		lib := filepath.Join(buildDir, "libcallbox.so")
		// Linked as make lib links it, exporting the C API only, plus the
		// engine's stack-switch knob the small-stack group looks up.
		mapFile, err := filepath.Abs("libcallbox-test.map")
		if err != nil {
			buildErr = err
			return
		}
		args := []string{"build", "-buildmode=c-shared", "-ldflags=-extldflags=-Wl,--version-script=" + mapFile, "-o", lib}
		if dir := os.Getenv("CALLBOX_LIB_COVERDIR"); dir != "" {
			// scripts/cover-ffi.sh: the library counts its coverage and
			// writes it into GOCOVERDIR as each harness process exits.
			args = append(args, "-cover", "-covermode=atomic", "-tags=callbox_cover")
		}
		out, err := exec.Command(goTool, append(args, ".")...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("building libcallbox: %v\n%s", err, out)
			return
		}
		// The harness is testdata/harness.c and its files by topic beside
		// it (testdata/harness_*.c, sharing testdata/harness.h).
		harnessSrcs, err := filepath.Glob("testdata/harness*.c")
		if err != nil {
			buildErr = err
			return
		}
		for _, prog := range []struct {
			name string
			srcs []string
		}{{"harness", harnessSrcs}, {"bench", []string{"testdata/bench.c"}}} {
			args := []string{"-O2", "-Wall", "-Wextra", "-Werror", "-std=gnu11", "-Iinclude", "-o", filepath.Join(buildDir, prog.name)}
			args = append(append(args, prog.srcs...), "-L"+buildDir, "-lcallbox", "-lpthread", "-ldl", "-Wl,-rpath,"+buildDir)
			out, err = exec.Command(cc, args...).CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("building %s: %v\n%s", prog.name, err, out)
				return
			}
		}
	})
	require.NoError(t, buildErr)
	return buildDir
}

// TestLibraryExportsOnlyTheCAPI: the library's dynamic symbols are the C
// API's (callbox_*) and, in the tests' build only, the engine's
// stack-switch knob: wasmtime's C API (about 1,100 functions), the Go
// runtime's and cgo's symbols and our glue's stay local, so a process
// that also loads another wasmtime, another Go c-shared library or a
// function of the same name never binds to ours, nor ours to its.
func TestLibraryExportsOnlyTheCAPI(t *testing.T) {
	f, err := elf.Open(filepath.Join(buildHarness(t), "libcallbox.so"))
	require.NoError(t, err)
	defer f.Close()
	syms, err := f.DynamicSymbols()
	require.NoError(t, err)
	var api []string
	for _, s := range syms {
		bind := elf.ST_BIND(s.Info)
		if s.Section == elf.SHN_UNDEF || (bind != elf.STB_GLOBAL && bind != elf.STB_WEAK) {
			continue
		}
		if s.Name == "cb_test_stack_switch" {
			continue
		}
		if assert.True(t, strings.HasPrefix(s.Name, "callbox_"), "the library exports %s", s.Name) {
			api = append(api, s.Name)
		}
	}
	header, err := os.ReadFile("include/callbox.h")
	require.NoError(t, err)
	declared := regexp.MustCompile(`(?m)\b(callbox_[a-z0-9_]+)\(`).FindAllStringSubmatch(string(header), -1)
	want := map[string]bool{}
	for _, m := range declared {
		want[m[1]] = true
	}
	for _, name := range api {
		delete(want, name)
	}
	assert.Empty(t, want, "functions callbox.h declares that the library does not export")
	assert.GreaterOrEqual(t, len(api), 40)
}

func TestMain(m *testing.M) {
	if dir := os.Getenv("CALLBOX_LIB_COVERDIR"); dir != "" {
		// Every process that loads the covered library writes there.
		_ = os.Setenv("GOCOVERDIR", dir)
	}
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// TestReadmeCExample compiles and runs examples/c/scale.c, the program
// README.md's "C API" section shows whole, against a callbox.yaml with the
// Rust scale guest: its result, and a failure's line and exit status.
func TestReadmeCExample(t *testing.T) {
	bin := buildHarness(t)
	dir := t.TempDir()
	scale, err := filepath.Abs("../guests/prebuilt/rust-scale.wasm")
	require.NoError(t, err)
	// examples/c/callbox.yaml, but in process: this test's library has no
	// worker beside it (make install-test runs the example as installed,
	// worker and all).
	require.NoError(t, os.WriteFile(filepath.Join(dir, "callbox.yaml"), []byte("callbacks:\n  scale:\n    module: "+scale+"\n    export: scale\n"), 0o644))
	out, err := exec.Command("cc", "-std=gnu11", "-Wall", "-Werror", "-Iinclude", "-o", filepath.Join(dir, "example"),
		"../examples/c/scale.c", "-L"+bin, "-lcallbox", "-Wl,-rpath,"+bin).CombinedOutput()
	require.NoError(t, err, "%s", out)
	cmd := exec.Command(filepath.Join(dir, "example"))
	cmd.Dir = dir
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Equal(t, "2 4 6 8\n", string(out))

	// A failure: the program prints the error's one line and its code, and
	// exits 3.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "callbox.yaml"), []byte("callbacks:\n  scale:\n    module: "+scale+"\n    export: scale\n    max_output: 8B\n"), 0o644))
	cmd = exec.Command(filepath.Join(dir, "example"))
	cmd.Dir = dir
	out, err = cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, string(out))
	assert.Equal(t, 3, exit.ExitCode())
	assert.Contains(t, string(out), `callback "scale"`)
	assert.Contains(t, string(out), "(code ")
}

package guests_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/testing/workerbin"
	"github.com/seed4b3e0ccb/callbox/sandbox/engines"
)

// deepBuilds builds each SDK language's deep callback (level1 -> level2 ->
// level3, which fails) as an author's debug build: the name section
// kept, and DWARF where the toolchain writes it (Rust, C).
var deepBuilds = []struct {
	lang  string
	dwarf bool // the build has a DWARF line table: frames name file and line
	wasi  bool
	build func(t *testing.T, out string) *exec.Cmd
}{
	{"rust", true, false, func(t *testing.T, out string) *exec.Cmd {
		cmd := exec.Command("guests/rust/build.sh", "guests/testdata/backtrace/deep.rs")
		cmd.Env = append(os.Environ(), "DEBUG=1", "OUT="+out)
		return cmd
	}},
	{"assemblyscript", false, false, func(t *testing.T, out string) *exec.Cmd {
		asc, err := filepath.Abs("assemblyscript/node_modules/.bin/asc")
		require.NoError(t, err)
		cmd := exec.Command(asc, "testdata/deep.ts", "--config", "asconfig.json", "--target", "debug", "--outFile", filepath.Join(out, "deep.wasm"))
		cmd.Dir = "assemblyscript"
		return cmd
	}},
	{"c", true, false, func(t *testing.T, out string) *exec.Cmd {
		cmd := exec.Command("c/build.sh", "guests/testdata/backtrace/deep.c")
		cmd.Env = append(os.Environ(), "DEBUG=1", "OUT="+out)
		return cmd
	}},
	{"go", false, true, func(t *testing.T, out string) *exec.Cmd {
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", filepath.Join(out, "deep.wasm"), "./testdata/backtrace/go")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
		return cmd
	}},
}

// TestBacktraceEverySDK: a callback written in each SDK language that
// fails three calls deep reports those three functions, in order and by
// their source names (Rust's demangled, AssemblyScript's by file), on both
// engines, in process and under isolation: process; where the build has DWARF, the innermost of them names deep's
// source file and a line. Go's SDK recovers a panic, so there the guest's
// message names the three functions with their files and lines.
func TestBacktraceEverySDK(t *testing.T) {
	ctx := context.Background()
	for _, b := range deepBuilds {
		t.Run(b.lang, func(t *testing.T) {
			out := t.TempDir()
			cmd := b.build(t, out)
			if cmd.Dir == "" {
				cmd.Dir = "."
			}
			if b.lang == "rust" {
				cmd.Dir = ".." // the Rust script takes paths from the repository root
			}
			if b.lang == "c" {
				cmd.Dir = ".."
				cmd.Path, cmd.Args[0] = "guests/c/build.sh", "guests/c/build.sh"
			}
			msg, err := cmd.CombinedOutput()
			require.NoError(t, err, "building %s's deep callback: %s", b.lang, msg)
			file := filepath.Join(out, "deep.wasm")
			if b.lang == "c" {
				file = filepath.Join(out, "c-freestanding", "deep.wasm")
			}
			wasm, err := os.ReadFile(file)
			require.NoError(t, err)
			var runs []string // engine, then "/process" for isolation: process
			for _, engine := range engineNames() {
				runs = append(runs, engine)
				if engines.ProcessIsolationAvailable() {
					runs = append(runs, engine+"/process")
				}
			}
			for _, run := range runs {
				engine, iso, _ := strings.Cut(run, "/")
				var opts []host.Option
				if iso != "" {
					worker, err := workerbin.Path(false)
					require.NoError(t, err)
					opts = append(opts, host.WithWorker(worker))
				}
				h, err := host.New(ctx, nil, opts...)
				require.NoError(t, err)
				cb := config.DefaultCallback()
				cb.Name, cb.Export, cb.Module, cb.Engine = "deep", "deep", "deep.wasm", engine
				if iso != "" {
					cb.Isolation = config.IsolationProcess
				}
				engine = run // in messages
				if b.wasi {
					cb.WASI = config.WASIMinimal
				}
				require.NoError(t, h.LoadModule(ctx, cb, wasm), engine)
				_, err = h.Invoke(ctx, "deep", abi.From([]float32{1, 2, 3}))
				var ce *host.CallbackError
				require.True(t, errors.As(err, &ce), "%s: %v", engine, err)
				if b.lang == "go" {
					// The Go SDK recovers the panic (the engine sees no
					// trap): its message names the callback's own frames.
					at := strings.Index(ce.GuestMessage, "(at main.level3 ")
					require.GreaterOrEqual(t, at, 0, "%s on %s: %v", b.lang, engine, err)
					assert.Contains(t, ce.GuestMessage[at:], "backtrace/go/main.go:", "%s on %s", b.lang, engine)
					assert.Regexp(t, `main\.level3 \S+:\d+ <- main\.level2 \S+:\d+ <- main\.level1 `, ce.GuestMessage, "%s on %s", b.lang, engine)
					t.Logf("%s on %s: %v", b.lang, engine, err)
					require.NoError(t, h.Close(ctx))
					continue
				}
				levels := map[string]int{}
				for i, f := range ce.Frames {
					for _, l := range []string{"level1", "level2", "level3"} {
						if _, seen := levels[l]; !seen && (f.Func == l || strings.HasSuffix(f.Func, "::"+l) || strings.HasSuffix(f.Func, "/"+l)) {
							levels[l] = i
						}
					}
				}
				require.Len(t, levels, 3, "%s on %s: the three functions in %v", b.lang, engine, ce.Frames)
				assert.Equal(t, levels["level3"]+1, levels["level2"], "%s on %s: level2 calls level3: %v", b.lang, engine, ce.Frames)
				assert.Equal(t, levels["level2"]+1, levels["level1"], "%s on %s: level1 calls level2: %v", b.lang, engine, ce.Frames)
				for _, f := range ce.Frames {
					assert.NotContains(t, f.Func, "_ZN", "%s on %s: names are demangled", b.lang, engine)
				}
				if b.dwarf {
					f := ce.Frames[levels["level3"]]
					assert.Equal(t, "deep."+map[string]string{"rust": "rs", "c": "c"}[b.lang], filepath.Base(f.File), "%s on %s: %v", b.lang, engine, f)
					assert.Positive(t, f.Line, "%s on %s: %v", b.lang, engine, f)
				}
				t.Logf("%s on %s: %v", b.lang, engine, err)
				require.NoError(t, h.Close(ctx))
			}
		})
	}
}

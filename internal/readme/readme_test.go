// Package readme tests the code blocks of the project's Markdown files:
// every fenced go block is compiled, and every yaml block is loaded as a
// config file. A complete file (starting with
// "package") is built as it is, guest SDK examples for GOOS=wasip1; a
// fragment is built as the body of a func(ctx context.Context) error with
// the host packages imported. Shell blocks' callbox command lines are
// checked by cmd/callbox's TestReadmeCommandLines.
package readme

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/config/configfile"
)

// Block is one fenced code block.
type Block struct {
	File, Lang, Text string
	Line             int // of the opening fence
}

// Blocks returns the fenced code blocks of a Markdown file.
func Blocks(path string) ([]Block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Block
	var cur *Block
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			if cur == nil {
				cur = &Block{File: path, Lang: strings.TrimSpace(line[3:]), Line: n}
			} else {
				out = append(out, *cur)
				cur = nil
			}
			continue
		}
		if cur != nil {
			cur.Text += line + "\n"
		}
	}
	return out, sc.Err()
}

// root is the repository root.
func root(t *testing.T) string {
	dir, err := filepath.Abs("../..")
	require.NoError(t, err)
	return dir
}

func markdownFiles(t *testing.T) []string {
	out, err := exec.Command("git", "-C", root(t), "ls-files", "*.md").Output()
	require.NoError(t, err)
	var files []string
	for _, f := range strings.Fields(string(out)) {
		files = append(files, filepath.Join(root(t), f))
	}
	require.NotEmpty(t, files)
	return files
}

// fragmentImports are the packages a README fragment may use.
const fragmentImports = `import (
	"context"
	"errors"
	"fmt"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/config/configfile"
	"github.com/seed4b3e0ccb/callbox/host"
)

var _ = errors.Is
var _ = fmt.Sprint
var _ = abi.From[float32]
var _ = config.DefaultCallback
var _ = configfile.Load
var _ host.Kind
`

func TestGoBlocksCompile(t *testing.T) {
	var blocks []Block
	for _, f := range markdownFiles(t) {
		bs, err := Blocks(f)
		require.NoError(t, err)
		for _, b := range bs {
			if b.Lang == "go" {
				blocks = append(blocks, b)
			}
		}
	}
	require.NotEmpty(t, blocks)
	for i, b := range blocks {
		rel, _ := filepath.Rel(root(t), b.File)
		t.Run(fmt.Sprintf("%s:%d", rel, b.Line), func(t *testing.T) {
			// Inside the module, so its imports resolve.
			dir, err := os.MkdirTemp(root(t), ".readme-block-")
			require.NoError(t, err)
			t.Cleanup(func() { os.RemoveAll(dir) })
			src := b.Text
			env := os.Environ()
			if !strings.HasPrefix(strings.TrimSpace(src), "package ") && !strings.HasPrefix(strings.TrimSpace(src), "//") {
				src = "package block\n\n" + fragmentImports + fmt.Sprintf("\nfunc block%d(ctx context.Context) error {\n%s}\n", i, src)
			}
			if strings.Contains(src, "callbox/guests/go/callbox") {
				env = append(env, "GOOS=wasip1", "GOARCH=wasm")
			}
			require.NoError(t, os.WriteFile(filepath.Join(dir, "block.go"), []byte(src), 0o644))
			cmd := exec.Command("go", "vet", "./"+filepath.Base(dir))
			cmd.Dir = root(t)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "the go block at %s:%d does not compile:\n%s\n%s", rel, b.Line, out, src)
		})
	}
}

// TestYAMLBlocksLoad loads every yaml block of the Markdown files as a
// config file: the keys, units and values the READMEs show are accepted.
// (Module files are not opened by configfile.Load.)
func TestYAMLBlocksLoad(t *testing.T) {
	n := 0
	for _, f := range markdownFiles(t) {
		bs, err := Blocks(f)
		require.NoError(t, err)
		for _, b := range bs {
			if b.Lang != "yaml" {
				continue
			}
			n++
			rel, _ := filepath.Rel(root(t), b.File)
			t.Run(fmt.Sprintf("%s:%d", rel, b.Line), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "config.yaml")
				require.NoError(t, os.WriteFile(path, []byte(b.Text), 0o644))
				_, err := configfile.Load(path)
				require.NoError(t, err, "the yaml block at %s:%d does not load:\n%s", rel, b.Line, b.Text)
			})
		}
	}
	require.Greater(t, n, 3)
}

// TestExampleBlocksAreTheExamples: a rust, c or ts block whose first line
// names an example file ("// scale.rs", "/* scale.c */", "//
// examples/scale.ts"), or a benchmarked kernel ("// kernels/clip.ts"),
// shows that file's code verbatim, so it is the code
// guests/build.sh compiles and the conformance suite runs. Other blocks of
// these languages are whole files compiled by a test of their own (the
// AssemblyScript npm recipe's scale.ts, in guests/recipes_test.go); a C
// API program ("/* examples/c/scale.c") is that file whole; API
// listings are fenced as text.
func TestExampleBlocksAreTheExamples(t *testing.T) {
	dirs := map[string]string{"rust": "guests/rust/examples", "c": "guests/c/examples", "ts": "guests/assemblyscript/examples"}
	// "kernels/" names one of an SDK's benchmarked kernels (guests/*/kernels).
	name := regexp.MustCompile(`^(?://|/\*) *(examples/|kernels/)?([a-z_]+\.(?:rs|c|ts))\b`)
	n := 0
	for _, f := range markdownFiles(t) {
		bs, err := Blocks(f)
		require.NoError(t, err)
		for _, b := range bs {
			dir, ok := dirs[b.Lang]
			if !ok {
				continue
			}
			rel, _ := filepath.Rel(root(t), b.File)
			first, rest, _ := strings.Cut(b.Text, "\n")
			if b.Lang == "ts" && strings.Contains(b.Text, `from "@callbox/guest-assemblyscript"`) {
				continue // compiled by TestAssemblyScriptNpmRecipe
			}
			if file, ok := strings.CutPrefix(first, "/* examples/c/"); ok && b.Lang == "c" {
				// A C API program: shown whole (ffi's TestReadmeCExample and
				// make install-test compile and run it).
				file, _, _ = strings.Cut(file, ":")
				src, err := os.ReadFile(filepath.Join(root(t), "examples", "c", file))
				require.NoError(t, err, "%s:%d names examples/c/%s", rel, b.Line, file)
				require.Equal(t, string(src), b.Text, "%s:%d differs from examples/c/%s", rel, b.Line, file)
				n++
				continue
			}
			m := name.FindStringSubmatch(first)
			if m == nil {
				t.Errorf("%s:%d: a %s block that names no example file (first line %q) is compiled by no test; name the file or fence an API listing as text", rel, b.Line, b.Lang, first)
				continue
			}
			if m[1] == "kernels/" {
				dir = filepath.Join(filepath.Dir(dir), "kernels")
			}
			src, err := os.ReadFile(filepath.Join(root(t), dir, m[2]))
			require.NoError(t, err, "%s:%d names %s", rel, b.Line, m[2])
			require.Contains(t, string(src), rest, "%s:%d differs from %s/%s", rel, b.Line, dir, m[2])
			n++
		}
	}
	require.GreaterOrEqual(t, n, 3)
}

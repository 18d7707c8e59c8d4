package readme

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pasteable are the block languages a reader pastes into a shell or an
// interpreter. Every such block in the Markdown files is run by a test,
// as written (the runners below), or starts with a comment line saying
// it is an excerpt ("# excerpt: ..."), so that a reader knows it is not
// a recipe. Other languages have tests of their own (go, yaml, rust, c,
// ts: readme_test.go); text is for listings and output.
var pasteable = map[string]bool{"sh": true, "bash": true, "console": true, "python": true, "elixir": true}

// knownLangs are every other fence language the files may use.
var knownLangs = map[string]bool{"go": true, "yaml": true, "rust": true, "c": true, "ts": true, "toml": true, "json": true, "text": true}

// runners names, for each pasteable block that a test runs as written,
// the test that runs it: the key is the file and the block's first line.
var runners = map[string]string{
	"README.md: make demo   # the main job: run callbacks from four languages in an ordered chain, contain hostile ones (needs only Go)": "TestRunnableShellBlocks runs make demo in a clean copy; .ci/run runs make test",
	"README.md: go build -o bin/callbox ./cmd/callbox              # one binary: it is also its own isolation: process worker":           "TestRunnableShellBlocks",
	"README.md: pip install ./python":             "scripts/wheel-test.sh (make wheel-test) runs python/README.md's identical block in a clean copy",
	"README.md: make install PREFIX=$HOME/.local": "scripts/install-test.sh (make install-test)",
	"README.md: callbox lower examples/programs/trap_loop.cbir -c examples/programs/callbacks.yaml            # StableHLO": "TestRunnableShellBlocks",
	"README.md: import numpy as np":                                           "python/tests/test_host.py test_readme_examples",
	"README.md: import jax, jax.numpy as jnp":                                 "python/tests/test_jax.py test_readme_jax_example",
	"README.md: {:ok, host} = Callbox.open(\"python/examples/callbox.yaml\")": "elixir/test/outside_test.exs (README.md's Elixir example)",
	"python/README.md: pip install ./python   # from a callbox checkout: builds libcallbox with Go (1.26+) and a C compiler":     "scripts/wheel-test.sh (make wheel-test)",
	"python/README.md: python3 -m venv --system-site-packages ~/.venvs/callbox   # NumPy, setuptools and wheel come from Debian": "scripts/pyinstall-test.sh (make pyinstall-test)",
	"python/README.md: import numpy as np":           "python/tests/test_host.py test_readme_examples",
	"python/README.md: import jax, jax.numpy as jnp": "python/tests/test_jax.py (python/README.md's JAX examples)",
	"lowering/LOWERING.md: callbox lower examples/programs/logging_loop.cbir -c examples/programs/callbacks.yaml            # StableHLO":       "TestRunnableShellBlocks",
	"elixir/README.md: Mix.install([{:callbox, path: Path.join(System.fetch_env!(\"CALLBOX\"), \"elixir\")}])":                                 "elixir/test/outside_test.exs (the README's example runs and prints what it says)",
	"guests/rust/README.md: cargo new --lib --edition 2021 scale   # 2021: Debian's cargo 1.65 cannot read 2024, rustup's default":             "guests/recipes_test.go TestRustCargoRecipe",
	"guests/rust/README.md: # Debian's cargo and rustc":                                                                                        "guests/recipes_test.go TestRustCargoRecipe",
	"guests/go/README.md: ./build.sh        # every example -> guests/build/go/<name>.wasm":                                                    "make guests (guests/build.sh runs each language's build.sh in its directory)",
	"guests/assemblyscript/README.md: npm ci            # once; scripts/install-toolchains.sh does it too":                                     "make guests (scripts/install-toolchains.sh runs npm ci there, guests/build.sh runs ./build.sh)",
	"guests/rust/callbox/README.md: rustup target add wasm32-unknown-unknown":                                                                  "guests/packages_test.go TestRustCrateReadmeRecipe",
	"elixir/README.md: make elixir-test     # installs Debian's elixir + erlang-dev (scripts/install-toolchains.sh),":                          "make test runs make elixir-test; make bench runs make elixir-bench",
	"guests/assemblyscript/README.md: cd my-callbacks                                   # your project: package.json, scale.ts, asconfig.json": "guests/recipes_test.go TestAssemblyScriptNpmRecipe",
}

// blockKey is a block's key in runners.
func blockKey(t *testing.T, b Block) string {
	rel, err := filepath.Rel(root(t), b.File)
	require.NoError(t, err)
	first, _, _ := strings.Cut(b.Text, "\n")
	return rel + ": " + first
}

// isExcerpt reports whether a block says it is an excerpt.
func isExcerpt(b Block) bool {
	first, _, _ := strings.Cut(b.Text, "\n")
	return strings.HasPrefix(first, "# excerpt")
}

// TestPasteableBlocksRunOrAreExcerpts holds the Markdown files to the
// rule above: every fence names its language, every pasteable block is
// run by the test runners names or says it is an excerpt, and every
// runners entry names a block that exists (so none goes stale).
func TestPasteableBlocksRunOrAreExcerpts(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range markdownFiles(t) {
		bs, err := Blocks(f)
		require.NoError(t, err)
		for _, b := range bs {
			key := blockKey(t, b)
			where := fmt.Sprintf("%s:%d", key[:strings.Index(key, ":")], b.Line)
			lang, _, _ := strings.Cut(b.Lang, " ")
			if !pasteable[lang] {
				assert.True(t, knownLangs[lang], "%s: a block fenced %q: name its language (text for output and listings)", where, b.Lang)
				continue
			}
			if _, ok := runners[key]; ok {
				seen[key] = true
				continue
			}
			assert.True(t, isExcerpt(b), "%s: a %s block that no test runs: run it as written in a test and add it to runners, or start it with \"# excerpt: ...\" (first line %q)", where, lang, strings.SplitN(b.Text, "\n", 2)[0])
		}
	}
	for key, runner := range runners {
		assert.True(t, seen[key], "runners names a block that no Markdown file has (changed or gone?): %q (run by %s)", key, runner)
	}
}

// cleanCopy copies the repository's files (tracked, and untracked ones
// git does not ignore) into a new directory: what a fresh clone holds, and
// no build output.
func cleanCopy(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root(t), "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	require.NoError(t, err)
	dir := t.TempDir()
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(root(t), rel)
		st, err := os.Lstat(src)
		if err != nil || !st.Mode().IsRegular() {
			continue // deleted in the work tree, or a link
		}
		data, err := os.ReadFile(src)
		require.NoError(t, err)
		dst := filepath.Join(dir, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
		require.NoError(t, os.WriteFile(dst, data, st.Mode().Perm()))
	}
	return dir
}

// shBlock returns the sh block of a Markdown file whose first line starts
// with prefix.
func shBlock(t *testing.T, file, prefix string) string {
	t.Helper()
	bs, err := Blocks(filepath.Join(root(t), file))
	require.NoError(t, err)
	for _, b := range bs {
		if b.Lang == "sh" && strings.HasPrefix(b.Text, prefix) {
			return b.Text
		}
	}
	t.Fatalf("%s has no sh block starting %q", file, prefix)
	return ""
}

// TestRunnableShellBlocks runs shell blocks of the READMEs as written, in
// order, in a clean copy of the repository (what a fresh clone holds),
// with bin/ (where the first block puts the CLI) on PATH, as a reader
// who built it would have callbox there: README.md's `make demo` and its
// "Command line" block, then the lowering blocks of README.md and
// lowering/LOWERING.md. It checks what each prints.
func TestRunnableShellBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI in a copy of the repository")
	}
	dir := cleanCopy(t)
	run := func(file, prefix string, script string) string {
		t.Helper()
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH="+filepath.Join(dir, "bin")+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s's block %q failed:\n%s\n%s", file, prefix, script, out)
		return string(out)
	}
	demo := run("README.md", "make demo", "make demo")
	assert.Contains(t, demo, "host still serving")

	out := run("README.md", "go build", shBlock(t, "README.md", "go build -o bin/callbox ./cmd/callbox"))
	assert.Contains(t, out, "f32[3] [2 4 6]", "npy show of the run's output")
	assert.Contains(t, out, "host still serving", "the demo")
	assert.FileExists(t, filepath.Join(dir, "my_scale", "callbox.yaml"), "callbox new")

	out = run("README.md", "callbox lower", shBlock(t, "README.md", "callbox lower examples/programs/trap_loop.cbir"))
	assert.Contains(t, out, "stablehlo.custom_call")
	out = run("lowering/LOWERING.md", "callbox lower", shBlock(t, "lowering/LOWERING.md", "callbox lower examples/programs/logging_loop.cbir"))
	assert.Contains(t, out, "stablehlo.custom_call")
	assert.FileExists(t, filepath.Join(dir, "y.npy"))
}

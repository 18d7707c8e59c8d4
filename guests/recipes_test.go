package guests_test

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/guests"
	"github.com/seed4b3e0ccb/callbox/host"
	"github.com/seed4b3e0ccb/callbox/internal/release"
)

// readmeBlock returns the first fenced block of language lang in a README
// that contains marker, so a test runs exactly the recipe the README shows.
func readmeBlock(t *testing.T, readme, lang, marker string) string {
	t.Helper()
	data, err := os.ReadFile(readme)
	require.NoError(t, err)
	parts := strings.Split(string(data), "```")
	for i := 1; i < len(parts); i += 2 {
		if strings.HasPrefix(parts[i], lang+"\n") && strings.Contains(parts[i], marker) {
			return strings.TrimPrefix(parts[i], lang+"\n")
		}
	}
	t.Fatalf("%s has no %s block containing %q", readme, lang, marker)
	return ""
}

// loadAndScale loads a scale module built outside the repository and
// checks one call.
func loadAndScale(t *testing.T, wasm []byte) {
	t.Helper()
	ctx := context.Background()
	h, err := host.New(ctx, nil)
	require.NoError(t, err)
	defer h.Close(ctx)
	cb := config.DefaultCallback()
	cb.Name, cb.Module = "scale", "<recipe>"
	require.NoError(t, h.LoadModule(ctx, cb, wasm))
	out, err := h.Invoke(ctx, "scale", abi.From([]float32{1, 2, 3}), abi.Scalar[float32](2))
	require.NoError(t, err)
	assert.Equal(t, []float32{2, 4, 6}, abi.MustView[float32](out[0]))
}

// TestRustCargoRecipe builds the Rust SDK's scale example the way
// guests/rust/README.md tells a user to, in a temporary directory outside
// the repository: its `cargo new` command (which must write edition 2021,
// whatever the cargo's default), its Cargo.toml block (the path dependency
// pointed at this checkout) and scale.rs as src/lib.rs, then each of its
// two build commands in turn in the same project, rustup's cargo first and
// then Debian's cargo 1.65, which reads the Cargo.lock rustup's wrote.
// Each toolchain is skipped only when missing (scripts/install-toolchains.sh
// installs Debian's and adds rustup's wasm32 target; make test runs it).
func TestRustCargoRecipe(t *testing.T) {
	toolchains := cargoToolchains(t)
	sdk, err := filepath.Abs("rust/callbox")
	require.NoError(t, err)
	readme := "rust/README.md"
	toml := readmeBlock(t, readme, "toml", "[dependencies]")
	require.Contains(t, toml, `path = "../callbox/guests/rust/callbox"`)
	toml = strings.ReplaceAll(toml, "../callbox/guests/rust/callbox", sdk)
	src, err := os.ReadFile("rust/examples/scale.rs")
	require.NoError(t, err)
	builds := cargoBuilds(t, readmeBlock(t, readme, "sh", "cargo build"))

	var creator *cargoToolchain
	for i := range toolchains {
		if toolchains[i].missing == "" {
			creator = &toolchains[i]
			break
		}
	}
	if creator == nil {
		t.Skipf("no cargo: %s; %s", toolchains[0].missing, toolchains[1].missing)
	}
	dir := t.TempDir()
	creator.sh(t, dir, readmeBlock(t, readme, "sh", "cargo new"))
	project := filepath.Join(dir, "scale")
	created, err := os.ReadFile(filepath.Join(project, "Cargo.toml"))
	require.NoError(t, err, "the README's cargo new made no scale/")
	assert.Contains(t, string(created), `edition = "2021"`, "the README's cargo new, with %s's cargo", creator.name)
	require.NoError(t, os.WriteFile(filepath.Join(project, "Cargo.toml"), []byte(toml), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(project, "src", "lib.rs"), src, 0o644))

	for _, tc := range toolchains {
		t.Run(tc.name, func(t *testing.T) {
			if tc.missing != "" {
				t.Skip(tc.missing)
			}
			wasm := filepath.Join(project, "target/wasm32-unknown-unknown/release/scale.wasm")
			require.NoError(t, os.RemoveAll(wasm))
			tc.sh(t, project, builds[tc.name])
			b, err := os.ReadFile(wasm)
			require.NoError(t, err)
			loadAndScale(t, b)
		})
	}
}

// TestAssemblyScriptNpmRecipe builds a callback the way
// guests/assemblyscript/README.md ("From your own project") tells a user
// to, in a temporary directory outside the repository: npm pack the SDK,
// npm install the tarball with the compiler, the README's scale.ts and
// asconfig.json, and its asc command. The compiler comes from tarballs of
// the repository's locked node_modules (npm ci, which
// scripts/install-toolchains.sh runs), so the test needs no registry.
func TestAssemblyScriptNpmRecipe(t *testing.T) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skipf("npm is not installed (scripts/install-toolchains.sh needs node and npm): %v", err)
	}
	sdk, err := filepath.Abs("assemblyscript")
	require.NoError(t, err)
	deps := filepath.Join(sdk, "node_modules")
	if _, err := os.Stat(filepath.Join(deps, "assemblyscript", "package.json")); err != nil {
		t.Skipf("the AssemblyScript compiler is not installed in guests/assemblyscript (npm ci; scripts/install-toolchains.sh): %v", err)
	}
	dir := t.TempDir()
	project := filepath.Join(dir, "my-callbacks")
	packs := filepath.Join(dir, "packs")
	require.NoError(t, os.MkdirAll(project, 0o755))
	require.NoError(t, os.MkdirAll(packs, 0o755))
	env := append(os.Environ(), "npm_config_cache="+filepath.Join(dir, "npm-cache"), "npm_config_update_notifier=false")
	sh := func(wd, script string) string {
		t.Helper()
		cmd := exec.Command("sh", "-euc", script)
		cmd.Dir, cmd.Env = wd, env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s:\n%s", script, out)
		return string(out)
	}
	// The compiler and its two dependencies as tarballs, in place of
	// "assemblyscript@0.28.20" from the registry.
	var compiler []string
	for _, p := range []string{"assemblyscript", "binaryen", "long"} {
		name := strings.TrimSpace(sh(packs, npm+" pack --silent "+filepath.Join(deps, p)))
		compiler = append(compiler, filepath.Join(packs, name))
	}
	require.NoError(t, os.WriteFile(filepath.Join(project, "package.json"), []byte(`{"name": "my-callbacks", "version": "1.0.0", "private": true, "type": "module"}`+"\n"), 0o644))
	readme := "assemblyscript/README.md"
	src := readmeBlock(t, readme, "ts", `from "@callbox/guest-assemblyscript"`)
	require.NoError(t, os.WriteFile(filepath.Join(project, "scale.ts"), []byte(src), 0o644))
	asconfig := readmeBlock(t, readme, "json", "asconfig.callbox.json")
	require.NoError(t, os.WriteFile(filepath.Join(project, "asconfig.json"), []byte(asconfig), 0o644))

	recipe := readmeBlock(t, readme, "sh", "npm pack ../callbox/guests/assemblyscript")
	var lines []string
	for _, line := range strings.Split(recipe, "\n") {
		line, _, _ = strings.Cut(line, "#")
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "cd "):
			continue
		case strings.HasPrefix(line, "npm pack "):
			require.Equal(t, "npm pack ../callbox/guests/assemblyscript", line)
			line = "npm pack --silent " + sdk
		case strings.HasPrefix(line, "npm install "):
			require.Contains(t, line, "assemblyscript@0.28.20")
			require.Contains(t, line, "--save-exact", "the tested compiler, not a caret range")
			line = strings.Replace(line, "assemblyscript@0.28.20", strings.Join(compiler, " "), 1) + " --offline --no-audit --no-fund"
		}
		lines = append(lines, line)
	}
	require.Len(t, lines, 3, "the README recipe: npm pack, npm install, npx asc")
	sh(project, strings.Join(lines, "\n"))

	// The tarball is the package as the registry would get it: the
	// release's version, its license (the field and the file), and
	// exactly the files `callbox new assemblyscript` embeds.
	packed := tarFiles(t, filepath.Join(project, "callbox-guest-assemblyscript-"+release.Version+".tgz"))
	license, err := os.ReadFile("../LICENSE")
	require.NoError(t, err)
	assert.Equal(t, string(license), string(packed["LICENSE"]), "the tarball's LICENSE")
	var pkg struct{ Version, License string }
	require.NoError(t, json.Unmarshal(packed["package.json"], &pkg))
	assert.Equal(t, "Apache-2.0", pkg.License, "the tarball's package.json license")
	assert.Equal(t, release.Version, pkg.Version, "the tarball's package.json version")
	embedded, err := guests.SDKFiles("assemblyscript")
	require.NoError(t, err)
	assert.ElementsMatch(t, slices.Collect(maps.Keys(embedded)), slices.Collect(maps.Keys(packed)), "the tarball's files and guests/sdk.go's")
	wasm, err := os.ReadFile(filepath.Join(project, "scale.wasm"))
	require.NoError(t, err)
	loadAndScale(t, wasm)
}

// TestCWasiGrant pins down guests/c/README.md's rule for wasi: minimal: a
// wasi-libc build that calls nothing reaching the outside world imports
// nothing from WASI and loads without the grant; one that calls printf
// imports fd_write and is refused without it, with a message naming the
// setting, and loads with it.
func TestCWasiGrant(t *testing.T) {
	ctx := context.Background()
	load := func(wasm []byte, wasi string) error {
		h, err := host.New(ctx, nil)
		require.NoError(t, err)
		defer h.Close(ctx)
		cb := config.DefaultCallback()
		cb.Name, cb.Module, cb.WASI = "scale", "<c>", wasi
		return h.LoadModule(ctx, cb, wasm)
	}
	shipped, err := os.ReadFile("build/c/scale.wasm")
	if err != nil {
		t.Skipf("guests/build/c/scale.wasm is not built (guests/build.sh): %v", err)
	}
	require.NoError(t, load(shipped, config.WASINone), "the shipped wasi-libc scale imports no WASI")

	if _, err := exec.LookPath("clang"); err != nil {
		t.Skipf("clang is not installed (scripts/install-toolchains.sh): %v", err)
	}
	dir := t.TempDir()
	src, err := os.ReadFile("c/examples/scale.c")
	require.NoError(t, err)
	printing := strings.Replace(string(src), "#include", "#include <stdio.h>\n#include", 1)
	printing += "\n__attribute__((export_name(\"hello\"))) int hello(void) { return printf(\"hi\\n\"); }\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "scale.c"), []byte(printing), 0o644))
	inc, err := filepath.Abs("c")
	require.NoError(t, err)
	cmd := exec.Command("clang", "--target=wasm32-wasi", "-mexec-model=reactor", "-O2", "-I", inc, "-Wl,--strip-all", "scale.c", "-o", "scale.wasm")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	wasm, err := os.ReadFile(filepath.Join(dir, "scale.wasm"))
	require.NoError(t, err)
	err = load(wasm, config.WASINone)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "imports wasi_snapshot_preview1.fd_write, but WASI is not granted to this callback (set wasi: minimal)")
	require.NoError(t, load(wasm, config.WASIMinimal))
}

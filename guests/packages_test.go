package guests_test

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/viper"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/guests"
	"github.com/seed4b3e0ccb/callbox/internal/release"
)

// cargoToolchain is a cargo to build with, in an environment of its own:
// a temporary HOME and CARGO_HOME, so no user config leaks in, and a PATH
// on which `cargo` is that toolchain's.
type cargoToolchain struct {
	name    string // "rustup" or "debian", as cargoBuilds names the README's commands
	env     []string
	missing string // why it cannot run here, naming the install command; "" when it can
}

// sh runs script in dir with the toolchain and returns its output; it
// fails the test when the script fails.
func (tc cargoToolchain) sh(t *testing.T, dir, script string) string {
	t.Helper()
	cmd := exec.Command("sh", "-euc", script)
	cmd.Dir, cmd.Env = dir, tc.env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "with %s's cargo, in %s:\n%s\n%s", tc.name, dir, script, out)
	return string(out)
}

// rustupPath finds rustup, on PATH or where its installer puts it.
func rustupPath() (string, error) {
	if p, err := exec.LookPath("rustup"); err == nil {
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(home, ".cargo", "bin", "rustup")
	_, err = os.Stat(p)
	return p, err
}

// cargoToolchains returns rustup's cargo (its default toolchain) and
// Debian's cargo 1.65 with Debian's rustc 1.63, in that order, each marked
// missing where this machine lacks it.
func cargoToolchains(t *testing.T) []cargoToolchain {
	t.Helper()
	home := t.TempDir()
	cargoHome := "CARGO_HOME=" + filepath.Join(home, ".cargo")
	rustup := cargoToolchain{name: "rustup"}
	if path, err := rustupPath(); err != nil {
		rustup.missing = "rustup is not installed (https://rustup.rs; scripts/install-toolchains.sh then adds the wasm32 target): " + err.Error()
	} else {
		rustupHome := os.Getenv("RUSTUP_HOME")
		if rustupHome == "" {
			userHome, err := os.UserHomeDir()
			require.NoError(t, err)
			rustupHome = filepath.Join(userHome, ".rustup")
		}
		rustup.env = []string{"HOME=" + home, cargoHome, "RUSTUP_HOME=" + rustupHome, "PATH=" + filepath.Dir(path) + ":/usr/bin:/bin"}
		cmd := exec.Command(path, "which", "cargo")
		cmd.Env = rustup.env
		if out, err := cmd.CombinedOutput(); err != nil {
			rustup.missing = "rustup has no default toolchain (rustup default stable): " + strings.TrimSpace(string(out))
		}
	}
	// No rustup cargo first on PATH.
	debian := cargoToolchain{name: "debian", env: []string{"HOME=" + home, cargoHome, "PATH=/usr/bin:/bin"}}
	for _, tool := range []string{"/usr/bin/cargo", "/usr/bin/rustc", "/usr/lib/rustlib/wasm32-unknown-unknown"} {
		if _, err := os.Stat(tool); err != nil {
			debian.missing = "Debian's cargo, rustc and wasm32 std are needed (apt install cargo rustc libstd-rust-dev-wasm32; scripts/install-toolchains.sh): " + err.Error()
			break
		}
	}
	return []cargoToolchain{rustup, debian}
}

// cargoBuilds splits guests/rust/README.md's build block into its two
// ways, by toolchain name: Debian's cargo, then "# or rustup's".
func cargoBuilds(t *testing.T, block string) map[string]string {
	t.Helper()
	debian, rustup, ok := strings.Cut(block, "# or rustup's\n")
	require.True(t, ok, "the build block offers rustup's cargo after Debian's:\n%s", block)
	require.Contains(t, debian, "RUSTC=/usr/bin/rustc /usr/bin/cargo build")
	require.Contains(t, rustup, "rustup target add wasm32-unknown-unknown\ncargo build")
	return map[string]string{"debian": debian, "rustup": rustup}
}

// copyTree copies the files under src to dst, but for cargo's output
// (target/, Cargo.lock).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		switch {
		case d.IsDir() && d.Name() == "target":
			return filepath.SkipDir
		case d.IsDir():
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		case d.Name() == "Cargo.lock":
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	require.NoError(t, err)
}

// noWarnings fails the test for any cargo warning in out but the one every
// dry run prints.
func noWarnings(t *testing.T, what, out string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "warning:") && line != "warning: aborting upload due to dry run" {
			t.Errorf("%s warns: %s\n%s", what, line, out)
		}
	}
}

// TestPackageVersions: the Rust crate and the npm package carry the
// release's version (internal/release.Version: one release train), the
// Apache-2.0 license, and a copy of the repository's LICENSE identical to
// it, which is what `cargo package` and `npm pack` put in the packages
// (they cannot reach files outside the package's directory).
func TestPackageVersions(t *testing.T) {
	cargo := viper.New()
	cargo.SetConfigFile("rust/callbox/Cargo.toml")
	require.NoError(t, cargo.ReadInConfig())
	assert.Equal(t, release.Version, cargo.GetString("package.version"), "rust/callbox/Cargo.toml")
	assert.Equal(t, "Apache-2.0", cargo.GetString("package.license"), "rust/callbox/Cargo.toml")
	assert.False(t, cargo.IsSet("package.publish"), "rust/callbox/Cargo.toml: the crate is published")

	data, err := os.ReadFile("assemblyscript/package.json")
	require.NoError(t, err)
	var pkg struct{ Version, License string }
	require.NoError(t, json.Unmarshal(data, &pkg), "assemblyscript/package.json")
	assert.Equal(t, release.Version, pkg.Version, "assemblyscript/package.json")
	assert.Equal(t, "Apache-2.0", pkg.License, "assemblyscript/package.json")

	license, err := os.ReadFile("../LICENSE")
	require.NoError(t, err)
	assert.Contains(t, string(license), "Apache License\n                           Version 2.0")
	for _, copy := range []string{"rust/callbox/LICENSE", "assemblyscript/LICENSE"} {
		b, err := os.ReadFile(copy)
		require.NoError(t, err, "cp LICENSE guests/%s", copy)
		assert.Equal(t, string(license), string(b), "guests/%s differs from LICENSE: cp LICENSE guests/%s", copy, copy)
	}
}

// TestPackageEmbeddedSDKs: what `callbox new` copies into a project is each SDK's
// sources as they ship, and the license. The Rust crate is compared with
// `cargo package --list` in TestRustCratePackage, the npm package with its
// tarball in TestAssemblyScriptNpmRecipe.
func TestPackageEmbeddedSDKs(t *testing.T) {
	license, err := os.ReadFile("../LICENSE")
	require.NoError(t, err)
	dirs := map[string]string{"rust": "rust/callbox", "assemblyscript": "assemblyscript", "c": "c", "go": "go/callbox"}
	for _, lang := range guests.Languages() {
		files, err := guests.SDKFiles(lang)
		require.NoError(t, err, lang)
		assert.Equal(t, string(license), string(files["LICENSE"]), lang)
		for p, b := range files {
			src, err := os.ReadFile(filepath.Join(dirs[lang], p))
			if p == "LICENSE" && errors.Is(err, fs.ErrNotExist) {
				continue
			}
			require.NoError(t, err, "%s: %s", lang, p)
			assert.Equal(t, string(src), string(b), "%s: %s", lang, p)
		}
	}
	// The C SDK: callbox.h and the headers of c/callbox/, each of which
	// callbox.h includes.
	c, err := guests.SDKFiles("c")
	require.NoError(t, err)
	parts, err := filepath.Glob("c/callbox/*.h")
	require.NoError(t, err)
	require.NotEmpty(t, parts)
	wantC := []string{"LICENSE", "callbox.h"}
	var included []string
	for _, m := range regexp.MustCompile(`(?m)^#include "(callbox/[a-z_]+\.h)"$`).FindAllStringSubmatch(string(c["callbox.h"]), -1) {
		included = append(included, m[1])
	}
	var partNames []string
	for _, p := range parts {
		partNames = append(partNames, "callbox/"+filepath.Base(p))
	}
	assert.ElementsMatch(t, partNames, included, "callbox.h includes every header of c/callbox/, and no other")
	wantC = append(wantC, partNames...)
	slices.Sort(wantC)
	assert.Equal(t, wantC, slices.Sorted(maps.Keys(c)))
	goSDK, err := guests.SDKFiles("go")
	require.NoError(t, err)
	sources, err := filepath.Glob("go/callbox/*.go")
	require.NoError(t, err)
	want := []string{"LICENSE"}
	for _, s := range sources {
		want = append(want, filepath.Base(s))
	}
	slices.Sort(want)
	assert.Equal(t, want, slices.Sorted(maps.Keys(goSDK)))
	_, err = guests.SDKFiles("java")
	assert.EqualError(t, err, `no guest SDK for language "java" (have: [assemblyscript c go rust])`)
}

// TestRustCratePackage packages the Rust SDK as crates.io would get it,
// from a copy of guests/rust/callbox outside the repository (so nothing
// from the checkout, its workspace or its git state can help): `cargo
// package` and `cargo publish --dry-run` with rustup's cargo (the dry run
// reads the crates.io index, with a temporary CARGO_HOME), and `cargo
// package` with Debian's cargo 1.65, the oldest the crate supports. Each
// must succeed without a warning (a missing license, description,
// documentation, homepage or repository is one), and the package must
// hold exactly the files `callbox new rust` embeds, LICENSE and README.md
// among them, besides what cargo generates.
func TestRustCratePackage(t *testing.T) {
	crate := filepath.Join(t.TempDir(), "callbox")
	copyTree(t, "rust/callbox", crate)
	embedded, err := guests.SDKFiles("rust")
	require.NoError(t, err)
	for _, tc := range cargoToolchains(t) {
		t.Run(tc.name, func(t *testing.T) {
			if tc.missing != "" {
				t.Skip(tc.missing)
			}
			tc.env = append(tc.env, "CARGO_TARGET_DIR="+t.TempDir())
			if tc.name == "debian" {
				noWarnings(t, "cargo package", tc.sh(t, crate, "cargo package --offline"))
				return
			}
			noWarnings(t, "cargo package", tc.sh(t, crate, "cargo package"))
			list := strings.Fields(tc.sh(t, crate, "cargo package --list"))
			want := append(slices.Collect(maps.Keys(embedded)), "Cargo.lock", "Cargo.toml.orig")
			assert.ElementsMatch(t, want, list, "cargo package --list")
			assert.Contains(t, list, "LICENSE")
			assert.Contains(t, list, "README.md")
			out := tc.sh(t, crate, "cargo publish --dry-run")
			noWarnings(t, "cargo publish --dry-run", out)
			assert.Contains(t, out, "Packaged ")
			assert.Contains(t, out, "Uploading callbox v"+release.Version)
		})
	}
}

// TestRustCargoGit builds a crate that depends on the SDK by git, as
// guests/rust/README.md's Cargo.toml block offers (its "# or by git:"
// line, with a file:// URL): from a git repository holding guests/rust as
// the checkout does, with rustup's cargo and with Debian's, each in a
// fresh project and its own README build command.
func TestRustCargoGit(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skipf("git is not installed: %v", err)
	}
	repo := filepath.Join(t.TempDir(), "callbox")
	copyTree(t, "rust", filepath.Join(repo, "guests", "rust"))
	for _, args := range [][]string{
		{"init", "-q"}, {"add", "-A"},
		{"-c", "user.name=test", "-c", "user.email=test@example.com", "commit", "-q", "--no-verify", "-m", "guests/rust"},
	} {
		cmd := exec.Command(git, args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	readme := "rust/README.md"
	toml := readmeBlock(t, readme, "toml", "[dependencies]")
	gitDep := regexp.MustCompile(`(?m)^# or by git: (callbox = \{ git = "https://github.com/seed4b3e0ccb/callbox" \})$`).FindStringSubmatch(toml)
	require.NotNil(t, gitDep, "the README's Cargo.toml offers a git dependency")
	dep := strings.Replace(gitDep[1], "https://github.com/seed4b3e0ccb/callbox", "file://"+repo, 1)
	toml = strings.Replace(toml, `callbox = { path = "../callbox/guests/rust/callbox" }`, dep, 1)
	require.Contains(t, toml, dep)
	src, err := os.ReadFile("rust/examples/scale.rs")
	require.NoError(t, err)
	builds := cargoBuilds(t, readmeBlock(t, readme, "sh", "cargo build"))
	for _, tc := range cargoToolchains(t) {
		t.Run(tc.name, func(t *testing.T) {
			if tc.missing != "" {
				t.Skip(tc.missing)
			}
			project := t.TempDir()
			require.NoError(t, os.MkdirAll(filepath.Join(project, "src"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(project, "Cargo.toml"), []byte(toml), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(project, "src", "lib.rs"), src, 0o644))
			tc.sh(t, project, builds[tc.name])
			wasm, err := os.ReadFile(filepath.Join(project, "target/wasm32-unknown-unknown/release/scale.wasm"))
			require.NoError(t, err)
			loadAndScale(t, wasm)
		})
	}
}

// TestRustCargoNewDefaults: a crate made by rustup's `cargo new --lib`
// with its defaults (edition 2024 on a current cargo), given only the
// SDK dependency, a cdylib and panic=abort, builds with rustup's cargo
// as the README says: the SDK's macros work in the newest edition too.
func TestRustCargoNewDefaults(t *testing.T) {
	tc := cargoToolchains(t)[0]
	if tc.missing != "" {
		t.Skip(tc.missing)
	}
	sdk, err := filepath.Abs("rust/callbox")
	require.NoError(t, err)
	dir := t.TempDir()
	tc.sh(t, dir, "cargo new --lib scale")
	project := filepath.Join(dir, "scale")
	manifest, err := os.ReadFile(filepath.Join(project, "Cargo.toml"))
	require.NoError(t, err)
	edition := regexp.MustCompile(`(?m)^edition = "(\d+)"$`).FindSubmatch(manifest)
	require.NotNil(t, edition, "%s", manifest)
	t.Logf("cargo new wrote edition %s", edition[1])
	require.True(t, strings.HasSuffix(string(manifest), "[dependencies]\n"), "%s", manifest)
	manifest = append(manifest, `callbox = { path = "`+sdk+`" }

[lib]
crate-type = ["cdylib"]

[profile.release]
panic = "abort"
`...)
	require.NoError(t, os.WriteFile(filepath.Join(project, "Cargo.toml"), manifest, 0o644))
	src, err := os.ReadFile("rust/examples/scale.rs")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(project, "src", "lib.rs"), src, 0o644))
	tc.sh(t, project, cargoBuilds(t, readmeBlock(t, "rust/README.md", "sh", "cargo build"))["rustup"])
	wasm, err := os.ReadFile(filepath.Join(project, "target/wasm32-unknown-unknown/release/scale.wasm"))
	require.NoError(t, err)
	loadAndScale(t, wasm)
}

// TestRustCrateReadmeRecipe builds the crate README's example (what crates.io
// shows): its Cargo.toml, which depends on the published crate by
// version, its callback as src/lib.rs, and its build commands: the sh
// block with rustup's cargo, and the Debian command it gives in the text
// with Debian's. The crate is not on crates.io yet, so a [patch.crates-io]
// entry points the dependency at this checkout, and cargo runs --offline
// (the registry's stand-in).
func TestRustCrateReadmeRecipe(t *testing.T) {
	readme := "rust/callbox/README.md"
	sdk, err := filepath.Abs("rust/callbox")
	require.NoError(t, err)
	toml := readmeBlock(t, readme, "toml", "[dependencies]")
	req := regexp.MustCompile(`(?m)^callbox = "([0-9.]+)"$`).FindStringSubmatch(toml)
	require.NotNil(t, req, "the crate README depends on the crate by version:\n%s", toml)
	assert.True(t, strings.HasPrefix(release.Version, req[1]+"."), "callbox = %q does not take the release %s", req[1], release.Version)
	toml += "\n[patch.crates-io]\ncallbox = { path = \"" + sdk + "\" }\n"
	src := readmeBlock(t, readme, "rust", "callbox::export!")
	text, err := os.ReadFile(readme)
	require.NoError(t, err)
	debian := regexp.MustCompile("`(RUSTC=/usr/bin/rustc /usr/bin/cargo build[^`]*)`").FindSubmatch(text)
	require.NotNil(t, debian, "the crate README gives Debian's cargo command")
	builds := map[string]string{
		"rustup": readmeBlock(t, readme, "sh", "cargo build"),
		"debian": strings.Join(strings.Fields(string(debian[1])), " "),
	}
	for _, tc := range cargoToolchains(t) {
		t.Run(tc.name, func(t *testing.T) {
			if tc.missing != "" {
				t.Skip(tc.missing)
			}
			script := builds[tc.name]
			require.Contains(t, script, "cargo build --release --target wasm32-unknown-unknown")
			script = strings.Replace(script, "cargo build ", "cargo build --offline ", 1)
			project := t.TempDir()
			require.NoError(t, os.MkdirAll(filepath.Join(project, "src"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(project, "Cargo.toml"), []byte(toml), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(project, "src", "lib.rs"), []byte(src), 0o644))
			tc.sh(t, project, script)
			wasm, err := os.ReadFile(filepath.Join(project, "target/wasm32-unknown-unknown/release/scale.wasm"))
			require.NoError(t, err)
			loadAndScale(t, wasm)
		})
	}
}

// tarFiles reads an npm tarball: its files by path inside the package.
func tarFiles(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	files := map[string][]byte{}
	r := tar.NewReader(gz)
	for {
		h, err := r.Next()
		if err == io.EOF {
			return files
		}
		require.NoError(t, err)
		b, err := io.ReadAll(r)
		require.NoError(t, err)
		files[strings.TrimPrefix(h.Name, "package/")] = b
	}
}

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config/configfile"
	"github.com/seed4b3e0ccb/callbox/guests"
	"github.com/seed4b3e0ccb/callbox/internal/tensorfile"
)

// shBlocks returns the sh blocks of a generated README, in order.
func shBlocks(t *testing.T, readme string) []string {
	t.Helper()
	data, err := os.ReadFile(readme)
	require.NoError(t, err)
	var blocks []string
	parts := strings.Split(string(data), "```")
	for i := 1; i < len(parts); i += 2 {
		if text, ok := strings.CutPrefix(parts[i], "sh\n"); ok {
			blocks = append(blocks, text)
		}
	}
	return blocks
}

// buildAlternatives splits a README's build block into the ways it offers
// (a line "# or ..." starts another), each a script.
func buildAlternatives(block string) []string {
	alts := []string{""}
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		if strings.HasPrefix(line, "# or ") {
			alts = append(alts, "")
		}
		alts[len(alts)-1] += line + "\n"
	}
	return alts
}

// rustupCommand finds rustup, on PATH or where its installer puts it.
func rustupCommand() (string, error) {
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

// missingToolchain says what a build script needs that this machine
// lacks, and how to install it, or "" when it has everything.
func missingToolchain(script string) string {
	need := func(paths ...string) error {
		for _, p := range paths {
			if _, err := os.Stat(p); err != nil {
				return err
			}
		}
		return nil
	}
	switch {
	case strings.Contains(script, "/usr/bin/cargo"):
		if err := need("/usr/bin/cargo", "/usr/bin/rustc", "/usr/lib/rustlib/wasm32-unknown-unknown"); err != nil {
			return "Debian's cargo, rustc and wasm32 std (apt install cargo rustc libstd-rust-dev-wasm32; scripts/install-toolchains.sh): " + err.Error()
		}
	case strings.Contains(script, "rustup"):
		if _, err := rustupCommand(); err != nil {
			return "rustup (https://rustup.rs; then scripts/install-toolchains.sh adds the wasm32 target): " + err.Error()
		}
	case strings.Contains(script, "npm"):
		if _, err := exec.LookPath("npm"); err != nil {
			return "npm (apt install npm): " + err.Error()
		}
		if err := need("../../guests/assemblyscript/node_modules/assemblyscript/package.json"); err != nil {
			return "the AssemblyScript compiler in guests/assemblyscript (npm ci; scripts/install-toolchains.sh): " + err.Error()
		}
	case strings.Contains(script, "WASI=1"):
		if _, err := exec.LookPath("clang"); err != nil {
			return "clang (apt install clang lld; scripts/install-toolchains.sh): " + err.Error()
		}
		if err := need("/usr/lib/wasm32-wasi/libc.a"); err != nil {
			return "wasi-libc (apt install wasi-libc libclang-rt-14-dev-wasm32; scripts/install-toolchains.sh): " + err.Error()
		}
	case strings.Contains(script, "clang") || strings.Contains(script, "build.sh") && !strings.Contains(script, "GOOS"):
		if _, err := exec.LookPath("clang"); err != nil {
			return "clang (apt install clang lld; scripts/install-toolchains.sh): " + err.Error()
		}
	}
	return ""
}

// projectEnv is the environment a generated project is built in: the
// caller's, without settings that would change where or how it builds,
// with caches of its own for cargo and npm, and rustup's commands on PATH.
func projectEnv(t *testing.T) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "CARGO_HOME" || strings.HasPrefix(k, "CARGO_BUILD") || k == "CARGO_TARGET_DIR" || k == "RUSTC" || k == "RUSTFLAGS",
			k == "GOFLAGS" || k == "GOOS" || k == "GOARCH" || k == "GOWORK" || k == "GOTOOLCHAIN",
			k == "CC" || k == "WASI", strings.HasPrefix(strings.ToLower(k), "npm_config_"):
			continue
		}
		env = append(env, kv)
	}
	dir := t.TempDir()
	env = append(env, "CARGO_HOME="+filepath.Join(dir, "cargo"), "GOWORK=off", "GOTOOLCHAIN=local",
		"npm_config_cache="+filepath.Join(dir, "npm"), "npm_config_userconfig="+filepath.Join(dir, "npmrc"),
		"npm_config_update_notifier=false")
	if rustup, err := rustupCommand(); err == nil {
		home, err := os.UserHomeDir()
		require.NoError(t, err)
		if os.Getenv("RUSTUP_HOME") == "" {
			// rustup's default, which the moved CARGO_HOME does not change.
			env = append(env, "RUSTUP_HOME="+filepath.Join(home, ".rustup"))
		}
		env = append(env, "PATH="+filepath.Dir(rustup)+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	return env
}

// compilerTarballs packs the AssemblyScript compiler and its dependencies
// from guests/assemblyscript/node_modules (installed there by npm ci from
// the committed lockfile), so a project installs them with no registry.
func compilerTarballs(t *testing.T, env []string) []string {
	t.Helper()
	deps, err := filepath.Abs("../../guests/assemblyscript/node_modules")
	require.NoError(t, err)
	packs := t.TempDir()
	var tarballs []string
	for _, p := range []string{"assemblyscript", "binaryen", "long"} {
		cmd := exec.Command("npm", "pack", "--silent", filepath.Join(deps, p))
		cmd.Dir, cmd.Env = packs, env
		out, err := cmd.Output()
		require.NoError(t, err, "npm pack %s", p)
		tarballs = append(tarballs, filepath.Join(packs, strings.TrimSpace(string(out))))
	}
	return tarballs
}

// TestNewProjects: for each language, `callbox new LANG NAME DIR` writes
// a project into a temporary directory outside the repository; each way
// its README.md offers to build it (rustup's cargo and Debian's; clang
// without a libc and with wasi-libc) builds it there, with the copy of
// the SDK it carries and nothing from the repository; and its README's
// run block, run with this CLI, calls the callback on real .npy files:
// [1 2 3] times 2 is [2 4 6]. Only the AssemblyScript build's `npm
// install` is replaced: by an offline install of the compiler's tarballs
// (packed from guests/assemblyscript/node_modules) in place of the
// registry. A way whose toolchain is missing is skipped, naming the
// install command (scripts/install-toolchains.sh installs them all).
func TestNewProjects(t *testing.T) {
	license, err := os.ReadFile("../../LICENSE")
	require.NoError(t, err)
	for _, lang := range guests.Languages() {
		t.Run(lang, func(t *testing.T) {
			name := "my_" + lang
			if lang == "assemblyscript" {
				name = "my_as"
			}
			project := filepath.Join(t.TempDir(), name)
			code, stdout, stderr := cli(t, "new", lang, name, project)
			require.Equal(t, exitOK, code, stderr)
			assert.Contains(t, stdout, "wrote "+project)
			sdkLicense, err := os.ReadFile(filepath.Join(project, "callbox-sdk", "LICENSE"))
			require.NoError(t, err)
			assert.Equal(t, string(license), string(sdkLicense), "the SDK copy carries the license")

			cfg, err := configfile.Load(filepath.Join(project, "callbox.yaml"))
			require.NoError(t, err)
			cb, ok := cfg.Callback(name)
			require.True(t, ok, "callbox.yaml names the callback %s", name)
			module := cb.Module

			blocks := shBlocks(t, filepath.Join(project, "README.md"))
			require.Len(t, blocks, 2, "the README's build and run blocks")
			env := projectEnv(t)
			for i, script := range buildAlternatives(blocks[0]) {
				first, _, _ := strings.Cut(script, "\n")
				t.Run(strings.TrimLeft(first, "# "), func(t *testing.T) {
					if missing := missingToolchain(script); missing != "" {
						t.Skipf("build way %d needs %s", i+1, missing)
					}
					if lang == "assemblyscript" {
						script = offlineNpmInstall(t, script, compilerTarballs(t, env))
					}
					require.NoError(t, os.RemoveAll(module))
					cmd := exec.Command("sh", "-euc", script)
					cmd.Dir, cmd.Env = project, env
					out, err := cmd.CombinedOutput()
					require.NoError(t, err, "the generated README's build failed:\n%s\n%s", script, out)
					_, err = os.Stat(module)
					require.NoError(t, err, "the build wrote no %s:\n%s", module, out)
					runReadme(t, project, blocks[1], name)
				})
			}
		})
	}
}

// offlineNpmInstall replaces the README's `npm install`, which would fetch
// the compiler from the registry, with an offline install of the
// compiler's tarballs; the SDK still comes from package.json's
// "file:callbox-sdk".
func offlineNpmInstall(t *testing.T, script string, tarballs []string) string {
	t.Helper()
	var lines []string
	installs := 0
	for _, line := range strings.Split(script, "\n") {
		cmd, _, _ := strings.Cut(line, "#")
		if strings.TrimSpace(cmd) == "npm install" {
			line = "npm install --offline --no-audit --no-fund --no-save " + strings.Join(tarballs, " ")
			installs++
		}
		lines = append(lines, line)
	}
	require.Equal(t, 1, installs, "the README builds with a plain `npm install`:\n%s", script)
	return strings.Join(lines, "\n")
}

// runReadme runs a generated README's run block, every line a callbox
// command, with this CLI in the project directory, and checks what the
// callback computed: printed, and written with --out.
func runReadme(t *testing.T, project, block, name string) {
	t.Helper()
	t.Chdir(project)
	var last []string
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		line, _, _ = strings.Cut(line, "#")
		fields := strings.Fields(line)
		require.NotEmpty(t, fields)
		require.Equal(t, "callbox", fields[0], "the run block runs only callbox: %q", line)
		code, stdout, stderr := cli(t, fields[1:]...)
		require.Equal(t, exitOK, code, "%q: %s", line, stderr)
		last = fields
		if fields[1] == "run" {
			assert.Equal(t, "result 0: f32[3] [2 4 6]\n", stdout, "%q", line)
		}
	}
	require.Equal(t, []string{"callbox", "run", "-c", "callbox.yaml", name, "--in", "x.npy", "--in", "factor.npy"}, last)
	code, _, stderr := cli(t, append(last[1:], "--out", "y.npy")...)
	require.Equal(t, exitOK, code, stderr)
	y, err := tensorfile.ReadFile("y.npy")
	require.NoError(t, err)
	assert.Equal(t, []float32{2, 4, 6}, abi.MustView[float32](y))
}

// TestNewRefusesToOverwrite: new writes into a directory that does not
// exist or is empty, and refuses a non-empty one with a usage error naming
// it, writing nothing; DIR defaults to NAME.
func TestNewRefusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	code, stdout, stderr := cli(t, "new", "c", "scale")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "wrote scale:")
	src, err := os.ReadFile(filepath.Join("scale", "scale.c"))
	require.NoError(t, err)
	assert.Contains(t, string(src), `CALLBOX_EXPORT(scale, "(x: f32[n], factor: f32[]) -> f32[n]")`)

	require.NoError(t, os.WriteFile(filepath.Join("scale", "scale.c"), []byte("mine"), 0o644))
	require.NoError(t, os.Remove(filepath.Join("scale", "build.sh")))
	code, _, stderr = cli(t, "new", "c", "scale")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "callbox: new: scale exists and is not empty: name a new or empty directory (new LANG NAME DIR)\n", stderr)
	mine, err := os.ReadFile(filepath.Join("scale", "scale.c"))
	require.NoError(t, err)
	assert.Equal(t, "mine", string(mine), "a refused new leaves the directory alone")
	_, err = os.Stat(filepath.Join("scale", "build.sh"))
	assert.True(t, os.IsNotExist(err), "a refused new writes nothing")

	require.NoError(t, os.Mkdir("empty", 0o755))
	code, _, stderr = cli(t, "new", "go", "scale", "empty")
	require.Equal(t, exitOK, code, stderr)
	_, err = os.Stat(filepath.Join("empty", "main.go"))
	assert.NoError(t, err, "an empty directory is written into")

	require.NoError(t, os.WriteFile("file", nil, 0o644))
	code, _, stderr = cli(t, "new", "go", "scale", "file")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "file")
}

// TestNewUsageErrors: a bad language, name or argument count is a usage
// error that says what is wrong, and writes nothing.
func TestNewUsageErrors(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]struct {
		args []string
		want string
	}{
		"language":   {[]string{"new", "java", "scale"}, `new: unknown language "java": want one of assemblyscript, c, go, rust`},
		"no name":    {[]string{"new", "rust"}, "accepts between 2 and 3 arg(s), received 1"},
		"too many":   {[]string{"new", "rust", "a", "b", "c"}, "accepts between 2 and 3 arg(s), received 4"},
		"upper case": {[]string{"new", "rust", "Scale"}, `bad callback name "Scale": names must match ^[a-z][a-z0-9_-]*$ (names are case-sensitive; did you mean scale?)`},
		"dash":       {[]string{"new", "c", "my-scale"}, `new: bad name "my-scale": it also names the C function, which cannot contain '-' (try my_scale)`},
		"sdk name":   {[]string{"new", "rust", "callbox"}, `new: bad name "callbox": names beginning with callbox are the SDK's`},
		"memory":     {[]string{"new", "c", "memory"}, "memory is the module's memory export"},
		"rust word":  {[]string{"new", "rust", "fn"}, `new: bad name "fn": it is reserved in Rust; choose another`},
		"go word":    {[]string{"new", "go", "func"}, `new: bad name "func": it is reserved in Go`},
		"go builtin": {[]string{"new", "go", "float32"}, `new: bad name "float32": it is reserved in Go`},
		"as word":    {[]string{"new", "assemblyscript", "function"}, `new: bad name "function": it is reserved in AssemblyScript`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			target := filepath.Join(dir, name)
			args := tc.args
			if len(args) == 3 {
				args = append(args, target)
			}
			code, _, stderr := cli(t, args...)
			assert.Equal(t, exitUsage, code, stderr)
			assert.Contains(t, stderr, tc.want)
			_, err := os.Stat(target)
			assert.True(t, os.IsNotExist(err), "nothing is written")
		})
	}
}

// TestNewLanguagesHaveTemplates: every language with an SDK has a
// project, whose files all render (the callback source, a build file, the
// config and the README).
func TestNewLanguagesHaveTemplates(t *testing.T) {
	for _, lang := range guests.Languages() {
		files, err := projectFiles(lang, "scale")
		require.NoError(t, err, lang)
		for _, want := range []string{"README.md", "callbox.yaml", "callbox-sdk/LICENSE", ".gitignore"} {
			assert.Contains(t, files, want, lang)
		}
		pl, ok := projectLangOf(lang)
		require.True(t, ok)
		src := files[strings.ReplaceAll(pl.source, "NAME", "scale")]
		assert.Contains(t, string(src.data), projectSignature, "%s: the source declares the signature", lang)
		assert.NotContains(t, string(src.data), "NAME", lang)
	}
}

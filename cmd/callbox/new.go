package main

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"go/token"
	"go/types"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"text/template"

	"github.com/spf13/cobra"

	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/guests"
	"github.com/seed4b3e0ccb/callbox/internal/release"
)

// projectTemplates are the files `callbox new` writes besides the SDK:
// newproject/<lang>/ per language (text/template files; "NAME" in a path
// is the callback's name, gitignore.tmpl is .gitignore), the shared
// callbox.yaml, and partials.tmpl with the READMEs' shared sections.
//
//go:embed newproject
var projectTemplates embed.FS

// Where the generated project keeps its copy of the SDK, and the signature
// of the callback it starts with.
const (
	projectSDKDir    = "callbox-sdk"
	projectSignature = "(x: f32[n], factor: f32[]) -> f32[n]"
	// goSDKPackage is the Go SDK's import path, which the generated go.mod
	// replaces with the copy.
	goSDKPackage = "github.com/seed4b3e0ccb/callbox/guests/go/callbox"
)

// projectLang is what differs between the languages' projects.
type projectLang struct {
	title  string // the language's name in prose
	source string // the callback's source file, "NAME" for the name
	module string // the built module, relative to the project
	wasi   string // why the callback needs `wasi: minimal`, or ""
}

// projectLangOf describes the project of lang, one of guests.Languages().
func projectLangOf(lang string) (projectLang, bool) {
	switch lang {
	case "rust":
		return projectLang{title: "Rust", source: "src/lib.rs", module: "target/wasm32-unknown-unknown/release/NAME.wasm"}, true
	case "assemblyscript":
		return projectLang{title: "AssemblyScript", source: "NAME.ts", module: "NAME.wasm"}, true
	case "c":
		return projectLang{title: "C", source: "NAME.c", module: "NAME.wasm"}, true
	case "go":
		return projectLang{title: "Go", source: "main.go", module: "NAME.wasm",
			wasi: "the Go runtime imports wasi_snapshot_preview1: clocks, random_get, fd_write"}, true
	}
	return projectLang{}, false
}

// projectData is what the templates see.
type projectData struct {
	Name, Lang, Title string
	Signature         string
	Source, Module    string
	WASI              string // why the module needs `wasi: minimal`, or ""
	Version           string // the release the SDK copy comes from
	GoSDK             string // the Go SDK's import path
	Package           string // the AssemblyScript SDK's npm package name
	Compiler          string // the AssemblyScript compiler version the SDK is tested with
}

// projectFile is one file of a generated project.
type projectFile struct {
	data []byte
	mode fs.FileMode
}

func newNewCmd() *cobra.Command {
	langs := strings.Join(guests.Languages(), ", ")
	return &cobra.Command{
		Use:   "new LANG NAME [DIR]",
		Short: "Write a callback project to start from (" + langs + ")",
		Long: "new writes a project for a callback NAME in LANG (" + langs + ") into the directory DIR\n" +
			"(default NAME), which must be new or empty: the source of a simple callback\n" +
			"NAME = " + projectSignature + ", its build file, a callbox.yaml naming the built\n" +
			"module, a README.md saying how to build and run it, and a copy of the language's SDK in\n" +
			projectSDKDir + "/, so the project builds without the callbox repository or a package registry.",
		Example: "  callbox new rust scale\n  callbox new go my_filter filters/my_filter",
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.RangeArgs(2, 3)(cmd, args); err != nil {
				return usageErr(err)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			lang, name := args[0], args[1]
			dir := name
			if len(args) == 3 {
				dir = args[2]
			}
			files, err := projectFiles(lang, name)
			if err != nil {
				return usageErr(err)
			}
			if err := writeProject(dir, files); err != nil {
				return usageErr(err)
			}
			return printProject(cmd.OutOrStdout(), lang, name, dir, files)
		},
	}
}

// printProject tells what new wrote and what to do next.
func printProject(w io.Writer, lang, name, dir string, files map[string]projectFile) error {
	var top []string
	for _, p := range slices.Sorted(maps.Keys(files)) {
		if strings.HasPrefix(p, projectSDKDir+"/") {
			continue
		}
		top = append(top, p)
	}
	_, err := fmt.Fprintf(w, "wrote %s: the callback %s in %s (%s), with the callbox SDK %s in %s/\n"+
		"build it as %s says, then: callbox run -c callbox.yaml %s --in x.npy --in factor.npy\n",
		dir, name, lang, strings.Join(top, ", "), release.Version, projectSDKDir,
		filepath.Join(dir, "README.md"), name)
	return err
}

// projectFiles returns the files of a new project for the callback name in
// lang, by slash-separated path relative to the project directory.
func projectFiles(lang, name string) (map[string]projectFile, error) {
	pl, ok := projectLangOf(lang)
	if !ok || !slices.Contains(guests.Languages(), lang) {
		return nil, fmt.Errorf("new: unknown language %q: want one of %s", lang, strings.Join(guests.Languages(), ", "))
	}
	if err := checkProjectName(lang, pl.title, name); err != nil {
		return nil, err
	}
	sdk, err := guests.SDKFiles(lang)
	if err != nil {
		return nil, fmt.Errorf("new: %w", err)
	}
	named := func(p string) string { return strings.ReplaceAll(p, "NAME", name) }
	data := projectData{
		Name: name, Lang: lang, Title: pl.title, Signature: projectSignature,
		Source: named(pl.source), Module: named(pl.module), WASI: pl.wasi,
		Version: release.Version, GoSDK: goSDKPackage,
	}
	if lang == "assemblyscript" {
		if data.Package, data.Compiler, err = npmPackage(sdk["package.json"]); err != nil {
			return nil, fmt.Errorf("new: the AssemblyScript SDK's package.json: %w", err)
		}
	}
	files := map[string]projectFile{}
	for p, b := range sdk {
		files[path.Join(projectSDKDir, p)] = projectFile{b, 0o644}
	}
	partials, err := template.New("partials.tmpl").ParseFS(projectTemplates, "newproject/partials.tmpl")
	if err != nil {
		return nil, fmt.Errorf("new: %w", err)
	}
	render := func(src, dst string) error {
		text, err := projectTemplates.ReadFile(src)
		if err != nil {
			return err
		}
		t, err := partials.Clone()
		if err == nil {
			t, err = t.New(src).Parse(string(text))
		}
		var buf bytes.Buffer
		if err == nil {
			err = t.Execute(&buf, data)
		}
		if err != nil {
			return fmt.Errorf("template %s: %w", src, err)
		}
		mode := fs.FileMode(0o644)
		if strings.HasSuffix(dst, ".sh") {
			mode = 0o755
		}
		files[dst] = projectFile{buf.Bytes(), mode}
		return nil
	}
	if err := render("newproject/callbox.yaml.tmpl", "callbox.yaml"); err != nil {
		return nil, fmt.Errorf("new: %w", err)
	}
	root := "newproject/" + lang
	err = fs.WalkDir(projectTemplates, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		dst := strings.TrimSuffix(strings.TrimPrefix(p, root+"/"), ".tmpl")
		if dst == "gitignore" {
			dst = ".gitignore"
		}
		return render(p, named(dst))
	})
	if err != nil {
		return nil, fmt.Errorf("new: %w", err)
	}
	return files, nil
}

// npmPackage reads an npm package.json's name and the version of the
// AssemblyScript compiler it develops with.
func npmPackage(packageJSON []byte) (name, compiler string, err error) {
	var pkg struct {
		Name            string            `json:"name"`
		DevDependencies map[string]string `json:"devDependencies"`
	}
	if err := json.Unmarshal(packageJSON, &pkg); err != nil {
		return "", "", err
	}
	compiler = pkg.DevDependencies["assemblyscript"]
	if pkg.Name == "" || compiler == "" {
		return "", "", errors.New(`want "name" and devDependencies.assemblyscript`)
	}
	return pkg.Name, compiler, nil
}

// checkProjectName checks that name can name a callback (config's rule),
// a function in lang, and the project's package.
func checkProjectName(lang, title, name string) error {
	if err := (&config.CallbackNames{}).Check(name); err != nil {
		return fmt.Errorf("new: %w", err)
	}
	if strings.Contains(name, "-") {
		return fmt.Errorf("new: bad name %q: it also names the %s function, which cannot contain '-' (try %s)", name, title, strings.ReplaceAll(name, "-", "_"))
	}
	if strings.HasPrefix(name, "callbox") || name == "memory" {
		return fmt.Errorf("new: bad name %q: names beginning with callbox are the SDK's (its exports callbox_*, its package callbox), and memory is the module's memory export", name)
	}
	if reservedName(lang, name) {
		return fmt.Errorf("new: bad name %q: it is reserved in %s; choose another", name, title)
	}
	return nil
}

// reservedName reports whether name cannot name the callback's function or
// the project's package in lang: a keyword, or a name the generated code
// uses itself.
func reservedName(lang, name string) bool {
	switch lang {
	case "go":
		// Predeclared names (float32, len, ...) would shadow what the
		// generated code uses; init and main are special.
		return token.IsKeyword(name) || types.Universe.Lookup(name) != nil || name == "init" || name == "main"
	case "rust":
		// Keywords, and crates a package may not be named after.
		return slices.Contains(strings.Fields(`as async await break const continue crate dyn else enum extern
			false fn for gen if impl in let loop match mod move mut pub ref return self static struct super
			trait true try type unsafe use where while abstract become box do final macro override priv
			typeof unsized virtual yield core std alloc test proc_macro`), name)
	case "assemblyscript":
		// Reserved words, the SDK names the source imports, and the
		// builtins it uses.
		return slices.Contains(strings.Fields(`break case catch class const continue debugger default delete do
			else enum export extends false finally for function if import in instanceof new null return super
			switch this throw true try typeof var void while with implements interface let package private
			protected public static yield abort frame run signature f32 i32 usize`), name)
	}
	return false // C: the name only appears inside the SDK's prefixed identifiers and as the export name
}

// writeProject writes files into dir, which must not exist or be empty.
// Files are created exclusively, never overwriting; on an error, what was
// written is removed.
func writeProject(dir string, files map[string]projectFile) (err error) {
	entries, err := os.ReadDir(dir)
	switch {
	case err == nil && len(entries) > 0:
		return fmt.Errorf("new: %s exists and is not empty: name a new or empty directory (new LANG NAME DIR)", dir)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("new: %w", err)
	}
	created := err != nil
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("new: %w", err)
	}
	defer func() {
		if err == nil {
			return
		}
		if created {
			os.RemoveAll(dir)
			return
		}
		for p := range files {
			os.RemoveAll(filepath.Join(dir, filepath.FromSlash(strings.SplitN(p, "/", 2)[0])))
		}
	}()
	for p, f := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return fmt.Errorf("new: %w", err)
		}
		if err := writeNew(full, f); err != nil {
			return fmt.Errorf("new: %w", err)
		}
	}
	return nil
}

// writeNew creates path, which must not exist, with f's contents and mode.
func writeNew(path string, f projectFile) error {
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.mode)
	if err != nil {
		return err
	}
	_, err = out.Write(f.data)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

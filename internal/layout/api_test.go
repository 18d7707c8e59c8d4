package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// public reports whether a package of ours is importable by a program
// outside the module: not internal, not a command or example.
func public(p pkg) bool {
	rel := strings.TrimPrefix(p.ImportPath, module+"/")
	return p.Name != "main" && !strings.Contains("/"+rel+"/", "/internal/") &&
		!under(p.ImportPath, "cmd") && !under(p.ImportPath, "examples")
}

// internalUses lists, for one file of a public package, every exported
// declaration that names a type of an internal package of ours: a
// program outside the module could see such a type but never name it.
func internalUses(fset *token.FileSet, f *ast.File) []string {
	internal := map[string]string{} // local name → import path
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if !strings.HasPrefix(path, module+"/") || !strings.Contains(path+"/", "/internal/") {
			continue
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		internal[name] = path
	}
	if len(internal) == 0 {
		return nil
	}
	var out []string
	check := func(decl string, n ast.Node) {
		if n == nil {
			return
		}
		ast.Inspect(n, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && internal[x.Name] != "" {
					out = append(out, fset.Position(sel.Pos()).String()+": "+decl+" names "+internal[x.Name]+"."+sel.Sel.Name)
				}
			}
			return true
		})
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() || (d.Recv != nil && !exportedReceiver(d.Recv)) {
				continue
			}
			check(d.Name.Name, d.Type)
			if d.Recv != nil {
				check(d.Name.Name, d.Recv)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					st, isStruct := s.Type.(*ast.StructType)
					if !isStruct {
						check(s.Name.Name, s.Type)
						continue
					}
					for _, fld := range st.Fields.List {
						exported := len(fld.Names) == 0 // embedded
						for _, n := range fld.Names {
							exported = exported || n.IsExported()
						}
						if exported {
							check(s.Name.Name, fld.Type)
						}
					}
				case *ast.ValueSpec:
					for i, n := range s.Names {
						if !n.IsExported() {
							continue
						}
						check(n.Name, s.Type)
						if i < len(s.Values) {
							check(n.Name, s.Values[i])
						}
					}
				}
			}
		}
	}
	return out
}

func exportedReceiver(recv *ast.FieldList) bool {
	t := recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.IsExported()
}

// TestPublicAPINamesNoInternalType: no exported name of a public package
// (its functions' parameters and results, its types, aliases, exported
// fields and variables) uses a type from an internal package. Internal
// means internal: the engine contract, DLPack's structs and the worker's
// lockdown report are ours to change.
func TestPublicAPINamesNoInternalType(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var checked int
	for _, p := range list(t, root) {
		if !public(p) {
			continue
		}
		checked++
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range internalUses(fset, f) {
				t.Error(v)
			}
		}
	}
	if checked < 5 {
		t.Fatalf("checked %d public packages; want abi, config, host, cuda, lowering and more", checked)
	}
}

// The check catches each form of the leak it names.
func TestInternalUsesCatchesEachForm(t *testing.T) {
	src := `package p
import (
	"` + module + `/internal/dlpack"
	eng "` + module + `/sandbox/internal/core"
	"` + module + `/abi"
)
type Alias = eng.Engine
type S struct { Pub *dlpack.Tensor; priv dlpack.Tensor; ok abi.Tensor }
func F(t *dlpack.Tensor) error { return nil }
func (S) M() []eng.Module { return nil }
func (*s) Hidden(t *dlpack.Tensor) {}
func private(t *dlpack.Tensor) {}
var V = eng.New
var W abi.Tensor
type s struct{}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := internalUses(fset, f)
	want := []string{"Alias names", "S names", "F names", "M names", "V names"}
	if len(got) != len(want) {
		t.Fatalf("got %d uses, want %d: %q", len(got), len(want), got)
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("use %d: %q, want %q", i, got[i], w)
		}
	}
}

package meter

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/wasmbin"
)

// FuzzRewriteKeepsInterface feeds Instrument arbitrary modules, seeded with
// the hostile suite's: whatever wazero compiles and Instrument rewrites
// must still compile, with every original import and export in place and
// every exported function of the same type. The rewrite shifts function
// indices past the imports it adds; an index it shifts wrongly would leave
// an export naming another function, and the host would call the wrong
// code.
func FuzzRewriteKeepsInterface(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("..", "..", "..", "..", "host", "testdata", "hostile", "*.wat"))
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		if b, err := wat.Compile(string(src)); err == nil {
			f.Add(b)
		}
	}
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	f.Fuzz(func(t *testing.T, plain []byte) {
		// The host parses first: wazero's decoder allocates what a count
		// declares (wasmbin's decoder bombs).
		if _, err := wasmbin.Parse(plain); err != nil {
			return
		}
		before, err := rt.CompileModule(ctx, plain)
		if err != nil {
			return
		}
		defer before.Close(ctx)
		metered, err := Instrument(plain, Options{Meter: true, StackLimit: 1 << 20, GrowHook: true})
		if err != nil {
			return
		}
		after, err := rt.CompileModule(ctx, metered)
		if err != nil {
			t.Fatalf("wazero compiles the module but not its rewrite: %v", err)
		}
		defer after.Close(ctx)
		for name, want := range before.ExportedFunctions() {
			got, ok := after.ExportedFunctions()[name]
			if !ok {
				t.Fatalf("the rewrite lost export %q", name)
			}
			if !slices.Equal(got.ParamTypes(), want.ParamTypes()) || !slices.Equal(got.ResultTypes(), want.ResultTypes()) {
				t.Fatalf("export %q had type %v -> %v, has %v -> %v after the rewrite", name,
					want.ParamTypes(), want.ResultTypes(), got.ParamTypes(), got.ResultTypes())
			}
		}
		for name, want := range before.ExportedMemories() {
			if _, ok := after.ExportedMemories()[name]; !ok || want == nil {
				t.Fatalf("the rewrite lost memory export %q", name)
			}
		}
		imports := after.ImportedFunctions()
		for i, want := range before.ImportedFunctions() {
			m, n, _ := want.Import()
			if i >= len(imports) {
				t.Fatalf("the rewrite lost import %s.%s", m, n)
			}
			gm, gn, _ := imports[i].Import()
			if gm != m || gn != n {
				t.Fatalf("import %d was %s.%s, is %s.%s after the rewrite", i, m, n, gm, gn)
			}
		}
	})
}

package lowering

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary text to the parser and, when it parses, to the
// checker, the passes and the emitter: nothing may panic; a parse error is
// an *Error with a position; a program that parses prints canonically.
func FuzzParse(f *testing.F) {
	f.Add([]byte(everyOp))
	for _, name := range exampleNames {
		if src, err := os.ReadFile(filepath.Join(examplesDir, name+".cbir")); err == nil {
			f.Add(src)
		}
	}
	f.Add([]byte("func @f(%x: f32[2]) -> f32[2] {\n  %c = constant [1, 2] : f32[2]\n  return %c\n}\n"))
	f.Add([]byte("func @f(%p: pred[]) -> () {\n  cond %p {\n    yield\n  } else {\n    yield\n  }\n  return\n}\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		p, err := Parse("fuzz.cbir", src)
		if err != nil {
			var le *Error
			if !errors.As(err, &le) {
				t.Fatalf("parse error is %T, not *Error: %v", err, err)
			}
			if le.Pos.Line < 1 || le.Pos.Col < 1 {
				t.Fatalf("parse error without a position: %v", err)
			}
			return
		}
		text := Print(p)
		q, err := Parse("printed", []byte(text))
		if err != nil {
			t.Fatalf("printed program does not parse: %v\n%s", err, text)
		}
		if again := Print(q); again != text {
			t.Fatalf("print is not canonical:\n%s\nvs\n%s", text, again)
		}
		if Check(p, testCat) != nil {
			return
		}
		if err := Lower(p, Options{}); err != nil {
			return // a hand-threaded program with wrong tokens
		}
		if _, err := Emit(p, testCat); err != nil {
			t.Fatalf("a lowered program does not emit: %v\n%s", err, Print(p))
		}
	})
}

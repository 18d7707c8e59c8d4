package lowering

import (
	"os"
	"testing"

	"github.com/seed4b3e0ccb/callbox/abi"
)

var testCat = StaticCatalog{
	"scale":     {Name: "scale", ID: "cb1-aaaa", Signature: abi.MustParseSignature("(x: f32[n], factor: f32[]) -> f32[n]")},
	"tap_print": {Name: "tap_print", ID: "cb1-bbbb", Signature: abi.MustParseSignature("(x: f32[n]) -> $0")},
}

func TestSmoke(t *testing.T) {
	src, _ := os.ReadFile("/tmp/lw/t.cbir")
	p, err := Compile("t.cbir", src, testCat, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := Print(p)
	t.Log("\n" + out)
	p2, err := Parse("x", []byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if Print(p2) != out {
		t.Fatal("not canonical")
	}
	if err := Check(p2, testCat); err != nil {
		t.Fatal(err)
	}
	s, err := Emit(p, testCat)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + s)
}

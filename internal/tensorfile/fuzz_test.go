package tensorfile

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// FuzzDecode feeds arbitrary bytes to the .npy reader the CLI uses for
// `callbox run --in`. It must not panic,
// must not allocate by a header's claims before checking them against the
// file, and a tensor it accepts must be valid and survive a write/read
// round trip unchanged.
func FuzzDecode(f *testing.F) {
	for _, tn := range []abi.Tensor{
		abi.From([]float32{1, 2, 3, 4, 5, 6}, 2, 3),
		abi.Scalar[float64](2.5),
		abi.From([]int64{}, 0),
		abi.From([]bool{true, false}),
		abi.From([]complex128{1 + 2i}),
		abi.From([]uint16{1, 2, 3}),
	} {
		var b bytes.Buffer
		if err := Encode(&b, tn); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	// Conformance inputs, when present.
	files, _ := filepath.Glob("../../guests/testdata/conformance/*/in0.npy")
	for _, p := range files[:min(len(files), 4)] {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }                                           \n"))
	f.Add([]byte("\x93NUMPY\x03\x00\xff\xff\xff\x7f{'descr'"))
	// Files NumPy wrote: bools stored as bytes other than 0/1, big-endian,
	// float16, version 3.0.
	for _, name := range []string{"bool_bytes", "int16_2x3_be_v3", "float16", "complex128_be"} {
		if b, err := os.ReadFile("testdata/numpy/" + name + ".npy"); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tn, err := Decode(data)
		if err != nil {
			return
		}
		if err := tn.Validate(); err != nil {
			t.Fatalf("decoded an invalid tensor %s: %v", tn.Type(), err)
		}
		var b bytes.Buffer
		if err := Encode(&b, tn); err != nil {
			return // shapes npyio cannot write (an empty leading dimension)
		}
		again, err := Decode(b.Bytes())
		if err != nil {
			t.Fatalf("re-encoded %s does not decode: %v", tn.Type(), err)
		}
		if again.DType != tn.DType || !again.Shape.Equal(tn.Shape) || !bytes.Equal(again.Data, tn.Data) {
			t.Fatalf("round trip changed %s into %s", tn.Type(), again.Type())
		}
	})
}

package tensorfile

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// numpyReading is what NumPy read from one file (npyref.py's JSON): the
// dtype, shape and little-endian bytes, bools as 0/1; or, for a file
// callbox must refuse, a fragment of the error callbox must give.
type numpyReading struct {
	DType      string  `json:"dtype"`
	Shape      []int64 `json:"shape"`
	Data       string  `json:"data"`
	NumPyDType string  `json:"numpy_dtype"`
	Fortran    bool    `json:"fortran"`
	Error      string  `json:"error"`
}

// python is Debian's interpreter with NumPy; the first python3 on PATH may
// be another one without it.
const python = "/usr/bin/python3"

// numpy returns the python to run npyref.py with, or skips the test.
func numpy(t *testing.T) string {
	t.Helper()
	if err := exec.Command(python, "-c", "import numpy").Run(); err != nil {
		t.Skipf("%s with numpy is not installed (apt-get install python3-numpy; scripts/install-toolchains.sh does): %v", python, err)
	}
	return python
}

func npyref(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(numpy(t), append([]string{"testdata/numpy/npyref.py"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "npyref.py %v: %s", args, stderr.String())
	return out
}

// checkVectors decodes every file vectors.json in dir names and compares
// it with NumPy's reading.
func checkVectors(t *testing.T, dir string) {
	raw, err := os.ReadFile(filepath.Join(dir, "vectors.json"))
	require.NoError(t, err)
	var want map[string]numpyReading
	require.NoError(t, json.Unmarshal(raw, &want))
	require.Greater(t, len(want), 40)
	dtypes := map[abi.DType]bool{}
	for name, w := range want {
		t.Run(name, func(t *testing.T) {
			got, err := ReadFile(filepath.Join(dir, name))
			if w.Error != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), w.Error)
				return
			}
			require.NoError(t, err)
			data, err := base64.StdEncoding.DecodeString(w.Data)
			require.NoError(t, err)
			assert.Equal(t, w.DType, got.DType.String())
			assert.Equal(t, abi.Shape(w.Shape), got.Shape)
			assert.Equal(t, data, got.Data, "values differ from NumPy's reading")
			dtypes[got.DType] = true
		})
	}
	for _, d := range abi.DTypes() {
		if d != abi.BF16 {
			assert.True(t, dtypes[d], "no NumPy vector of dtype %s was read", d)
		}
	}
}

// TestNumPyVectors reads the committed files NumPy wrote (every dtype,
// both byte orders, versions 1.0-3.0, edge values, bool bytes other than 0
// and 1) and compares each value with what NumPy read from them. It needs
// no NumPy; regenerate with `/usr/bin/python3 npyref.py gen .` in
// testdata/numpy.
func TestNumPyVectors(t *testing.T) {
	checkVectors(t, "testdata/numpy")
}

// TestNumPyVectorsFresh writes the vectors with the installed NumPy and
// reads them, so a NumPy that writes differently is noticed.
func TestNumPyVectorsFresh(t *testing.T) {
	dir := t.TempDir()
	npyref(t, "gen", dir)
	checkVectors(t, dir)
}

// TestBoolNonZeroIsTrue is the misread of issue 12: a bool byte other than
// 0 or 1 read as false. It needs no NumPy.
func TestBoolNonZeroIsTrue(t *testing.T) {
	img, err := os.ReadFile("testdata/numpy/bool_bytes.npy")
	require.NoError(t, err)
	got, err := Decode(img)
	require.NoError(t, err)
	assert.Equal(t, []bool{false, true, true, true, true, false}, abi.MustView[bool](got))
	assert.Equal(t, []byte{0, 1, 1, 1, 1, 0}, got.Data, "bools are normalised to 0/1 before a guest sees them")
}

// TestDifferentialNumPy writes 600 .npy images, valid and
// damaged (every dtype, both byte orders, the three versions, header
// variants other writers produce, C and Fortran order, truncations and
// byte flips), has NumPy
// load them all, and requires the same verdict and the same values:
// whenever NumPy reads a file as a dtype callbox supports, callbox reads
// the same values, and callbox never accepts a file NumPy refuses. The
// one deliberate difference: bytes after the data, which NumPy ignores and
// callbox refuses.
func TestDifferentialNumPy(t *testing.T) {
	numpy(t)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 5))
	descrs := []string{"|b1", "|i1", "<i2", ">i2", "<i4", ">i4", "<i8", ">i8", "|u1", "<u2", ">u2", "<u4", ">u4", "<u8", ">u8",
		"<f2", ">f2", "<f4", ">f4", "<f8", ">f8", "<c8", ">c8", "<c16", ">c16", "<b1", ">i1", "=f4", "<V2", "<U1", "<M8[s]"}
	sizes := map[string]int{"b1": 1, "i1": 1, "u1": 1, "i2": 2, "u2": 2, "f2": 2, "V2": 2, "i4": 4, "u4": 4, "f4": 4, "U1": 4, "i8": 8, "u8": 8, "f8": 8, "c8": 8, "M8[s]": 8, "c16": 16}
	n := 0
	longer := map[string]bool{} // files with a byte past their data
	write := func(img []byte) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d.npy", n)), img, 0o644))
		n++
	}
	for i := 0; i < 600; i++ {
		descr := descrs[rng.IntN(len(descrs))]
		rank := rng.IntN(4)
		shape := make([]int, rank)
		elems := 1
		for j := range shape {
			shape[j] = rng.IntN(4)
			elems *= shape[j]
		}
		data := make([]byte, elems*sizes[descr[1:]])
		for j := range data {
			data[j] = byte(rng.Uint32())
			if rng.IntN(3) == 0 {
				data[j] = 0
			}
		}
		img := npyImage(rng, descr, shape, data)
		switch rng.IntN(6) {
		case 0: // truncate
			img = img[:rng.IntN(len(img)+1)]
		case 1: // flip a byte in the header
			img[6+rng.IntN(min(len(img)-6, 120))] ^= byte(1 << rng.IntN(8))
		case 2: // one byte too many
			img = append(img, 0)
			longer[fmt.Sprintf("f%04d.npy", n)] = true
		}
		write(img)
	}
	var readings map[string]numpyReading
	require.NoError(t, json.Unmarshal(npyref(t, "load", dir), &readings))
	require.Len(t, readings, n)
	agreed := 0
	for name, np := range readings {
		img, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		got, err := Decode(img)
		switch {
		case np.Error != "":
			assert.Error(t, err, "%s: NumPy refuses it (%s) but callbox read %v", name, np.Error, got.Type())
		case np.DType == "":
			assert.Error(t, err, "%s: NumPy reads dtype %s, which callbox cannot represent, but callbox read %v", name, np.NumPyDType, got.Type())
		case longer[name]:
			// NumPy ignores trailing bytes; callbox refuses them on purpose.
			assert.ErrorContains(t, err, "data bytes after the header", name)
		default:
			if !assert.NoError(t, err, "%s: NumPy reads it as %s%v", name, np.DType, np.Shape) {
				continue
			}
			data, _ := base64.StdEncoding.DecodeString(np.Data)
			assert.Equal(t, np.DType, got.DType.String(), name)
			assert.Equal(t, abi.Shape(np.Shape), got.Shape, name)
			assert.Equal(t, data, got.Data, name)
			agreed++
		}
	}
	assert.Greater(t, agreed, 200, "too few files both readers accepted for the comparison to mean much")
}

// npyImage writes a .npy image with header variations other writers use:
// versions 1-3, key order, quote style, trailing comma, padding.
func npyImage(rng *rand.Rand, descr string, shape []int, data []byte) []byte {
	q := "'"
	if rng.IntN(4) == 0 {
		q = `"`
	}
	var dims []string
	for _, d := range shape {
		if rng.IntN(10) == 0 {
			dims = append(dims, fmt.Sprint(d)+"L") // a Python 2 long
		} else {
			dims = append(dims, fmt.Sprint(d))
		}
	}
	tuple := "(" + strings.Join(dims, ", ")
	if len(shape) == 1 && rng.IntN(8) != 0 { // sometimes "(3)", which NumPy reads as (3,)
		tuple += ","
	}
	tuple += ")"
	order := "False"
	if rng.IntN(4) == 0 { // column-major: NumPy reorders it, and so must callbox
		order = "True"
	}
	kv := []string{
		q + "descr" + q + ": " + q + descr + q,
		q + "fortran_order" + q + ": " + order,
		q + "shape" + q + ": " + tuple,
	}
	rng.Shuffle(len(kv), func(i, j int) { kv[i], kv[j] = kv[j], kv[i] })
	hdr := "{" + strings.Join(kv, ", ")
	if rng.IntN(2) == 0 {
		hdr += ", "
	}
	hdr += "}" + strings.Repeat(" ", rng.IntN(70)) + "\n"
	var b bytes.Buffer
	b.WriteString("\x93NUMPY")
	switch v := 1 + rng.IntN(3); v {
	case 1:
		b.Write([]byte{1, 0})
		_ = binary.Write(&b, binary.LittleEndian, uint16(len(hdr)))
	default:
		b.Write([]byte{byte(v), 0})
		_ = binary.Write(&b, binary.LittleEndian, uint32(len(hdr)))
	}
	b.WriteString(hdr)
	b.Write(data)
	return b.Bytes()
}

// TestEncodeReadByNumPy has NumPy read what Encode writes, for every dtype
// NumPy has.
func TestEncodeReadByNumPy(t *testing.T) {
	numpy(t)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(9, 9))
	want := map[string]abi.Tensor{}
	for _, d := range abi.DTypes() {
		if d == abi.BF16 {
			continue
		}
		for _, shape := range []abi.Shape{{}, {5}, {2, 3}, {0, 4}} {
			tn, err := abi.New(d, shape...)
			require.NoError(t, err)
			for i := range tn.Data {
				tn.Data[i] = byte(rng.Uint32())
			}
			if d == abi.PRED {
				for i := range tn.Data {
					tn.Data[i] &= 1
				}
			}
			name := fmt.Sprintf("%s_%d.npy", d, len(want))
			require.NoError(t, WriteFile(filepath.Join(dir, name), tn))
			want[name] = tn
		}
	}
	var readings map[string]numpyReading
	require.NoError(t, json.Unmarshal(npyref(t, "load", dir), &readings))
	require.Len(t, readings, len(want))
	for name, tn := range want {
		np := readings[name]
		require.Empty(t, np.Error, name)
		data, _ := base64.StdEncoding.DecodeString(np.Data)
		assert.Equal(t, tn.DType.String(), np.DType, name)
		assert.True(t, tn.Shape.Equal(abi.Shape(np.Shape)), "%s: shape %v, NumPy read %v", name, tn.Shape, np.Shape)
		assert.Equal(t, tn.Data, data, name)
	}
}

// TestF16ConversionMatchesNumPy checks Float64ToF16 against NumPy's
// astype(np.float16) on edge cases, every float16 value and its
// neighbours, and random doubles; F16ToFloat64 is checked on every bit
// pattern by round trip (NumPy's widening is compared in
// TestNumPyVectors through float16_all).
func TestF16ConversionMatchesNumPy(t *testing.T) {
	numpy(t)
	var vals []float64
	for h := 0; h < 1<<16; h++ {
		f := F16ToFloat64(uint16(h))
		vals = append(vals, f, math.Nextafter(f, math.Inf(1)), math.Nextafter(f, math.Inf(-1)))
		if h < 0x7c00 { // the midpoint to the next value: ties go to even
			next := F16ToFloat64(uint16(h + 1))
			vals = append(vals, (f+next)/2)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		vals = append(vals, math.Float64frombits(rng.Uint64()), rng.NormFloat64()*math.Pow(2, float64(rng.IntN(60)-40)))
	}
	vals = append(vals, 65519.99, 65520, 1e-8, 2.98e-8, 5.96e-8, math.SmallestNonzeroFloat64, math.MaxFloat64)
	buf := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(buf[8*i:], math.Float64bits(v))
	}
	path := filepath.Join(t.TempDir(), "vals.f64")
	require.NoError(t, os.WriteFile(path, buf, 0o644))
	var want []uint16
	require.NoError(t, json.Unmarshal(npyref(t, "f16", path), &want))
	require.Len(t, want, len(vals))
	bad := 0
	for i, v := range vals {
		if got := Float64ToF16(v); got != want[i] && bad < 10 {
			bad++
			t.Errorf("Float64ToF16(%v = %#016x) = %#04x, NumPy gives %#04x", v, math.Float64bits(v), got, want[i])
		}
	}
}

func TestF16RoundTrip(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := F16ToFloat64(uint16(h))
		assert.Equal(t, uint16(h), Float64ToF16(f), "bits %#04x (%v)", h, f)
	}
	assert.Equal(t, 65504.0, F16ToFloat64(0x7bff))
	assert.Equal(t, math.Ldexp(1, -24), F16ToFloat64(1))
	assert.Equal(t, uint16(0x7c00), Float64ToF16(65520), "65520 rounds up past the largest float16")
	assert.Equal(t, uint16(0x7bff), Float64ToF16(65519.99))
}

// TestFortranOrder reads column-major files as NumPy does (np.load, then
// C order): the elements of a Fortran-order (2, 3, 4) array, big-endian,
// and a Fortran-order bool array holding byte 2, come back in row-major
// order, swapped and normalised. It needs no NumPy.
func TestFortranOrder(t *testing.T) {
	image := func(descr, shape string, data []byte) []byte {
		hdr := fmt.Sprintf("{'descr': '%s', 'fortran_order': True, 'shape': %s, }", descr, shape)
		hdr += strings.Repeat(" ", 63-(10+len(hdr))%64) + "\n"
		var b bytes.Buffer
		b.WriteString("\x93NUMPY\x01\x00")
		_ = binary.Write(&b, binary.LittleEndian, uint16(len(hdr)))
		b.WriteString(hdr)
		b.Write(data)
		return b.Bytes()
	}
	// Element (i, j, k) of the C-order array holds 100i + 10j + k; the file
	// stores it column-major (i fastest), big-endian.
	var col bytes.Buffer
	for k := 0; k < 4; k++ {
		for j := 0; j < 3; j++ {
			for i := 0; i < 2; i++ {
				_ = binary.Write(&col, binary.BigEndian, int32(100*i+10*j+k))
			}
		}
	}
	got, err := Decode(image(">i4", "(2, 3, 4)", col.Bytes()))
	require.NoError(t, err)
	assert.Equal(t, abi.Shape{2, 3, 4}, got.Shape)
	var want []int32
	for i := 0; i < 2; i++ {
		for j := 0; j < 3; j++ {
			for k := 0; k < 4; k++ {
				want = append(want, int32(100*i+10*j+k))
			}
		}
	}
	assert.Equal(t, want, abi.MustView[int32](got))

	// [[F, T, T], [T, F, T]] stored column-major, with non-zero bytes other
	// than 1.
	got, err = Decode(image("|b1", "(2, 3)", []byte{0, 2, 2, 0, 255, 1}))
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 1, 1, 1, 0, 1}, got.Data)

	// Rank 1 and empty arrays are the same in either order.
	got, err = Decode(image("<f4", "(3,)", []byte{0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64}))
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2, 3}, abi.MustView[float32](got))
	got, err = Decode(image("<f4", "(0, 3)", nil))
	require.NoError(t, err)
	assert.Equal(t, abi.Shape{0, 3}, got.Shape)
}

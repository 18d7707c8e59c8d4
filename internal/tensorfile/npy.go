// Package tensorfile reads and writes tensors as NumPy .npy files
// (format versions 1.0, 2.0 and 3.0, every dtype the ABI shares with
// NumPy, either byte order, C or Fortran order).
//
// The reader is written here rather than taken from github.com/sbinet/npyio,
// which this package used before: npyio read a bool byte other than 0 or 1
// as false (NumPy reads any non-zero byte as True: a silent wrong value),
// rejected version 3.0 files and float16, parsed the header by the position
// of its keys, and panicked on some malformed headers. The header is a
// Python dict literal, parsed here by a small literal parser
// (header.go); the data bytes are copied as they are, byte-swapped for
// big-endian files, Fortran-order (column-major) data is reordered into
// C order, and bools are normalised to 0 and 1, as NumPy reads them
// (np.load, then np.ascontiguousarray: the rule the Python package
// applies to arrays too, so both give a callback the same tensor). Every size is checked against the file before anything is
// allocated by it.
package tensorfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// MaxFileBytes bounds a .npy file the CLI will read.
const MaxFileBytes = 4 << 30

// magic opens every .npy file.
var magic = []byte("\x93NUMPY")

// npyTypes maps NumPy's type strings (without the byte-order character) to
// ABI dtypes, and the ABI dtypes to the little-endian strings Encode writes.
var npyTypes = []struct {
	descr string // as Encode writes it
	dtype abi.DType
}{
	{"|b1", abi.PRED},
	{"|i1", abi.S8},
	{"<i2", abi.S16},
	{"<i4", abi.S32},
	{"<i8", abi.S64},
	{"|u1", abi.U8},
	{"<u2", abi.U16},
	{"<u4", abi.U32},
	{"<u8", abi.U64},
	{"<f2", abi.F16},
	{"<f4", abi.F32},
	{"<f8", abi.F64},
	{"<c8", abi.C64},
	{"<c16", abi.C128},
}

// supported lists the NumPy dtypes the reader accepts, for error messages.
const supported = "bool, int8..int64, uint8..uint64, float16, float32, float64, complex64, complex128"

// bf16Advice says what to do with bfloat16 data, which NumPy has no dtype for.
const bf16Advice = "NumPy has no bfloat16 dtype (ml_dtypes saves it as raw void bytes); " +
	"give the callback f32 or f16 data instead (x.astype(np.float32)), or call it from the Go API, " +
	"where a bf16 tensor's bits are abi.View[uint16] (the top 16 bits of the float32, little-endian)"

// ReadFile reads a .npy file as a tensor.
func ReadFile(path string) (abi.Tensor, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return abi.Tensor{}, err
	}
	t, err := decode(data, true)
	if err != nil {
		return abi.Tensor{}, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Decode reads a .npy image (the whole file's bytes) as a tensor. Errors
// name the byte offset or header key at fault. The tensor's data is a copy:
// data is not modified or retained.
func Decode(data []byte) (abi.Tensor, error) { return decode(data, false) }

// decode is Decode; with owned, the tensor's data aliases data (which it
// may rewrite in place: byte order, bools) instead of copying it.
func decode(data []byte, owned bool) (abi.Tensor, error) {
	if len(data) > MaxFileBytes {
		return abi.Tensor{}, fmt.Errorf("file of %d bytes exceeds %d", len(data), MaxFileBytes)
	}
	// The preamble: 6-byte magic, major, minor, then a u16 (v1) or u32
	// (v2, v3) header length.
	if !bytes.HasPrefix(data, magic) {
		return abi.Tensor{}, errors.New(notNpy(data))
	}
	if len(data) < 10 {
		return abi.Tensor{}, fmt.Errorf("truncated .npy preamble (%d bytes)", len(data))
	}
	var hdrStart, hdrEnd uint64
	if data[7] != 0 {
		return abi.Tensor{}, fmt.Errorf(".npy format version %d.%d is not one callbox reads (1.0, 2.0, 3.0); save it again with numpy.save", data[6], data[7])
	}
	switch data[6] {
	case 1:
		hdrStart = 10
		hdrEnd = hdrStart + uint64(binary.LittleEndian.Uint16(data[8:]))
	case 2, 3:
		if len(data) < 12 {
			return abi.Tensor{}, fmt.Errorf("truncated .npy %d.%d preamble (%d bytes)", data[6], data[7], len(data))
		}
		hdrStart = 12
		hdrEnd = hdrStart + uint64(binary.LittleEndian.Uint32(data[8:]))
	default:
		return abi.Tensor{}, fmt.Errorf(".npy format version %d.%d is not one callbox reads (1.0, 2.0, 3.0); save it again with numpy.save", data[6], data[7])
	}
	if hdrEnd > uint64(len(data)) {
		return abi.Tensor{}, fmt.Errorf(".npy header of %d bytes at offset %d runs past the %d-byte file", hdrEnd-hdrStart, hdrStart, len(data))
	}
	hdr := data[hdrStart:hdrEnd]
	if data[6] < 3 {
		// Versions 1 and 2 are latin-1; only 3.0 allows UTF-8. A dict
		// the reader accepts is ASCII either way.
		for i, c := range hdr {
			if c >= 0x80 {
				return abi.Tensor{}, fmt.Errorf("malformed .npy header: byte 0x%02x at offset %d is not ASCII", c, hdrStart+uint64(i))
			}
		}
	}
	h, err := parseHeader(string(hdr), data[6] < 3)
	if err != nil {
		return abi.Tensor{}, fmt.Errorf("malformed .npy header (offset %d): %w", hdrStart, err)
	}
	dtype, swap, err := parseDescr(h.descr)
	if err != nil {
		return abi.Tensor{}, err
	}
	t := abi.Tensor{DType: dtype, Shape: abi.Shape(h.shape)}
	want, err := t.Shape.ByteLen(t.DType)
	if err != nil {
		return abi.Tensor{}, fmt.Errorf("'shape': %w", err)
	}
	if have := uint64(len(data)) - hdrEnd; want != have {
		// NumPy ignores bytes past the data; callbox refuses them, as a
		// sign of a damaged file or a header that misdescribes its data.
		return abi.Tensor{}, fmt.Errorf("shape %v of %s needs %d data bytes after the header (offset %d), the file has %d", t.Shape, t.DType, want, hdrEnd, have)
	}
	if body := data[hdrEnd:]; owned && len(body) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(body)))%8 == 0 {
		t.Data = body // the file's own buffer, aligned for every dtype
	} else {
		// A header whose length is not a multiple of 8 (NumPy pads to 64;
		// other writers may not) leaves the data unaligned for typed
		// views: copy it into an aligned buffer.
		aligned, err := abi.New(t.DType, t.Shape...)
		if err != nil {
			return abi.Tensor{}, err
		}
		copy(aligned.Data, body)
		t.Data = aligned.Data
	}
	if t.Data == nil {
		t.Data = []byte{}
	}
	if swap {
		swapBytes(t.Data, t.DType)
	}
	if h.fortran && len(t.Shape) > 1 {
		// Column-major data: the same elements as a C-order array of the
		// reversed shape, transposed. A rank-0 or rank-1 array is the same
		// in either order.
		t.Data = fortranToC(t.Data, t.Shape, int(t.DType.Size()))
	}
	if t.DType == abi.PRED {
		// NumPy reads any non-zero byte as True.
		for i, b := range t.Data {
			if b != 0 {
				t.Data[i] = 1
			}
		}
	}
	// Every rule a host tensor must follow, also those the checks above do
	// not cover (an empty array whose strides pass 4 GiB: found by
	// FuzzDecode).
	if err := t.Validate(); err != nil {
		return abi.Tensor{}, err
	}
	return t, nil
}

// notNpy says what a file that is not a .npy file looks like, and what to do.
func notNpy(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("PK\x03\x04")), bytes.HasPrefix(data, []byte("PK\x05\x06")):
		return "this is a zip archive (an .npz file from numpy.savez?), not a .npy file: " +
			"extract the array you want (np.save('x.npy', np.load('f.npz')['name'])) or unzip it; each member is a .npy file"
	case bytes.HasPrefix(data, []byte("\x89HDF")):
		return "this is an HDF5 file, not a .npy file: save the array with numpy.save"
	case bytes.HasPrefix(data, []byte("\x80")):
		return "this looks like a Python pickle, not a .npy file: save the array with numpy.save (allow_pickle is not supported)"
	case len(data) < len(magic) && bytes.HasPrefix(magic, data):
		return fmt.Sprintf("truncated .npy file (%d bytes)", len(data))
	}
	return "not a .npy file (bad magic: it does not start with \"\\x93NUMPY\"); write it with numpy.save or callbox npy make"
}

// parseDescr maps a NumPy type string such as "<f4" to an ABI dtype and
// whether its elements must be byte-swapped to little-endian.
func parseDescr(descr string) (abi.DType, bool, error) {
	if len(descr) < 2 {
		return 0, false, fmt.Errorf("'descr': malformed dtype %q", descr)
	}
	order, typ := descr[0], descr[1:]
	for _, nt := range npyTypes {
		if nt.descr[1:] != typ {
			continue
		}
		single := nt.dtype.Size() == 1
		switch {
		case order == '<' || (order == '|' && single):
			return nt.dtype, false, nil
		case order == '>':
			return nt.dtype, !single, nil
		case order == '=':
			// Native order, as NumPy reads it: the reading machine's.
			return nt.dtype, !single && nativeBigEndian, nil
		case order == '|':
			return 0, false, fmt.Errorf("'descr': dtype %q has no byte order", descr)
		}
		return 0, false, fmt.Errorf("'descr': dtype %q has an unknown byte order %q (want '<', '>' or '=')", descr, order)
	}
	why := ""
	switch {
	case strings.HasPrefix(descr, "["), strings.HasPrefix(descr, "("):
		why = " (a structured array; save each field as its own .npy file)"
	case strings.HasPrefix(typ, "V2"):
		why = " (raw 2-byte values: bfloat16? " + bf16Advice + ")"
	case strings.HasPrefix(typ, "O"):
		why = " (Python objects)"
	case strings.HasPrefix(typ, "U"), strings.HasPrefix(typ, "S"):
		why = " (strings)"
	case strings.HasPrefix(typ, "M8"), strings.HasPrefix(typ, "m8"):
		why = " (dates or time deltas; convert with .astype(np.int64))"
	case typ == "f16" || typ == "c32" || typ == "f12" || typ == "c24":
		why = " (extended precision; convert with .astype(np.float64))"
	}
	return 0, false, fmt.Errorf("unsupported dtype %q%s; callbox reads %s", descr, why, supported)
}

// fortranToC returns the column-major elements of data (shape dims,
// size bytes each) in row-major order, in a new buffer of the same length.
func fortranToC(data []byte, dims abi.Shape, size int) []byte {
	out := make([]byte, len(data))
	if len(data) == 0 {
		return out
	}
	n := len(dims)
	// stride[k]: the column-major step of dimension k, in bytes.
	stride := make([]int, n)
	s := size
	for k := 0; k < n; k++ {
		stride[k] = s
		s *= int(dims[k])
	}
	idx := make([]int64, n)
	src := 0
	for dst := 0; dst < len(out); dst += size {
		copy(out[dst:dst+size], data[src:src+size])
		// Advance the row-major index, last dimension fastest.
		for k := n - 1; k >= 0; k-- {
			idx[k]++
			src += stride[k]
			if idx[k] < dims[k] {
				break
			}
			src -= stride[k] * int(dims[k])
			idx[k] = 0
		}
	}
	return out
}

// nativeBigEndian is whether this machine stores numbers big-end first.
var nativeBigEndian = binary.NativeEndian.Uint16([]byte{0, 1}) == 1

// swapBytes turns big-endian elements of d into little-endian in place; a
// complex element is two floats, each swapped on its own.
func swapBytes(b []byte, d abi.DType) {
	n := int(d.Size())
	if d == abi.C64 || d == abi.C128 {
		n /= 2
	}
	for i := 0; i+n <= len(b); i += n {
		e := b[i : i+n]
		for j, k := 0, n-1; j < k; j, k = j+1, k-1 {
			e[j], e[k] = e[k], e[j]
		}
	}
}

// Supports returns nil when a .npy file can hold elements of d, and
// otherwise an error saying what to do instead (bf16 has no NumPy dtype).
func Supports(d abi.DType) error {
	for _, nt := range npyTypes {
		if nt.dtype == d {
			return nil
		}
	}
	if d == abi.BF16 {
		return fmt.Errorf("dtype bf16 cannot be stored in a .npy file: %s", bf16Advice)
	}
	return fmt.Errorf("dtype %s has no NumPy equivalent", d)
}

// WriteFile writes a tensor as a .npy file.
func WriteFile(path string, t abi.Tensor) error {
	var b bytes.Buffer
	if err := Encode(&b, t); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// Encode writes a tensor in .npy format (version 1.0, C order). It writes
// the format itself rather than through npyio, which converts elements
// through float64 and so turned signalling-NaN payloads of float32 data
// into quiet ones (found by FuzzDecode), and which cannot write an array
// with an empty leading dimension and further dimensions.
func Encode(w io.Writer, t abi.Tensor) error {
	if err := t.Validate(); err != nil {
		return err
	}
	if err := Supports(t.DType); err != nil {
		return err
	}
	descr := ""
	for _, nt := range npyTypes {
		if nt.dtype == t.DType {
			descr = nt.descr
		}
	}
	var shape strings.Builder
	shape.WriteByte('(')
	for i, d := range t.Shape {
		if i > 0 {
			shape.WriteString(", ")
		}
		shape.WriteString(strconv.FormatInt(d, 10))
	}
	if len(t.Shape) == 1 {
		shape.WriteByte(',')
	}
	shape.WriteByte(')')
	header := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape.String())
	// Pad with spaces and end with a newline so that the data starts on a
	// 64-byte boundary, as NumPy writes it.
	const preamble = 10 // magic (6), version (2), header length (2)
	total := (preamble + len(header) + 1 + 63) &^ 63
	header += strings.Repeat(" ", total-preamble-len(header)-1) + "\n"
	var b bytes.Buffer
	b.Write(magic)
	b.Write([]byte{1, 0})
	_ = binary.Write(&b, binary.LittleEndian, uint16(len(header)))
	b.WriteString(header)
	if _, err := w.Write(b.Bytes()); err != nil {
		return err
	}
	_, err := w.Write(t.Data) // ABI tensors are little-endian, as the descr says
	return err
}

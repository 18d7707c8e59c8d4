// Package tensorfile reads and writes tensors as NumPy .npy files with
// github.com/sbinet/npyio, guarding it against hostile files: the header
// length and the data size are checked against the file's real size before
// npyio allocates anything, and a panic inside the library becomes an
// error naming the file.
package tensorfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"unsafe"

	"github.com/sbinet/npyio/npy"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// MaxFileBytes bounds a .npy file the CLI will read.
const MaxFileBytes = 4 << 30

// npyTypes maps numpy's little-endian type strings to ABI dtypes and the Go
// element types npyio reads them into.
var npyTypes = []struct {
	descr string
	dtype abi.DType
	elem  reflect.Type
}{
	{"|b1", abi.PRED, reflect.TypeOf(false)},
	{"|i1", abi.S8, reflect.TypeOf(int8(0))},
	{"<i2", abi.S16, reflect.TypeOf(int16(0))},
	{"<i4", abi.S32, reflect.TypeOf(int32(0))},
	{"<i8", abi.S64, reflect.TypeOf(int64(0))},
	{"|u1", abi.U8, reflect.TypeOf(uint8(0))},
	{"<u2", abi.U16, reflect.TypeOf(uint16(0))},
	{"<u4", abi.U32, reflect.TypeOf(uint32(0))},
	{"<u8", abi.U64, reflect.TypeOf(uint64(0))},
	{"<f4", abi.F32, reflect.TypeOf(float32(0))},
	{"<f8", abi.F64, reflect.TypeOf(float64(0))},
	{"<c8", abi.C64, reflect.TypeOf(complex64(0))},
	{"<c16", abi.C128, reflect.TypeOf(complex128(0))},
}

// ReadFile reads a .npy file as a tensor.
func ReadFile(path string) (abi.Tensor, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return abi.Tensor{}, err
	}
	t, err := Decode(data)
	if err != nil {
		return abi.Tensor{}, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Decode reads a .npy image (the whole file's bytes) as a tensor.
func Decode(data []byte) (t abi.Tensor, err error) {
	if len(data) > MaxFileBytes {
		return t, fmt.Errorf("file of %d bytes exceeds %d", len(data), MaxFileBytes)
	}
	// The preamble: 6-byte magic, major, minor, then a u16 (v1) or u32
	// (v2, v3) header length. npyio allocates the header before reading
	// it, so bound the length by what the file holds first.
	if len(data) < 10 || !bytes.Equal(data[:6], npy.Magic[:]) {
		return t, errors.New("not a .npy file (bad magic)")
	}
	var hdrEnd uint64
	switch data[6] {
	case 1:
		hdrEnd = 10 + uint64(binary.LittleEndian.Uint16(data[8:]))
	case 2, 3:
		if len(data) < 12 {
			return t, errors.New("truncated .npy preamble")
		}
		hdrEnd = 12 + uint64(binary.LittleEndian.Uint32(data[8:]))
	default:
		return t, fmt.Errorf("unsupported .npy version %d.%d", data[6], data[7])
	}
	if hdrEnd > uint64(len(data)) || bytes.LastIndexByte(data[:hdrEnd], '\n') < 0 {
		return t, fmt.Errorf(".npy header of %d bytes runs past the %d-byte file or lacks its newline", hdrEnd, len(data))
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("malformed .npy file (npyio: %v)", p)
		}
	}()
	r, err := npy.NewReader(bytes.NewReader(data))
	if err != nil {
		return t, fmt.Errorf("malformed .npy header: %w", err)
	}
	h := r.Header.Descr
	if h.Fortran {
		return t, errors.New("Fortran-order (column-major) arrays are not supported; save a C-order array (np.ascontiguousarray)")
	}
	var elem reflect.Type
	for _, nt := range npyTypes {
		if nt.descr == h.Type {
			t.DType, elem = nt.dtype, nt.elem
		}
	}
	if elem == nil {
		return t, fmt.Errorf("unsupported dtype %q (want one of bool, int8..int64, uint8..uint64, float32, float64, complex64, complex128, little-endian)", h.Type)
	}
	t.Shape = make(abi.Shape, len(h.Shape))
	for i, d := range h.Shape {
		t.Shape[i] = int64(d)
	}
	want, err := t.Shape.ByteLen(t.DType)
	if err != nil {
		return t, err
	}
	if have := uint64(len(data)) - hdrEnd; want != have {
		return t, fmt.Errorf("shape %v of %s needs %d data bytes, the file has %d", t.Shape, t.DType, want, have)
	}
	if want > math.MaxInt32*4 {
		return t, fmt.Errorf("array of %d bytes is too large", want)
	}
	n := int(want / uint64(t.DType.Size()))
	slice := reflect.New(reflect.SliceOf(elem))
	if err := r.Read(slice.Interface()); err != nil {
		return t, fmt.Errorf("reading data: %w", err)
	}
	s := slice.Elem()
	if s.Len() != n {
		return t, fmt.Errorf("read %d elements, want %d", s.Len(), n)
	}
	if n == 0 {
		t.Data = []byte{}
	} else {
		t.Data = unsafe.Slice((*byte)(s.UnsafePointer()), want)
	}
	// Every rule a host tensor must follow, also those the checks above do
	// not cover (an empty array whose strides pass 4 GiB: found by
	// FuzzDecode).
	if err := t.Validate(); err != nil {
		return abi.Tensor{}, err
	}
	return t, nil
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
	descr := ""
	for _, nt := range npyTypes {
		if nt.dtype == t.DType {
			descr = nt.descr
		}
	}
	if descr == "" {
		return fmt.Errorf("dtype %s has no NumPy equivalent", t.DType)
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
	b.Write(npy.Magic[:])
	b.Write([]byte{1, 0})
	_ = binary.Write(&b, binary.LittleEndian, uint16(len(header)))
	b.WriteString(header)
	if _, err := w.Write(b.Bytes()); err != nil {
		return err
	}
	_, err := w.Write(t.Data) // ABI tensors are little-endian, as the descr says
	return err
}

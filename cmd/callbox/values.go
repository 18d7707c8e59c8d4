package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/cmplx"
	"strconv"
	"strings"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/internal/tensorfile"
)

// Summarising large arrays, as NumPy's printing does: past summaryThreshold
// elements, each dimension longer than 2*edgeItems shows its first and last
// edgeItems entries around "...".
const (
	summaryThreshold = 1000
	edgeItems        = 3
)

// putValue parses v as one element of d and encodes it little-endian into b.
func putValue(b []byte, d abi.DType, v string) error {
	le := binary.LittleEndian
	switch d {
	case abi.F16:
		f, err := strconv.ParseFloat(v, 64)
		le.PutUint16(b, tensorfile.Float64ToF16(f))
		return rangeOK(err)
	case abi.F32:
		f, err := strconv.ParseFloat(v, 32)
		le.PutUint32(b, math.Float32bits(float32(f)))
		return rangeOK(err)
	case abi.F64:
		f, err := strconv.ParseFloat(v, 64)
		le.PutUint64(b, math.Float64bits(f))
		return rangeOK(err)
	case abi.C64, abi.C128:
		bits := int(d.Size()) * 8
		c, err := strconv.ParseComplex(strings.ReplaceAll(v, "j", "i"), bits)
		if bits == 64 {
			le.PutUint32(b, math.Float32bits(float32(real(c))))
			le.PutUint32(b[4:], math.Float32bits(float32(imag(c))))
		} else {
			le.PutUint64(b, math.Float64bits(real(c)))
			le.PutUint64(b[8:], math.Float64bits(imag(c)))
		}
		return rangeOK(err)
	case abi.PRED:
		x, err := strconv.ParseBool(v)
		if x {
			b[0] = 1
		}
		return err
	case abi.S8, abi.S16, abi.S32, abi.S64:
		x, err := strconv.ParseInt(v, 0, int(d.Size())*8)
		putInt(b, uint64(x))
		return err
	case abi.U8, abi.U16, abi.U32, abi.U64:
		x, err := strconv.ParseUint(v, 0, int(d.Size())*8)
		putInt(b, x)
		return err
	}
	return fmt.Errorf("npy make cannot write %s: .npy has no such dtype", d)
}

// rangeOK accepts a float that overflowed to an infinity, as NumPy's
// conversions do; a value that does not parse is still an error.
func rangeOK(err error) error {
	if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
		return nil
	}
	return err
}

func putInt(b []byte, x uint64) {
	for i := range b {
		b[i] = byte(x >> (8 * i))
	}
}

// formatElem formats element i of t.
func formatElem(t abi.Tensor, i int) string {
	size := int(t.DType.Size())
	b := t.Data[i*size : (i+1)*size]
	le := binary.LittleEndian
	switch t.DType {
	case abi.PRED:
		return strconv.FormatBool(b[0] != 0)
	case abi.S8:
		return strconv.FormatInt(int64(int8(b[0])), 10)
	case abi.S16:
		return strconv.FormatInt(int64(int16(le.Uint16(b))), 10)
	case abi.S32:
		return strconv.FormatInt(int64(int32(le.Uint32(b))), 10)
	case abi.S64:
		return strconv.FormatInt(int64(le.Uint64(b)), 10)
	case abi.U8:
		return strconv.FormatUint(uint64(b[0]), 10)
	case abi.U16:
		return strconv.FormatUint(uint64(le.Uint16(b)), 10)
	case abi.U32:
		return strconv.FormatUint(uint64(le.Uint32(b)), 10)
	case abi.U64:
		return strconv.FormatUint(le.Uint64(b), 10)
	case abi.F16:
		return formatF16(le.Uint16(b))
	case abi.BF16:
		return formatFloat(float64(math.Float32frombits(uint32(le.Uint16(b))<<16)), 4, 32)
	case abi.F32:
		return formatFloat(float64(math.Float32frombits(le.Uint32(b))), -1, 32)
	case abi.F64:
		return formatFloat(math.Float64frombits(le.Uint64(b)), -1, 64)
	case abi.C64:
		return formatComplex(complex(float64(math.Float32frombits(le.Uint32(b))), float64(math.Float32frombits(le.Uint32(b[4:])))), 64)
	case abi.C128:
		return formatComplex(complex(math.Float64frombits(le.Uint64(b)), math.Float64frombits(le.Uint64(b[8:]))), 128)
	}
	return "?"
}

// formatF16 prints the shortest decimal that reads back as the same
// float16, as NumPy does.
func formatF16(h uint16) string {
	f := tensorfile.F16ToFloat64(h)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return formatFloat(f, -1, 64)
	}
	for prec := 1; prec < 17; prec++ {
		s := strconv.FormatFloat(f, 'g', prec, 64)
		g, _ := strconv.ParseFloat(s, 64)
		if tensorfile.Float64ToF16(g) == h {
			if a := math.Abs(g); a >= 1e-4 && a < 1e16 {
				return strconv.FormatFloat(g, 'f', -1, 64) // 65500, not 6.55e+04
			}
			return s
		}
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// formatComplex prints 1+2j, as Python writes complex numbers.
func formatComplex(c complex128, bits int) string {
	if cmplx.IsNaN(c) && !math.IsNaN(real(c)) && !math.IsNaN(imag(c)) {
		c = complex(math.NaN(), math.NaN())
	}
	re := formatFloat(real(c), -1, bits/2)
	im := formatFloat(imag(c), -1, bits/2)
	if !strings.HasPrefix(im, "-") {
		im = "+" + im
	}
	return re + im + "j"
}

// formatValues prints a tensor's values as nested brackets, one line per
// row for rank 2 and more, summarised past summaryThreshold elements.
func formatValues(t abi.Tensor) string {
	n, _ := t.Shape.NumElements()
	if len(t.Shape) == 0 {
		return formatElem(t, 0)
	}
	summarise := n > summaryThreshold
	var b strings.Builder
	var rec func(dim, offset, stride int)
	// stride of each dimension, in elements
	strides := make([]int, len(t.Shape))
	s := 1
	for i := len(t.Shape) - 1; i >= 0; i-- {
		strides[i] = s
		s *= int(t.Shape[i])
	}
	rec = func(dim, offset, indent int) {
		b.WriteByte('[')
		size := int(t.Shape[dim])
		for i := 0; i < size; i++ {
			if summarise && size > 2*edgeItems && i == edgeItems {
				if dim == len(t.Shape)-1 {
					b.WriteString("... ")
				} else {
					b.WriteString("...\n" + strings.Repeat(" ", indent+1))
				}
				i = size - edgeItems
			}
			if dim == len(t.Shape)-1 {
				b.WriteString(formatElem(t, offset+i))
				if i < size-1 {
					b.WriteByte(' ')
				}
				continue
			}
			rec(dim+1, offset+i*strides[dim], indent+1)
			if i < size-1 {
				// A blank line between blocks of rank 3 and more, as NumPy.
				b.WriteString(strings.Repeat("\n", len(t.Shape)-1-dim) + strings.Repeat(" ", indent+1))
			}
		}
		b.WriteByte(']')
	}
	rec(0, 0, 0)
	return b.String()
}

// indentRows puts a multi-line array on lines of its own after the type,
// and a one-line one after a space.
func indentRows(s string) string {
	if strings.Contains(s, "\n") {
		return "\n" + s
	}
	return " " + s
}

// formatFloat formats a float as the shortest decimal that reads back the
// same at its precision, with NumPy's names for the special values (which
// npy make reads back).
func formatFloat(f float64, prec, bits int) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'g', prec, bits)
}

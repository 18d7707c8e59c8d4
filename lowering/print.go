package lowering

import (
	"bytes"
	"encoding/binary"
	"math"
	"strconv"
	"strings"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// Print formats the program in the canonical text form: two-space
// indentation, one op per line, comments dropped. Parse(Print(p)) yields
// an equal program, and Print(Parse(t)) == t for canonical t.
func Print(p *Program) string {
	w := &printer{}
	w.buf.WriteString("func @" + p.Name + "(")
	for i, v := range p.Body.Params {
		if i > 0 {
			w.buf.WriteString(", ")
		}
		w.buf.WriteString("%" + v.Name + ": " + v.Type.String())
	}
	w.buf.WriteString(") -> ")
	if len(p.Body.Yield) == 1 {
		w.buf.WriteString(p.Body.Yield[0].Type.String())
	} else {
		w.buf.WriteString("(" + typeList(p.Body.Yield) + ")")
	}
	w.buf.WriteString(" {\n")
	w.ops(p.Body, 1, "return")
	w.buf.WriteString("}\n")
	return w.buf.String()
}

type printer struct{ buf strings.Builder }

func (w *printer) indent(n int) {
	for i := 0; i < n; i++ {
		w.buf.WriteString("  ")
	}
}

func names(vs []*Value) string {
	var b strings.Builder
	for i, v := range vs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("%" + v.Name)
	}
	return b.String()
}

func (w *printer) ops(r *Region, depth int, term string) {
	for _, op := range r.Ops {
		w.indent(depth)
		w.op(op, depth)
		w.buf.WriteByte('\n')
	}
	w.indent(depth)
	w.buf.WriteString(term)
	if len(r.Yield) > 0 {
		w.buf.WriteString(" " + names(r.Yield))
	}
	w.buf.WriteByte('\n')
}

func (w *printer) region(r *Region, depth int) {
	w.buf.WriteString("{\n")
	w.ops(r, depth+1, "yield")
	w.indent(depth)
	w.buf.WriteString("}")
}

func (w *printer) op(op *Op, depth int) {
	b := &w.buf
	if len(op.Results) > 0 {
		b.WriteString(names(op.Results) + " = ")
	}
	b.WriteString(op.Kind.String())
	switch op.Kind {
	case OpConstant:
		b.WriteString(" " + formatConstant(op.Value))
	case OpCompare:
		b.WriteString(" " + op.Dir + " " + names(op.Args))
	case OpBroadcast:
		b.WriteString(" " + names(op.Args) + " dims " + intList(op.Axes))
	case OpReduceSum, OpReduceMax:
		b.WriteString(" " + names(op.Args) + " axes " + intList(op.Axes))
	case OpCall, OpIOCall, OpTap:
		b.WriteString(" @" + op.Callee + "(" + names(op.Args) + ")")
		if op.Ordered {
			b.WriteString(" ordered")
			if op.Chain != DefaultChain {
				b.WriteString(" chain " + strconv.Quote(op.Chain))
			}
		}
	case OpCond:
		b.WriteString(" " + names(op.Args) + " ")
		w.region(op.Regions[0], depth)
		b.WriteString(" else ")
		w.region(op.Regions[1], depth)
	case OpWhile:
		b.WriteString("(" + names(op.Args) + ") cond(" + names(op.Regions[0].Params) + ") ")
		w.region(op.Regions[0], depth)
		b.WriteString(" do(" + names(op.Regions[1].Params) + ") ")
		w.region(op.Regions[1], depth)
	case OpCreateToken:
	default:
		b.WriteString(" " + names(op.Args))
	}
	if len(op.Results) > 0 {
		b.WriteString(" : " + typeList(op.Results))
	}
}

func intList(xs []int64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, x := range xs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatInt(x, 10))
	}
	b.WriteByte(']')
	return b.String()
}

// formatConstant prints a constant's data: one element when all are equal
// (a splat), else a flat row-major list.
func formatConstant(t abi.Tensor) string {
	sz := int(t.DType.Size())
	n := len(t.Data) / sz
	if n == 0 {
		return "[]"
	}
	splat := true
	for i := 1; i < n && splat; i++ {
		splat = bytes.Equal(t.Data[i*sz:(i+1)*sz], t.Data[:sz])
	}
	if splat {
		return formatElement(t, 0)
	}
	var b strings.Builder
	b.WriteByte('[')
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(formatElement(t, i))
	}
	b.WriteByte(']')
	return b.String()
}

// element reads element i of t as float64 (floats), int64 (signed) or
// uint64 (unsigned and pred) bits.
func rawElement(t abi.Tensor, i int) uint64 {
	sz := int(t.DType.Size())
	var buf [8]byte
	copy(buf[:], t.Data[i*sz:(i+1)*sz])
	return binary.LittleEndian.Uint64(buf[:])
}

func formatElement(t abi.Tensor, i int) string {
	raw := rawElement(t, i)
	switch t.DType {
	case abi.PRED:
		if raw != 0 {
			return "true"
		}
		return "false"
	case abi.F32:
		return formatFloat(float64(math.Float32frombits(uint32(raw))), 32)
	case abi.F64:
		return formatFloat(math.Float64frombits(raw), 64)
	case abi.S8:
		return strconv.FormatInt(int64(int8(raw)), 10)
	case abi.S16:
		return strconv.FormatInt(int64(int16(raw)), 10)
	case abi.S32:
		return strconv.FormatInt(int64(int32(raw)), 10)
	case abi.S64:
		return strconv.FormatInt(int64(raw), 10)
	}
	return strconv.FormatUint(raw, 10)
}

func formatFloat(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'g', -1, bits)
}

package lowering

// Constants: a constant op's literal (a scalar splat or a list), kept as
// text while the op is parsed and converted element by element once its
// declared type is known.

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// maxConstElements bounds a constant's element count (its data is
// allocated at parse time).
const maxConstElements = 1 << 20

// constant parses a literal: a scalar (splat) or "[" scalars "]". The
// numbers are kept as text until the declared type is known.
func (p *parser) constant(op *Op) *Error {
	var lits []token
	list := false
	if ok, err := p.accept(tPunct, "["); err != nil {
		return err
	} else if ok {
		list = true
		for !p.is(tPunct, "]") {
			if len(lits) > 0 {
				if err := p.punct(","); err != nil {
					return err
				}
			}
			t, err := p.scalar()
			if err != nil {
				return err
			}
			if len(lits) >= maxConstElements {
				return &Error{Pos: t.pos, Msg: fmt.Sprintf("constant has more than %d elements", maxConstElements)}
			}
			lits = append(lits, t)
		}
		if err := p.fill(); err != nil {
			return err
		}
	} else {
		t, err := p.scalar()
		if err != nil {
			return err
		}
		lits = []token{t}
	}
	op.pending = &pendingConst{lits: lits, list: list}
	return nil
}

func (p *parser) scalar() (token, *Error) {
	if p.is(tNumber, "") || p.is(tIdent, "true") || p.is(tIdent, "false") || p.is(tIdent, "inf") || p.is(tIdent, "nan") {
		t := p.tok
		return t, p.fill()
	}
	return token{}, p.errf("expected a number, got %s", p.tok)
}

// pendingConst is a constant's literal before its type is parsed.
type pendingConst struct {
	lits []token
	list bool
}

// fillConstant converts the literal to the declared type.
func (p *parser) fillConstant(op *Op) *Error {
	pc := op.pending
	op.pending = nil
	t := op.Out
	if t.Token || !elementTyped(t.DType) {
		return &Error{Pos: op.Pos, Op: "constant", Msg: fmt.Sprintf("constants of %s are not supported", t)}
	}
	n := t.NumElements()
	if pc.list && int64(len(pc.lits)) != n {
		return &Error{Pos: op.Pos, Op: "constant", Msg: fmt.Sprintf("%d values given for %s, which has %d elements", len(pc.lits), t, n)}
	}
	if n > maxConstElements {
		return &Error{Pos: op.Pos, Op: "constant", Msg: fmt.Sprintf("%s has more than %d elements", t, maxConstElements)}
	}
	val, err := abi.New(t.DType, t.Shape...)
	if err != nil {
		return &Error{Pos: op.Pos, Op: "constant", Msg: err.Error()}
	}
	for i := int64(0); i < n; i++ {
		lit := pc.lits[0]
		if pc.list {
			lit = pc.lits[i]
		}
		if err := setElement(val, int(i), lit.text); err != nil {
			return &Error{Pos: lit.pos, Op: "constant", Msg: err.Error()}
		}
		if !pc.list && i == 0 && n > 1 {
			// Splat: copy the first element's bytes.
			sz := int(t.DType.Size())
			for j := 1; j < int(n); j++ {
				copy(val.Data[j*sz:(j+1)*sz], val.Data[:sz])
			}
			break
		}
	}
	op.Value = val
	return nil
}

// setElement parses text as element i of t.
func setElement(t abi.Tensor, i int, text string) error {
	switch t.DType {
	case abi.PRED:
		switch text {
		case "true", "1":
			t.Data[i] = 1
		case "false", "0":
			t.Data[i] = 0
		default:
			return fmt.Errorf("%q is not a pred value (true or false)", text)
		}
		return nil
	case abi.F32, abi.F64:
		f, err := parseFloat(text)
		if err != nil {
			return err
		}
		if t.DType == abi.F32 {
			abi.MustView[float32](t)[i] = float32(f)
		} else {
			abi.MustView[float64](t)[i] = f
		}
		return nil
	}
	signed := t.DType == abi.S8 || t.DType == abi.S16 || t.DType == abi.S32 || t.DType == abi.S64
	bits := int(t.DType.Size()) * 8
	if signed {
		v, err := strconv.ParseInt(text, 10, bits)
		if err != nil {
			return fmt.Errorf("%q is not a %s value", text, t.DType)
		}
		putInt(t, i, uint64(v))
		return nil
	}
	v, err := strconv.ParseUint(text, 10, bits)
	if err != nil {
		return fmt.Errorf("%q is not a %s value", text, t.DType)
	}
	putInt(t, i, v)
	return nil
}

func putInt(t abi.Tensor, i int, v uint64) {
	sz := int(t.DType.Size())
	for b := 0; b < sz; b++ {
		t.Data[i*sz+b] = byte(v >> (8 * b))
	}
}

func parseFloat(text string) (float64, error) {
	switch text {
	case "inf", "+inf":
		return math.Inf(1), nil
	case "-inf":
		return math.Inf(-1), nil
	case "nan":
		return math.NaN(), nil
	}
	if strings.ContainsAny(text, "xX") {
		return 0, fmt.Errorf("%q: hexadecimal numbers are not supported", text)
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", text)
	}
	return f, nil
}

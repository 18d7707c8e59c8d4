package lowering

// The parser of the program text (tokens from lex.go): the program, its
// functions, regions and ops, their values and types. Constants' literals
// are parse_const.go's.

import (
	"fmt"
	"strconv"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// MaxProgramBytes bounds the program text Parse accepts.
const MaxProgramBytes = 64 << 20

// maxNesting bounds region nesting, so hostile text cannot exhaust the
// stack.
const maxNesting = 256

// Parse reads a program from its text. file names the text in errors,
// which have the form file:line:col: message. The program is not type
// checked against callbacks; Check (or Compile) does that.
func Parse(file string, src []byte) (*Program, error) {
	if len(src) > MaxProgramBytes {
		return nil, &Error{Pos: Pos{File: file}, Msg: fmt.Sprintf("program is %d bytes, above the limit of %d", len(src), MaxProgramBytes)}
	}
	p := &parser{lex: lexer{src: string(src), file: file, line: 1, col: 1}, scope: map[string]*Value{}}
	if err := p.fill(); err != nil {
		return nil, err
	}
	prog, err := p.program()
	if err != nil {
		return nil, err
	}
	prog.File = file
	return prog, nil
}

type parser struct {
	lex   lexer
	tok   token
	ahead []token
	scope map[string]*Value
	depth int
}

func (p *parser) fill() *Error {
	if len(p.ahead) > 0 {
		p.tok, p.ahead = p.ahead[0], p.ahead[1:]
		return nil
	}
	t, err := p.lex.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

// peek returns the token after the current one.
func (p *parser) peek() (token, *Error) {
	if len(p.ahead) == 0 {
		t, err := p.lex.next()
		if err != nil {
			return token{}, err
		}
		p.ahead = append(p.ahead, t)
	}
	return p.ahead[0], nil
}

func (p *parser) errf(format string, args ...any) *Error {
	return &Error{Pos: p.tok.pos, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) is(kind tokKind, text string) bool {
	return p.tok.kind == kind && (text == "" || p.tok.text == text)
}

func (p *parser) accept(kind tokKind, text string) (bool, *Error) {
	if !p.is(kind, text) {
		return false, nil
	}
	return true, p.fill()
}

func (p *parser) expect(kind tokKind, text, what string) (token, *Error) {
	if !p.is(kind, text) {
		return token{}, p.errf("expected %s, got %s", what, p.tok)
	}
	t := p.tok
	return t, p.fill()
}

func (p *parser) punct(s string) *Error {
	if p.is(tPunct, s) {
		return p.fill()
	}
	return p.errf("expected %q, got %s", s, p.tok)
}

func (p *parser) program() (*Program, *Error) {
	if _, err := p.expect(tIdent, "func", `"func"`); err != nil {
		return nil, err
	}
	pos := p.tok.pos
	name, err := p.expect(tSymbol, "", "the program name (@name)")
	if err != nil {
		return nil, err
	}
	prog := &Program{Name: name.text, Pos: pos, Body: &Region{}}
	if err := p.punct("("); err != nil {
		return nil, err
	}
	for !p.is(tPunct, ")") {
		if len(prog.Body.Params) > 0 {
			if err := p.punct(","); err != nil {
				return nil, err
			}
		}
		vt, err := p.expect(tValue, "", "a parameter (%name)")
		if err != nil {
			return nil, err
		}
		if err := p.punct(":"); err != nil {
			return nil, err
		}
		t, err := p.typ()
		if err != nil {
			return nil, err
		}
		v := &Value{Name: vt.text, Type: t, Index: len(prog.Body.Params)}
		if err := p.define(vt, v); err != nil {
			return nil, err
		}
		prog.Body.Params = append(prog.Body.Params, v)
	}
	if err := p.fill(); err != nil {
		return nil, err
	}
	if err := p.punct("->"); err != nil {
		return nil, err
	}
	var results []Type
	if ok, err := p.accept(tPunct, "("); err != nil {
		return nil, err
	} else if ok {
		for !p.is(tPunct, ")") {
			if len(results) > 0 {
				if err := p.punct(","); err != nil {
					return nil, err
				}
			}
			t, err := p.typ()
			if err != nil {
				return nil, err
			}
			results = append(results, t)
		}
		if err := p.fill(); err != nil {
			return nil, err
		}
	} else {
		t, err := p.typ()
		if err != nil {
			return nil, err
		}
		results = []Type{t}
	}
	retPos := p.tok.pos
	if err := p.block(prog.Body, "return"); err != nil {
		return nil, err
	}
	if len(prog.Body.Yield) != len(results) {
		return nil, &Error{Pos: prog.Body.Pos, Msg: fmt.Sprintf("returns %d values; @%s declares %d results", len(prog.Body.Yield), prog.Name, len(results))}
	}
	for i, v := range prog.Body.Yield {
		if !v.Type.Equal(results[i]) {
			return nil, &Error{Pos: prog.Body.Pos, Msg: fmt.Sprintf("result %d (%%%s): declared %s, returned %s", i, v.Name, results[i], v.Type)}
		}
	}
	_ = retPos
	if !p.is(tEOF, "") {
		return nil, p.errf("unexpected %s after the program", p.tok)
	}
	return prog, nil
}

func (p *parser) define(t token, v *Value) *Error {
	if _, dup := p.scope[t.text]; dup {
		return &Error{Pos: t.pos, Msg: fmt.Sprintf("%%%s is already defined", t.text)}
	}
	p.scope[t.text] = v
	return nil
}

// block parses "{" ops term [values] "}" into r, where term is "return"
// or "yield". Names defined inside go out of scope at the closing brace.
func (p *parser) block(r *Region, term string) *Error {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxNesting {
		return p.errf("regions nested deeper than %d", maxNesting)
	}
	if err := p.punct("{"); err != nil {
		return err
	}
	var local []string
	if p.depth > 1 { // the program body's names never go out of scope
		defer func() {
			for _, n := range local {
				delete(p.scope, n)
			}
		}()
	}
	for _, v := range r.Params {
		local = append(local, v.Name)
	}
	for !p.is(tIdent, term) {
		if p.is(tPunct, "}") || p.is(tEOF, "") {
			return p.errf("expected %q before %s", term, p.tok)
		}
		op, err := p.op()
		if err != nil {
			return err
		}
		for _, v := range op.Results {
			local = append(local, v.Name)
		}
		r.Ops = append(r.Ops, op)
	}
	r.Pos = p.tok.pos
	if err := p.fill(); err != nil {
		return err
	}
	if !p.is(tPunct, "}") {
		vs, err := p.values()
		if err != nil {
			return err
		}
		r.Yield = vs
	}
	return p.punct("}")
}

func (p *parser) value() (*Value, *Error) {
	t, err := p.expect(tValue, "", "a value (%name)")
	if err != nil {
		return nil, err
	}
	v, ok := p.scope[t.text]
	if !ok {
		return nil, &Error{Pos: t.pos, Msg: fmt.Sprintf("%%%s is not defined", t.text)}
	}
	return v, nil
}

// values parses value {"," value}.
func (p *parser) values() ([]*Value, *Error) {
	var out []*Value
	for {
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		if ok, err := p.accept(tPunct, ","); err != nil {
			return nil, err
		} else if !ok {
			return out, nil
		}
	}
}

// parenValues parses "(" [values] ")".
func (p *parser) parenValues() ([]*Value, *Error) {
	if err := p.punct("("); err != nil {
		return nil, err
	}
	if ok, err := p.accept(tPunct, ")"); err != nil || ok {
		return nil, err
	}
	vs, err := p.values()
	if err != nil {
		return nil, err
	}
	return vs, p.punct(")")
}

func (p *parser) typ() (Type, *Error) {
	t, err := p.expect(tIdent, "", "a type such as f32[8] or token")
	if err != nil {
		return Type{}, err
	}
	if t.text == "token" {
		return TokenType, nil
	}
	d := dtypeByName(t.text)
	if d == abi.Invalid {
		return Type{}, &Error{Pos: t.pos, Msg: fmt.Sprintf("unknown type %q (want a dtype such as f32, s32, pred, or token)", t.text)}
	}
	dims, err := p.intList("a dimension")
	if err != nil {
		return Type{}, err
	}
	if len(dims) > abi.MaxRank {
		return Type{}, &Error{Pos: t.pos, Msg: fmt.Sprintf("rank %d exceeds the maximum %d", len(dims), abi.MaxRank)}
	}
	ty := TensorType(d, dims...)
	if n, err := ty.Shape.ByteLen(d); err != nil || n > abi.MaxTensorBytes {
		return Type{}, &Error{Pos: t.pos, Msg: fmt.Sprintf("%s is too large for the ABI (at most %d bytes)", ty, uint64(abi.MaxTensorBytes))}
	}
	return ty, nil
}

// intList parses "[" [int {"," int}] "]" of non-negative integers.
func (p *parser) intList(what string) ([]int64, *Error) {
	if err := p.punct("["); err != nil {
		return nil, err
	}
	out := []int64{}
	for !p.is(tPunct, "]") {
		if len(out) > 0 {
			if err := p.punct(","); err != nil {
				return nil, err
			}
		}
		t, err := p.expect(tNumber, "", what)
		if err != nil {
			return nil, err
		}
		n, perr := strconv.ParseInt(t.text, 10, 64)
		if perr != nil || n < 0 {
			return nil, &Error{Pos: t.pos, Msg: fmt.Sprintf("%s must be a non-negative integer, got %s", what, t.text)}
		}
		if len(out) >= abi.MaxRank*4 {
			return nil, &Error{Pos: t.pos, Msg: "list too long"}
		}
		out = append(out, n)
	}
	return out, p.fill()
}

// op parses one op line: [results "="] body [":" types].
func (p *parser) op() (*Op, *Error) {
	var names []token
	if p.is(tValue, "") {
		for {
			t, err := p.expect(tValue, "", "a result name (%name)")
			if err != nil {
				return nil, err
			}
			names = append(names, t)
			if ok, err := p.accept(tPunct, ","); err != nil {
				return nil, err
			} else if !ok {
				break
			}
		}
		if err := p.punct("="); err != nil {
			return nil, err
		}
	}
	kt, err := p.expect(tIdent, "", "an op name")
	if err != nil {
		return nil, err
	}
	op := &Op{Kind: kindByName(kt.text), Pos: kt.pos}
	switch op.Kind {
	case OpInvalid:
		return nil, &Error{Pos: kt.pos, Msg: fmt.Sprintf("unknown op %q", kt.text)}
	case OpConstant:
		err = p.constant(op)
	case OpAdd, OpSub, OpMul, OpDiv, OpMax, OpMin, OpDot:
		op.Args, err = p.nValues(2)
	case OpNeg, OpExp, OpLog, OpConvert, OpReshape:
		op.Args, err = p.nValues(1)
	case OpCompare:
		var d token
		if d, err = p.expect(tIdent, "", "a direction (eq, ne, lt, le, gt, ge)"); err == nil {
			op.Dir = d.text
			if !validDir(d.text) {
				return nil, &Error{Pos: d.pos, Msg: fmt.Sprintf("unknown direction %q (want eq, ne, lt, le, gt or ge)", d.text)}
			}
			op.Args, err = p.nValues(2)
		}
	case OpSelect:
		op.Args, err = p.nValues(3)
	case OpBroadcast, OpReduceSum, OpReduceMax:
		word := "axes"
		if op.Kind == OpBroadcast {
			word = "dims"
		}
		if op.Args, err = p.nValues(1); err == nil {
			if _, err = p.expect(tIdent, word, strconv.Quote(word)); err == nil {
				op.Axes, err = p.intList("an axis")
			}
		}
	case OpCall, OpIOCall, OpTap:
		err = p.callback(op)
	case OpCond:
		err = p.cond(op)
	case OpWhile:
		err = p.while(op)
	case OpCreateToken:
	}
	if err != nil {
		return nil, err
	}
	var types []Type
	if len(names) > 0 {
		if err := p.punct(":"); err != nil {
			return nil, err
		}
		for i := range names {
			if i > 0 {
				if err := p.punct(","); err != nil {
					return nil, err
				}
			}
			t, err := p.typ()
			if err != nil {
				return nil, err
			}
			types = append(types, t)
		}
	}
	switch op.Kind {
	case OpConstant, OpConvert, OpReshape, OpBroadcast:
		if len(types) != 1 {
			return nil, &Error{Pos: kt.pos, Op: op.describe(), Msg: fmt.Sprintf("has one result, %d named", len(names))}
		}
		op.Out = types[0]
		if op.Kind == OpConstant {
			if err := p.fillConstant(op); err != nil {
				return nil, err
			}
		}
	}
	for i, n := range names {
		v := &Value{Name: n.text, Type: types[i], Def: op, Index: i}
		if err := p.define(n, v); err != nil {
			return nil, err
		}
		op.Results = append(op.Results, v)
	}
	return op, nil
}

func (p *parser) nValues(n int) ([]*Value, *Error) {
	vs, err := p.values()
	if err != nil {
		return nil, err
	}
	if len(vs) != n {
		return nil, p.errf("expected %d operands, got %d", n, len(vs))
	}
	return vs, nil
}

// callback parses "@name" "(" [values] ")" {"ordered" | "chain" STRING}.
func (p *parser) callback(op *Op) *Error {
	t, err := p.expect(tSymbol, "", "a callback name (@name)")
	if err != nil {
		return err
	}
	op.Callee = t.text
	if op.Args, err = p.parenValues(); err != nil {
		return err
	}
	for {
		switch {
		case p.is(tIdent, "ordered") && op.Kind != OpCall:
			op.Ordered = true
		case p.is(tIdent, "chain") && op.Kind != OpCall:
			if err := p.fill(); err != nil {
				return err
			}
			s, err := p.expect(tString, "", "a chain name (a string)")
			if err != nil {
				return err
			}
			if s.text == "" {
				return &Error{Pos: s.pos, Msg: "empty chain name"}
			}
			op.Chain = s.text
			continue
		default:
			if op.Ordered && op.Chain == "" {
				op.Chain = DefaultChain
			}
			return nil
		}
		if err := p.fill(); err != nil {
			return err
		}
	}
}

// cond parses VALUE block "else" block.
func (p *parser) cond(op *Op) *Error {
	v, err := p.value()
	if err != nil {
		return err
	}
	op.Args = []*Value{v}
	then, els := &Region{}, &Region{}
	if err := p.block(then, "yield"); err != nil {
		return err
	}
	if _, err := p.expect(tIdent, "else", `"else"`); err != nil {
		return err
	}
	if err := p.block(els, "yield"); err != nil {
		return err
	}
	op.Regions = []*Region{then, els}
	return nil
}

// while parses "(" [values] ")" "cond" params block "do" params block.
func (p *parser) while(op *Op) *Error {
	var err *Error
	if op.Args, err = p.parenValues(); err != nil {
		return err
	}
	for _, word := range []string{"cond", "do"} {
		if _, err := p.expect(tIdent, word, strconv.Quote(word)); err != nil {
			return err
		}
		r := &Region{}
		if err := p.punct("("); err != nil {
			return err
		}
		var names []token
		for !p.is(tPunct, ")") {
			if len(names) > 0 {
				if err := p.punct(","); err != nil {
					return err
				}
			}
			t, err := p.expect(tValue, "", "a region parameter (%name)")
			if err != nil {
				return err
			}
			names = append(names, t)
		}
		if err := p.fill(); err != nil {
			return err
		}
		if len(names) != len(op.Args) {
			return p.errf("%s region names %d parameters; the loop carries %d values", word, len(names), len(op.Args))
		}
		for i, n := range names {
			v := &Value{Name: n.text, Type: op.Args[i].Type, Index: i}
			if err := p.define(n, v); err != nil {
				return err
			}
			r.Params = append(r.Params, v)
		}
		if err := p.block(r, "yield"); err != nil {
			return err
		}
		op.Regions = append(op.Regions, r)
	}
	return nil
}

// dtypeByName maps the canonical dtype names (only those: the text format
// has no aliases) to dtypes.
func dtypeByName(s string) abi.DType {
	switch s {
	case "pred":
		return abi.PRED
	case "s8":
		return abi.S8
	case "s16":
		return abi.S16
	case "s32":
		return abi.S32
	case "s64":
		return abi.S64
	case "u8":
		return abi.U8
	case "u16":
		return abi.U16
	case "u32":
		return abi.U32
	case "u64":
		return abi.U64
	case "f16":
		return abi.F16
	case "bf16":
		return abi.BF16
	case "f32":
		return abi.F32
	case "f64":
		return abi.F64
	case "c64":
		return abi.C64
	case "c128":
		return abi.C128
	}
	return abi.Invalid
}

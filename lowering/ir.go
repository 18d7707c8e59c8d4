// Package lowering compiles tensor programs that call callbox callbacks:
// a typed IR (built in Go or read from a text format), type checking
// against callback signatures, passes (effect analysis, CSE, DCE, token
// threading), StableHLO emission that names callbacks by content id, and an
// evaluator that runs the same programs on a callbox host. LOWERING.md
// describes the IR, its grammar, the passes and the emitted form.
package lowering

import (
	"fmt"
	"strings"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// Type is a value's type: a tensor of static dtype and shape, or a token.
type Type struct {
	Token bool
	DType abi.DType
	Shape abi.Shape
}

// TensorType makes a tensor type.
func TensorType(d abi.DType, dims ...int64) Type {
	return Type{DType: d, Shape: append(abi.Shape{}, dims...)}
}

// TokenType is the type of ordering tokens.
var TokenType = Type{Token: true}

// String formats the type as in the text format: "f32[2,3]", "token".
func (t Type) String() string {
	if t.Token {
		return "token"
	}
	return t.DType.String() + t.Shape.String()
}

// Equal reports whether two types are the same.
func (t Type) Equal(o Type) bool {
	if t.Token || o.Token {
		return t.Token == o.Token
	}
	return t.DType == o.DType && t.Shape.Equal(o.Shape)
}

// Meta is the tensor type as the ABI describes it.
func (t Type) Meta() abi.TensorMeta { return abi.TensorMeta{DType: t.DType, Shape: t.Shape} }

// NumElements is the element count of a tensor type.
func (t Type) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Pos is a position in a program's text (line and column from 1). A zero
// Pos means the op was built in Go.
type Pos struct {
	File string
	Line int
	Col  int
}

func (p Pos) String() string {
	f := p.File
	if f == "" {
		f = "<program>"
	}
	if p.Line == 0 {
		return f
	}
	return fmt.Sprintf("%s:%d:%d", f, p.Line, p.Col)
}

// Value is an SSA value: a program or region parameter, or an op result.
type Value struct {
	Name string // without the '%'
	Type Type
	Def  *Op // defining op; nil for parameters
	// Index is the result index in Def, or the parameter index.
	Index int
	id    int // dense number, assigned by number()
	// visible is the checker whose open scope defines the value.
	visible *checker
}

// Kind is an op's kind.
type Kind uint8

// The op kinds.
const (
	OpInvalid Kind = iota
	OpConstant
	OpAdd
	OpSub
	OpMul
	OpDiv
	OpMax
	OpMin
	OpNeg
	OpExp
	OpLog
	OpCompare
	OpSelect
	OpConvert
	OpReshape
	OpBroadcast
	OpDot
	OpReduceSum
	OpReduceMax
	OpCall   // a pure callback
	OpIOCall // a callback with a side effect
	OpTap    // a pass-through side effect
	OpCond
	OpWhile
	OpCreateToken
	numKinds
)

var kindNames = [numKinds]string{
	OpConstant: "constant", OpAdd: "add", OpSub: "sub", OpMul: "mul", OpDiv: "div", OpMax: "max", OpMin: "min",
	OpNeg: "neg", OpExp: "exp", OpLog: "log", OpCompare: "compare", OpSelect: "select", OpConvert: "convert",
	OpReshape: "reshape", OpBroadcast: "broadcast", OpDot: "dot", OpReduceSum: "reduce_sum", OpReduceMax: "reduce_max",
	OpCall: "call", OpIOCall: "io_call", OpTap: "tap", OpCond: "cond", OpWhile: "while", OpCreateToken: "create_token",
}

func (k Kind) String() string {
	if k < numKinds && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("op(%d)", uint8(k))
}

func kindByName(s string) Kind {
	for k, n := range kindNames {
		if n == s && n != "" {
			return Kind(k)
		}
	}
	return OpInvalid
}

// isCallback reports whether ops of this kind call a callback.
func (k Kind) isCallback() bool { return k == OpCall || k == OpIOCall || k == OpTap }

// Comparison directions.
const (
	CmpEQ = "eq"
	CmpNE = "ne"
	CmpLT = "lt"
	CmpLE = "le"
	CmpGT = "gt"
	CmpGE = "ge"
)

// DefaultChain is the chain of an ordered effect that names none.
const DefaultChain = "main"

// Op is one operation. Which fields are used depends on Kind.
type Op struct {
	Kind    Kind
	Args    []*Value
	Results []*Value
	Pos     Pos

	Callee  string     // call, io_call, tap: the callback name
	Ordered bool       // io_call, tap: on a token chain
	Chain   string     // io_call, tap: the chain of an ordered effect
	Dir     string     // compare
	Axes    []int64    // reduce_*: reduced axes; broadcast: operand-to-result dims
	Value   abi.Tensor // constant
	// Out is the result type of constant, convert, reshape and broadcast,
	// which the op itself defines.
	Out Type
	// Regions: cond has two (then, else), while has two (cond, body).
	Regions []*Region

	pending *pendingConst // parser only: the literal before its type
	eff     Effects       // set by analyze
}

// Region is a block of ops with parameters and yielded values. Regions may
// use values defined outside them (captures).
type Region struct {
	Params []*Value
	Ops    []*Op
	Yield  []*Value
	Pos    Pos // position of the region's yield, for errors
}

// Program is a function: parameters, a body and its results (the body's
// yield).
type Program struct {
	Name string
	File string
	Body *Region
	Pos  Pos
}

// Params are the program's parameters.
func (p *Program) Params() []*Value { return p.Body.Params }

// Results are the values the program returns.
func (p *Program) Results() []*Value { return p.Body.Yield }

// Walk calls f for every op in program order, entering regions after the op
// that owns them has been visited.
func (p *Program) Walk(f func(*Op)) { walkRegion(p.Body, f) }

func walkRegion(r *Region, f func(*Op)) {
	for _, op := range r.Ops {
		f(op)
		for _, sub := range op.Regions {
			walkRegion(sub, f)
		}
	}
}

// NumOps counts the program's ops, regions included.
func (p *Program) NumOps() int {
	n := 0
	p.Walk(func(*Op) { n++ })
	return n
}

// describe names an op for errors: "call @scale", "add".
func (op *Op) describe() string {
	if op.Kind.isCallback() {
		return op.Kind.String() + " @" + op.Callee
	}
	return op.Kind.String()
}

// Error is a compile error: a position, the op it concerns and what is wrong.
type Error struct {
	Pos Pos
	Op  string // "call @scale"; "" for errors outside an op
	Msg string
}

func (e *Error) Error() string {
	if e.Op == "" {
		return e.Pos.String() + ": " + e.Msg
	}
	return e.Pos.String() + ": " + e.Op + ": " + e.Msg
}

func opError(op *Op, format string, args ...any) *Error {
	return &Error{Pos: op.Pos, Op: op.describe(), Msg: fmt.Sprintf(format, args...)}
}

// typeList formats types separated by ", ".
func typeList(vs []*Value) string {
	var b strings.Builder
	for i, v := range vs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(v.Type.String())
	}
	return b.String()
}

// number assigns dense ids to every value of the program, returning the
// count. Passes and the evaluator index slices by them.
func (p *Program) number() int {
	n := 0
	var visit func(r *Region)
	visit = func(r *Region) {
		for _, v := range r.Params {
			v.id = n
			n++
		}
		for _, op := range r.Ops {
			for _, res := range op.Results {
				res.id = n
				n++
			}
			for _, sub := range op.Regions {
				visit(sub)
			}
		}
	}
	visit(p.Body)
	return n
}

// Clone returns a deep copy of the program.
func (p *Program) Clone() *Program {
	m := map[*Value]*Value{}
	get := func(v *Value) *Value {
		if c, ok := m[v]; ok {
			return c
		}
		return v
	}
	var cloneRegion func(r *Region) *Region
	cloneRegion = func(r *Region) *Region {
		nr := &Region{Pos: r.Pos}
		for _, v := range r.Params {
			c := &Value{Name: v.Name, Type: v.Type, Index: v.Index}
			m[v] = c
			nr.Params = append(nr.Params, c)
		}
		for _, op := range r.Ops {
			c := *op
			c.Args = make([]*Value, len(op.Args))
			for i, a := range op.Args {
				c.Args[i] = get(a)
			}
			c.Axes = append([]int64(nil), op.Axes...)
			c.Regions = nil
			for _, sub := range op.Regions {
				c.Regions = append(c.Regions, cloneRegion(sub))
			}
			c.Results = make([]*Value, len(op.Results))
			for i, v := range op.Results {
				nv := &Value{Name: v.Name, Type: v.Type, Def: &c, Index: i}
				m[v] = nv
				c.Results[i] = nv
			}
			nr.Ops = append(nr.Ops, &c)
		}
		for _, v := range r.Yield {
			nr.Yield = append(nr.Yield, get(v))
		}
		return nr
	}
	return &Program{Name: p.Name, File: p.File, Pos: p.Pos, Body: cloneRegion(p.Body)}
}

package lowering

import (
	"fmt"
	"strconv"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// Builder builds a program in Go. Each method appends an op to the current
// region, derives its result types (callback results from the catalog's
// signatures) and returns its results. The first error is kept and
// returned by Build; after it, methods return placeholder values so that
// building code needs no error checks of its own.
//
//	b := lowering.NewBuilder("main", cat)
//	x := b.Param("x", lowering.TensorType(abi.F32, 8))
//	y := b.Call("scale", x, b.Constant(abi.Scalar[float32](2)))[0]
//	b.Tap("tap_print", y)
//	prog, err := b.Build(y)
type Builder struct {
	cat   Catalog
	prog  *Program
	cur   *Region
	err   error
	names map[string]bool
	next  int
}

// NewBuilder starts a program named name whose callbacks are resolved in
// cat.
func NewBuilder(name string, cat Catalog) *Builder {
	p := &Program{Name: name, Body: &Region{}}
	return &Builder{cat: cat, prog: p, cur: p.Body, names: map[string]bool{}}
}

func (b *Builder) fresh(prefix string) string {
	for {
		b.next++
		n := prefix + strconv.Itoa(b.next)
		if !b.names[n] {
			b.names[n] = true
			return n
		}
	}
}

// Param adds a program parameter.
func (b *Builder) Param(name string, t Type) *Value {
	if name == "" || b.names[name] {
		name = b.fresh("arg")
	}
	b.names[name] = true
	v := &Value{Name: name, Type: t, Index: len(b.prog.Body.Params)}
	b.prog.Body.Params = append(b.prog.Body.Params, v)
	return v
}

// add appends op, derives its result types and returns its results.
func (b *Builder) add(op *Op) []*Value {
	types, err := infer(op, b.cat)
	if err != nil && b.err == nil {
		b.err = err
	}
	if err != nil {
		types = nil
	}
	op.Results = make([]*Value, len(types))
	for i, t := range types {
		op.Results[i] = &Value{Name: b.fresh("v"), Type: t, Def: op, Index: i}
	}
	b.cur.Ops = append(b.cur.Ops, op)
	return op.Results
}

// one returns the single result of op, or a placeholder after an error.
func (b *Builder) one(op *Op) *Value {
	rs := b.add(op)
	if len(rs) != 1 {
		return &Value{Name: "invalid", Type: Type{}}
	}
	return rs[0]
}

// Constant adds a constant holding t's data (copied).
func (b *Builder) Constant(t abi.Tensor) *Value {
	if err := t.Validate(); err != nil && b.err == nil {
		b.err = fmt.Errorf("constant: %w", err)
	}
	c := abi.Tensor{DType: t.DType, Shape: append(abi.Shape{}, t.Shape...), Data: append([]byte{}, t.Data...)}
	return b.one(&Op{Kind: OpConstant, Value: c, Out: TensorType(t.DType, t.Shape...)})
}

// Binary adds an elementwise add, sub, mul, div, max or min.
func (b *Builder) Binary(k Kind, x, y *Value) *Value {
	return b.one(&Op{Kind: k, Args: []*Value{x, y}})
}

// Add adds x + y.
func (b *Builder) Add(x, y *Value) *Value { return b.Binary(OpAdd, x, y) }

// Sub adds x - y.
func (b *Builder) Sub(x, y *Value) *Value { return b.Binary(OpSub, x, y) }

// Mul adds x * y.
func (b *Builder) Mul(x, y *Value) *Value { return b.Binary(OpMul, x, y) }

// Div adds x / y.
func (b *Builder) Div(x, y *Value) *Value { return b.Binary(OpDiv, x, y) }

// Unary adds neg, exp or log.
func (b *Builder) Unary(k Kind, x *Value) *Value { return b.one(&Op{Kind: k, Args: []*Value{x}}) }

// Compare adds an elementwise comparison (dir is CmpLT etc.).
func (b *Builder) Compare(dir string, x, y *Value) *Value {
	return b.one(&Op{Kind: OpCompare, Dir: dir, Args: []*Value{x, y}})
}

// Select adds select(p, x, y).
func (b *Builder) Select(p, x, y *Value) *Value {
	return b.one(&Op{Kind: OpSelect, Args: []*Value{p, x, y}})
}

// Convert converts x's elements to d.
func (b *Builder) Convert(x *Value, d abi.DType) *Value {
	return b.one(&Op{Kind: OpConvert, Args: []*Value{x}, Out: TensorType(d, x.Type.Shape...)})
}

// Reshape gives x a new shape with the same element count.
func (b *Builder) Reshape(x *Value, dims ...int64) *Value {
	return b.one(&Op{Kind: OpReshape, Args: []*Value{x}, Out: TensorType(x.Type.DType, dims...)})
}

// Broadcast broadcasts x to shape; operand dimension i becomes result
// dimension dims[i] (StableHLO's broadcast_in_dim).
func (b *Builder) Broadcast(x *Value, shape []int64, dims ...int64) *Value {
	return b.one(&Op{Kind: OpBroadcast, Args: []*Value{x}, Axes: append([]int64{}, dims...), Out: TensorType(x.Type.DType, shape...)})
}

// Dot adds the matrix product of x [m,k] and y [k,n].
func (b *Builder) Dot(x, y *Value) *Value { return b.one(&Op{Kind: OpDot, Args: []*Value{x, y}}) }

// ReduceSum sums x over axes.
func (b *Builder) ReduceSum(x *Value, axes ...int64) *Value {
	return b.one(&Op{Kind: OpReduceSum, Args: []*Value{x}, Axes: append([]int64{}, axes...)})
}

// ReduceMax takes the maximum of x over axes.
func (b *Builder) ReduceMax(x *Value, axes ...int64) *Value {
	return b.one(&Op{Kind: OpReduceMax, Args: []*Value{x}, Axes: append([]int64{}, axes...)})
}

// Call adds a pure callback call.
func (b *Builder) Call(callback string, args ...*Value) []*Value {
	return b.add(&Op{Kind: OpCall, Callee: callback, Args: args})
}

// Effect says how a side effect is ordered.
type Effect struct {
	Ordered bool
	Chain   string // the token chain of an ordered effect; "" is DefaultChain
}

func (e Effect) chain() string {
	if e.Ordered && e.Chain == "" {
		return DefaultChain
	}
	return e.Chain
}

// IOCall adds a callback call with a side effect.
func (b *Builder) IOCall(callback string, e Effect, args ...*Value) []*Value {
	return b.add(&Op{Kind: OpIOCall, Callee: callback, Args: args, Ordered: e.Ordered, Chain: e.chain()})
}

// Tap adds a pass-through side effect: the callback sees args, its results
// are discarded, and the op returns args unchanged.
func (b *Builder) Tap(callback string, e Effect, args ...*Value) []*Value {
	return b.add(&Op{Kind: OpTap, Callee: callback, Args: args, Ordered: e.Ordered, Chain: e.chain()})
}

// region runs f with a fresh region as the current one.
func (b *Builder) region(params []Type, f func([]*Value) []*Value) *Region {
	r := &Region{}
	for i, t := range params {
		r.Params = append(r.Params, &Value{Name: b.fresh("c"), Type: t, Index: i})
	}
	saved := b.cur
	b.cur = r
	r.Yield = f(r.Params)
	b.cur = saved
	return r
}

// Cond adds a conditional: then runs when p (pred[]) is true, or when p
// (s32[]) is 0; otherwise els. Both must yield values of the same types.
func (b *Builder) Cond(p *Value, then, els func() []*Value) []*Value {
	t := b.region(nil, func([]*Value) []*Value { return then() })
	e := b.region(nil, func([]*Value) []*Value { return els() })
	return b.add(&Op{Kind: OpCond, Args: []*Value{p}, Regions: []*Region{t, e}})
}

// While adds a loop carrying init: cond gets the carried values and
// returns a pred[]; body gets them and returns their next values.
func (b *Builder) While(init []*Value, cond func([]*Value) *Value, body func([]*Value) []*Value) []*Value {
	types := make([]Type, len(init))
	for i, v := range init {
		types[i] = v.Type
	}
	c := b.region(types, func(vs []*Value) []*Value { return []*Value{cond(vs)} })
	bd := b.region(types, body)
	return b.add(&Op{Kind: OpWhile, Args: append([]*Value{}, init...), Regions: []*Region{c, bd}})
}

// Build finishes the program with the given results and checks it.
func (b *Builder) Build(results ...*Value) (*Program, error) {
	if b.err != nil {
		return nil, b.err
	}
	b.prog.Body.Yield = results
	if err := Check(b.prog, b.cat); err != nil {
		return nil, err
	}
	return b.prog, nil
}

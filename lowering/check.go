package lowering

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// arithmetic reports whether the IR's own kernels compute on this dtype.
// Callbacks take any ABI dtype; the built-in ops take real numbers (Go has
// no f16/bf16, and complex numbers have no order for max/min/compare).
func arithmetic(d abi.DType) bool {
	switch d {
	case abi.F32, abi.F64, abi.S8, abi.S16, abi.S32, abi.S64, abi.U8, abi.U16, abi.U32, abi.U64:
		return true
	}
	return false
}

func isFloat(d abi.DType) bool { return d == abi.F32 || d == abi.F64 }

// elementTyped reports dtypes that constants, convert and select handle.
func elementTyped(d abi.DType) bool { return arithmetic(d) || d == abi.PRED }

func validDir(s string) bool {
	switch s {
	case CmpEQ, CmpNE, CmpLT, CmpLE, CmpGT, CmpGE:
		return true
	}
	return false
}

// infer derives the result types of op from its operands and attributes.
// Regions must already be checked (their yields typed).
func infer(op *Op, cat Catalog) ([]Type, *Error) {
	args := op.Args
	want := func(n int) *Error {
		if len(args) != n {
			return opError(op, "takes %d operands, got %d", n, len(args))
		}
		for i, a := range args {
			if a.Type.Token {
				return opError(op, "operand %d (%%%s) is a token; %s takes tensors", i, a.Name, op.Kind)
			}
		}
		return nil
	}
	switch op.Kind {
	case OpConstant:
		if err := want(0); err != nil {
			return nil, err
		}
		if !elementTyped(op.Out.DType) {
			return nil, opError(op, "constants of %s are not supported", op.Out.DType)
		}
		if op.Value.DType != op.Out.DType || !op.Value.Shape.Equal(op.Out.Shape) {
			return nil, opError(op, "value is %s, declared %s", op.Value.Type(), op.Out)
		}
		return []Type{op.Out}, nil
	case OpAdd, OpSub, OpMul, OpDiv, OpMax, OpMin, OpCompare:
		if err := want(2); err != nil {
			return nil, err
		}
		a, b := args[0].Type, args[1].Type
		if !a.Equal(b) {
			return nil, opError(op, "operand 1 (%%%s): expected %s (the type of operand 0), got %s", args[1].Name, a, b)
		}
		if op.Kind == OpCompare {
			if !validDir(op.Dir) {
				return nil, opError(op, "unknown direction %q (want eq, ne, lt, le, gt or ge)", op.Dir)
			}
			if !elementTyped(a.DType) || a.DType == abi.PRED && op.Dir != CmpEQ && op.Dir != CmpNE {
				return nil, opError(op, "operand 0 (%%%s): cannot compare %s with %s", args[0].Name, a.DType, op.Dir)
			}
			return []Type{TensorType(abi.PRED, a.Shape...)}, nil
		}
		if !arithmetic(a.DType) {
			return nil, opError(op, "operand 0 (%%%s): expected a real number type, got %s", args[0].Name, a)
		}
		return []Type{a}, nil
	case OpNeg, OpExp, OpLog:
		if err := want(1); err != nil {
			return nil, err
		}
		a := args[0].Type
		if op.Kind != OpNeg && !isFloat(a.DType) {
			return nil, opError(op, "operand 0 (%%%s): expected f32 or f64, got %s", args[0].Name, a)
		}
		if !arithmetic(a.DType) {
			return nil, opError(op, "operand 0 (%%%s): expected a real number type, got %s", args[0].Name, a)
		}
		return []Type{a}, nil
	case OpSelect:
		if err := want(3); err != nil {
			return nil, err
		}
		p, a, b := args[0].Type, args[1].Type, args[2].Type
		if p.DType != abi.PRED || !p.Shape.Equal(a.Shape) {
			return nil, opError(op, "operand 0 (%%%s): expected pred%s, got %s", args[0].Name, a.Shape, p)
		}
		if !a.Equal(b) {
			return nil, opError(op, "operand 2 (%%%s): expected %s (the type of operand 1), got %s", args[2].Name, a, b)
		}
		if !elementTyped(a.DType) {
			return nil, opError(op, "cannot select %s", a)
		}
		return []Type{a}, nil
	case OpConvert:
		if err := want(1); err != nil {
			return nil, err
		}
		a := args[0].Type
		if !elementTyped(a.DType) || !elementTyped(op.Out.DType) {
			return nil, opError(op, "cannot convert %s to %s", a, op.Out.DType)
		}
		if !a.Shape.Equal(op.Out.Shape) {
			return nil, opError(op, "result shape %s differs from the operand's %s", op.Out.Shape, a.Shape)
		}
		return []Type{op.Out}, nil
	case OpReshape:
		if err := want(1); err != nil {
			return nil, err
		}
		a := args[0].Type
		if a.DType != op.Out.DType || a.NumElements() != op.Out.NumElements() {
			return nil, opError(op, "cannot reshape %s to %s", a, op.Out)
		}
		return []Type{op.Out}, nil
	case OpBroadcast:
		if err := want(1); err != nil {
			return nil, err
		}
		a := args[0].Type
		if a.DType != op.Out.DType {
			return nil, opError(op, "result dtype %s differs from the operand's %s", op.Out.DType, a.DType)
		}
		if len(op.Axes) != len(a.Shape) {
			return nil, opError(op, "dims has %d entries, the operand has rank %d", len(op.Axes), len(a.Shape))
		}
		for i, d := range op.Axes {
			if d < 0 || d >= int64(len(op.Out.Shape)) || i > 0 && d <= op.Axes[i-1] {
				return nil, opError(op, "dims %v must increase and lie in [0, %d)", op.Axes, len(op.Out.Shape))
			}
			if a.Shape[i] != 1 && a.Shape[i] != op.Out.Shape[d] {
				return nil, opError(op, "operand dimension %d is %d; result dimension %d is %d (want equal, or 1)", i, a.Shape[i], d, op.Out.Shape[d])
			}
		}
		return []Type{op.Out}, nil
	case OpDot:
		if err := want(2); err != nil {
			return nil, err
		}
		a, b := args[0].Type, args[1].Type
		if len(a.Shape) != 2 || !arithmetic(a.DType) {
			return nil, opError(op, "operand 0 (%%%s): expected a matrix of real numbers, got %s", args[0].Name, a)
		}
		if len(b.Shape) != 2 || b.DType != a.DType || b.Shape[0] != a.Shape[1] {
			return nil, opError(op, "operand 1 (%%%s): expected %s[%d,n], got %s", args[1].Name, a.DType, a.Shape[1], b)
		}
		return []Type{TensorType(a.DType, a.Shape[0], b.Shape[1])}, nil
	case OpReduceSum, OpReduceMax:
		if err := want(1); err != nil {
			return nil, err
		}
		a := args[0].Type
		if !arithmetic(a.DType) {
			return nil, opError(op, "operand 0 (%%%s): expected a real number type, got %s", args[0].Name, a)
		}
		var out abi.Shape
		for i, d := range a.Shape {
			if !slices.Contains(op.Axes, int64(i)) {
				out = append(out, d)
			}
		}
		for i, ax := range op.Axes {
			if ax < 0 || ax >= int64(len(a.Shape)) || i > 0 && ax <= op.Axes[i-1] {
				return nil, opError(op, "axes %v must increase and lie in [0, %d)", op.Axes, len(a.Shape))
			}
		}
		return []Type{TensorType(a.DType, out...)}, nil
	case OpCall, OpIOCall, OpTap:
		return inferCallback(op, cat)
	case OpCond:
		if len(args) != 1 {
			return nil, opError(op, "takes 1 operand (the predicate), got %d", len(args))
		}
		p := args[0].Type
		if p.Token || len(p.Shape) != 0 || p.DType != abi.PRED && p.DType != abi.S32 {
			return nil, opError(op, "operand 0 (%%%s): expected pred[] or s32[], got %s", args[0].Name, p)
		}
		if len(op.Regions) != 2 {
			return nil, opError(op, "needs two regions, has %d", len(op.Regions))
		}
		then, els := op.Regions[0], op.Regions[1]
		if len(then.Params) != 0 || len(els.Params) != 0 {
			return nil, opError(op, "cond regions take no parameters")
		}
		if len(then.Yield) != len(els.Yield) {
			return nil, opError(op, "the branches yield %d and %d values", len(then.Yield), len(els.Yield))
		}
		out := make([]Type, len(then.Yield))
		for i, v := range then.Yield {
			if !v.Type.Equal(els.Yield[i].Type) {
				return nil, &Error{Pos: els.Pos, Op: op.describe(), Msg: fmt.Sprintf("result %d: the first branch yields %s, the second %s", i, v.Type, els.Yield[i].Type)}
			}
			out[i] = v.Type
		}
		return out, nil
	case OpWhile:
		if len(op.Regions) != 2 {
			return nil, opError(op, "needs two regions, has %d", len(op.Regions))
		}
		cond, body := op.Regions[0], op.Regions[1]
		for _, r := range op.Regions {
			if len(r.Params) != len(args) {
				return nil, opError(op, "a region takes %d parameters; the loop carries %d values", len(r.Params), len(args))
			}
			for i, p := range r.Params {
				if !p.Type.Equal(args[i].Type) {
					return nil, opError(op, "carried value %d (%%%s): region parameter is %s, initial value is %s", i, p.Name, p.Type, args[i].Type)
				}
			}
		}
		if len(cond.Yield) != 1 || cond.Yield[0].Type.Token || cond.Yield[0].Type.DType != abi.PRED || len(cond.Yield[0].Type.Shape) != 0 {
			return nil, &Error{Pos: cond.Pos, Op: op.describe(), Msg: fmt.Sprintf("the condition must yield one pred[], yields (%s)", typeList(cond.Yield))}
		}
		if len(body.Yield) != len(args) {
			return nil, &Error{Pos: body.Pos, Op: op.describe(), Msg: fmt.Sprintf("the body yields %d values; the loop carries %d", len(body.Yield), len(args))}
		}
		out := make([]Type, len(args))
		for i, a := range args {
			if !body.Yield[i].Type.Equal(a.Type) {
				return nil, &Error{Pos: body.Pos, Op: op.describe(), Msg: fmt.Sprintf("carried value %d: the body yields %s, expected %s", i, body.Yield[i].Type, a.Type)}
			}
			out[i] = a.Type
		}
		return out, nil
	case OpCreateToken:
		if len(args) != 0 {
			return nil, opError(op, "takes no operands")
		}
		return []Type{TokenType}, nil
	}
	return nil, opError(op, "unknown op")
}

// inferCallback binds a callback op's tensor operands to the callee's
// signature. An ordered op may carry a token as its last operand, and then
// returns one as its last result.
func inferCallback(op *Op, cat Catalog) ([]Type, *Error) {
	if op.Ordered && op.Kind == OpCall {
		return nil, opError(op, "a pure call cannot be ordered; use io_call")
	}
	if !op.Ordered && op.Chain != "" {
		return nil, opError(op, "chain %q given to an unordered effect; add ordered", op.Chain)
	}
	args := op.Args
	token := false
	if n := len(args); n > 0 && args[n-1].Type.Token {
		if !op.Ordered {
			return nil, opError(op, "only ordered effects take a token")
		}
		token = true
		args = args[:n-1]
	}
	for i, a := range args {
		if a.Type.Token {
			return nil, opError(op, "operand %d (%%%s): a token may only be the last operand", i, a.Name)
		}
	}
	if cat == nil {
		return nil, opError(op, "no callback catalog to check against")
	}
	callee, ok := cat.Callee(op.Callee)
	if !ok {
		return nil, opError(op, "no callback %q (have: %s)", op.Callee, strings.Join(cat.Names(), ", "))
	}
	metas := make([]abi.TensorMeta, len(args))
	for i, a := range args {
		metas[i] = a.Type.Meta()
	}
	specs, err := callee.Signature.Bind(metas)
	if err != nil {
		var ae *abi.ArgumentError
		if errors.As(err, &ae) && ae.Index >= 0 {
			return nil, opError(op, "%s (signature %s, operand %%%s)", ae.Error(), callee.Signature, args[ae.Index].Name)
		}
		return nil, opError(op, "%v", err)
	}
	var out []Type
	if op.Kind == OpTap {
		for _, a := range args {
			out = append(out, a.Type)
		}
	} else {
		for _, s := range specs {
			out = append(out, TensorType(s.DType, s.Shape...))
		}
	}
	if token {
		out = append(out, TokenType)
	}
	return out, nil
}

// Check type-checks a program against the catalog: every op's operands,
// every callback op against its callee's signature, and every declared
// result type against the derived one. It also checks that every value is
// defined before use and visible where used. The first error is returned,
// naming the op, its position, the operand and the expected and actual
// types. Check marks values while it runs: do not check one program from
// two goroutines at once.
func Check(p *Program, cat Catalog) error {
	c := checker{cat: cat}
	if err := c.region(p.Body, nil); err != nil {
		return err
	}
	return nil
}

// checker tracks which values are visible with a mark on each value (set
// while its scope is open), which keeps the check linear without a map.
type checker struct {
	cat Catalog
}

// use checks that v is visible; what and i name it in the error
// ("operand", 2).
func (c *checker) use(op *Op, pos Pos, v *Value, what string, i int) *Error {
	if v == nil {
		return &Error{Pos: pos, Op: descOp(op), Msg: fmt.Sprintf("%s %d is missing", what, i)}
	}
	if v.visible != c {
		return &Error{Pos: pos, Op: descOp(op), Msg: fmt.Sprintf("%s %d (%%%s) is not defined here", what, i, v.Name)}
	}
	return nil
}

func descOp(op *Op) string {
	if op == nil {
		return ""
	}
	return op.describe()
}

// region checks r; owner is the op whose region it is (nil for the body).
func (c *checker) region(r *Region, owner *Op) error {
	var defined []*Value
	define := func(v *Value) { v.visible = c; defined = append(defined, v) }
	defer func() {
		for _, v := range defined {
			v.visible = nil
		}
	}()
	for _, v := range r.Params {
		define(v)
	}
	for _, op := range r.Ops {
		for i, a := range op.Args {
			if err := c.use(op, op.Pos, a, "operand", i); err != nil {
				return err
			}
		}
		for _, sub := range op.Regions {
			if err := c.region(sub, op); err != nil {
				return err
			}
		}
		if op.Kind == OpWhile && len(op.Regions) == 2 {
			if err := noOrderedIn(op.Regions[0], op); err != nil {
				return err
			}
		}
		types, err := infer(op, c.cat)
		if err != nil {
			return err
		}
		if op.Kind == OpTap {
			types = tapResults(op, types)
		}
		if len(types) != len(op.Results) {
			return opError(op, "has %d results, declared %d (%s)", len(types), len(op.Results), typeList(op.Results))
		}
		for i, t := range types {
			if !op.Results[i].Type.Equal(t) {
				return opError(op, "result %d (%%%s): declared %s, derived %s", i, op.Results[i].Name, op.Results[i].Type, t)
			}
		}
		for _, v := range op.Results {
			define(v)
		}
	}
	for i, v := range r.Yield {
		if err := c.use(owner, r.Pos, v, "yielded value", i); err != nil {
			return err
		}
	}
	return nil
}

// noOrderedIn rejects ordered effects in a while loop's condition region:
// a token produced there could not reach the body (StableHLO's condition
// returns only the predicate).
func noOrderedIn(r *Region, loop *Op) *Error {
	var bad *Op
	walkRegion(r, func(op *Op) {
		if bad == nil && op.Ordered {
			bad = op
		}
	})
	if bad != nil {
		return &Error{Pos: bad.Pos, Op: bad.describe(), Msg: fmt.Sprintf("ordered effect in the condition of the while loop at %s; move it into the body", loop.Pos)}
	}
	return nil
}

// tapResults trims a tap's derived result types to the form it declares:
// a tap either passes every operand through (and then names a result for
// each) or names none (only its token, when threaded).
func tapResults(op *Op, types []Type) []Type {
	tensors := 0
	for _, a := range op.Args {
		if !a.Type.Token {
			tensors++
		}
	}
	if len(op.Results) == len(types)-tensors {
		return types[tensors:]
	}
	return types
}

package lowering

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// FFITarget is the custom-call target every callback lowers to: the name
// under which callbox.jax.register (python/callbox/jax.py) registers
// libcallbox's XLA FFI handler (the C symbol callbox_xla_ffi, or
// callbox_xla_ffi_cuda on GPU), so an emitted program runs in any process
// that called it. The handler finds the callback by the content id in the
// call's backend_config.
const FFITarget = "callbox"

// Emit prints a lowered program (after Lower: tokens threaded) as a
// StableHLO module. Callbacks become stablehlo.custom_call @callbox
// with api_version = 4, backend_config = {callback = "<content id>"}
// (plus chain = "<name>" and has_side_effect = true for effects) and
// row-major operand_layouts and result_layouts (a token's empty); tokens
// are !stablehlo.token operands and results (a chain starts at
// "stablehlo.after_all"() with no operands); cond becomes "stablehlo.if"
// (pred) or "stablehlo.case" (s32 index); while becomes "stablehlo.while",
// whose regions get every captured value as an extra loop-carried value.
// The text is a function of the program and the callees' ids only, so the
// same program and modules give byte-identical output.
func Emit(p *Program, cat Catalog) (string, error) {
	if err := VerifyTokens(p); err != nil {
		return "", fmt.Errorf("emit: the program's tokens are not threaded (run Lower first): %w", err)
	}
	var out strings.Builder
	n := p.number()
	e := &emitter{cat: cat, refs: make([]string, n), types: make([]string, n), callees: map[string]Callee{}, attrs: map[callAttrKey]string{}}
	out.Grow(256 * n)
	// Resolve callees first, for the header.
	var err error
	p.Walk(func(op *Op) {
		if op.Kind.isCallback() && err == nil {
			c, ok := cat.Callee(op.Callee)
			if !ok {
				err = opError(op, "no callback %q", op.Callee)
				return
			}
			e.callees[op.Callee] = c
		}
	})
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(e.callees))
	for n := range e.callees {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(&out, "// callbox lowering of @%s: %d ops; callbacks by content id:\n", p.Name, p.NumOps())
	for _, n := range names {
		c := e.callees[n]
		fmt.Fprintf(&out, "//   %s = %s %s\n", n, c.ID, c.Signature)
	}
	fmt.Fprintf(&out, "module @%s attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n", mlirName(p.Name))
	var params []string
	for i, v := range p.Body.Params {
		ref := "%arg" + strconv.Itoa(i)
		e.refs[v.id] = ref
		params = append(params, ref+": "+mlirType(v.Type))
	}
	var results []string
	for _, v := range p.Body.Yield {
		results = append(results, mlirType(v.Type))
	}
	fmt.Fprintf(&out, "  func.func public @main(%s) -> (%s) {\n", strings.Join(params, ", "), strings.Join(results, ", "))
	e.out = &out
	if err := e.region(p.Body, 2); err != nil {
		return "", err
	}
	e.line(2, "\"func.return\"(%s) : (%s) -> ()", e.refList(p.Body.Yield), e.typesOf(p.Body.Yield))
	out.WriteString("  }\n}\n")
	return out.String(), nil
}

// mlirName makes a symbol name MLIR accepts unquoted.
func mlirName(s string) string {
	ok := s != ""
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == '$' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			ok = false
		}
	}
	if ok {
		return s
	}
	return strconv.Quote(s)
}

type emitter struct {
	cat     Catalog
	callees map[string]Callee
	refs    []string // by value id
	types   []string // MLIR type of each value, by id, computed once
	attrs   map[callAttrKey]string
	next    int
	out     *strings.Builder
}

func (e *emitter) fresh() string {
	s := "%" + strconv.Itoa(e.next)
	e.next++
	return s
}

func (e *emitter) line(depth int, format string, args ...any) {
	for i := 0; i < depth; i++ {
		e.out.WriteString("  ")
	}
	fmt.Fprintf(e.out, format, args...)
	e.out.WriteByte('\n')
}

func (e *emitter) ref(v *Value) string { return e.refs[v.id] }

func (e *emitter) refList(vs []*Value) string {
	switch len(vs) {
	case 0:
		return ""
	case 1:
		return e.refs[vs[0].id]
	}
	var b strings.Builder
	for i, v := range vs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(e.refs[v.id])
	}
	return b.String()
}

// ty is the MLIR type of v.
func (e *emitter) ty(v *Value) string {
	if s := e.types[v.id]; s != "" {
		return s
	}
	s := mlirType(v.Type)
	e.types[v.id] = s
	return s
}

// typesOf lists the MLIR types of vs.
func (e *emitter) typesOf(vs []*Value) string {
	switch len(vs) {
	case 0:
		return ""
	case 1:
		return e.ty(vs[0])
	}
	var b strings.Builder
	for i, v := range vs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(e.ty(v))
	}
	return b.String()
}

// resultTypes formats a result type list: a single type bare, else in
// parentheses.
func resultTypes(ts []string) string {
	if len(ts) == 1 {
		return ts[0]
	}
	return "(" + strings.Join(ts, ", ") + ")"
}

// define names op's results: "%5" for one, "%5:3" (referenced as %5#i)
// for several. It returns the left-hand side ("" for none).
func (e *emitter) define(vs []*Value) string {
	switch len(vs) {
	case 0:
		return ""
	case 1:
		r := e.fresh()
		e.refs[vs[0].id] = r
		return r + " = "
	}
	r := e.fresh()
	for i, v := range vs {
		e.refs[v.id] = r + "#" + strconv.Itoa(i)
	}
	return r + ":" + strconv.Itoa(len(vs)) + " = "
}

func mlirElem(d abi.DType) string {
	switch d {
	case abi.PRED:
		return "i1"
	case abi.S8, abi.S16, abi.S32, abi.S64:
		return "i" + strconv.Itoa(int(d.Size())*8)
	case abi.U8, abi.U16, abi.U32, abi.U64:
		return "ui" + strconv.Itoa(int(d.Size())*8)
	case abi.C64:
		return "complex<f32>"
	case abi.C128:
		return "complex<f64>"
	}
	return d.String() // f16, bf16, f32, f64
}

func mlirType(t Type) string {
	if t.Token {
		return "!stablehlo.token"
	}
	var b strings.Builder
	b.WriteString("tensor<")
	for _, d := range t.Shape {
		b.WriteString(strconv.FormatInt(d, 10))
		b.WriteByte('x')
	}
	b.WriteString(mlirElem(t.DType))
	b.WriteByte('>')
	return b.String()
}

var stablehloNames = map[Kind]string{
	OpAdd: "add", OpSub: "subtract", OpMul: "multiply", OpDiv: "divide", OpMax: "maximum", OpMin: "minimum",
	OpNeg: "negate", OpExp: "exponential", OpLog: "log", OpSelect: "select", OpConvert: "convert", OpReshape: "reshape",
}

// generic writes `res = "stablehlo.name"(operands) attrs : (types) -> results`.
func (e *emitter) generic(depth int, name string, op *Op, attrs string) {
	lhs := e.define(op.Results)
	if attrs != "" {
		attrs = " " + attrs
	}
	rt := e.typesOf(op.Results)
	if len(op.Results) != 1 {
		rt = "(" + rt + ")"
	}
	e.write(depth, lhs, "\"stablehlo.", name, "\"(", e.refList(op.Args), ")", attrs, " : (", e.typesOf(op.Args), ") -> ", rt)
}

// write writes one line from its pieces (the hot path: no formatting).
func (e *emitter) write(depth int, parts ...string) {
	for i := 0; i < depth; i++ {
		e.out.WriteString("  ")
	}
	for _, s := range parts {
		e.out.WriteString(s)
	}
	e.out.WriteByte('\n')
}

// callAttrs is a custom call's attribute dictionary, made once per
// callee, kind and chain.
func (e *emitter) callAttrs(op *Op, callee Callee) string {
	key := callAttrKey{callee: op.Callee, pure: op.Kind == OpCall, chain: op.Chain, ordered: op.Ordered}
	if s, ok := e.attrs[key]; ok {
		return s
	}
	attrs := "api_version = 4 : i32"
	if !key.pure {
		attrs += ", has_side_effect = true"
	}
	cfg := "callback = " + strconv.Quote(callee.Key())
	if op.Ordered {
		cfg += ", chain = " + strconv.Quote(op.Chain)
	}
	attrs += ", backend_config = {" + cfg + "}"
	e.attrs[key] = attrs
	return attrs
}

type callAttrKey struct {
	callee, chain string
	pure, ordered bool
}

func i64Array(xs []int64) string {
	if len(xs) == 0 {
		return "array<i64>"
	}
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatInt(x, 10)
	}
	return "array<i64: " + strings.Join(s, ", ") + ">"
}

func (e *emitter) region(r *Region, depth int) error {
	for _, op := range r.Ops {
		if err := e.op(op, depth); err != nil {
			return err
		}
	}
	return nil
}

func (e *emitter) op(op *Op, depth int) error {
	switch op.Kind {
	case OpConstant:
		lhs := e.define(op.Results)
		e.line(depth, "%sstablehlo.constant %s : %s", lhs, denseAttr(op.Value), mlirType(op.Out))
	case OpAdd, OpSub, OpMul, OpDiv, OpMax, OpMin, OpNeg, OpExp, OpLog, OpSelect, OpConvert, OpReshape:
		e.generic(depth, stablehloNames[op.Kind], op, "")
	case OpCompare:
		e.generic(depth, "compare", op, fmt.Sprintf("{comparison_direction = #stablehlo<comparison_direction %s>}", strings.ToUpper(op.Dir)))
	case OpBroadcast:
		e.generic(depth, "broadcast_in_dim", op, "{broadcast_dimensions = "+i64Array(op.Axes)+"}")
	case OpDot:
		e.generic(depth, "dot_general", op, "{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>}")
	case OpReduceSum, OpReduceMax:
		e.reduce(op, depth)
	case OpCall, OpIOCall, OpTap:
		return e.callback(op, depth)
	case OpCreateToken:
		lhs := e.define(op.Results)
		// after_all with no operands makes a fresh token (XLA's
		// CreateToken); real XLA compiles it (checked on jaxlib 0.11.2).
		// stablehlo.create_token is a legacy op that XLA still compiles
		// too; after_all is what JAX itself emits for a fresh token
		// (mlir.create_token), so it is the form kept here.
		e.line(depth, "%s\"stablehlo.after_all\"() : () -> !stablehlo.token", lhs)
	case OpCond:
		return e.cond(op, depth)
	case OpWhile:
		return e.while(op, depth)
	default:
		return opError(op, "cannot emit")
	}
	return nil
}

func (e *emitter) reduce(op *Op, depth int) {
	d := op.Args[0].Type.DType
	scalar := mlirType(TensorType(d))
	init := e.fresh()
	var initVal string
	name := "add"
	if op.Kind == OpReduceSum {
		initVal = zeroLiteral(d)
	} else {
		name = "maximum"
		initVal = lowestLiteral(d)
	}
	e.line(depth, "%s = stablehlo.constant dense<%s> : %s", init, initVal, scalar)
	lhs := e.define(op.Results)
	a, b, s := e.fresh(), e.fresh(), e.fresh()
	e.line(depth, "%s\"stablehlo.reduce\"(%s, %s) ({", lhs, e.ref(op.Args[0]), init)
	e.line(depth, "^bb0(%s: %s, %s: %s):", a, scalar, b, scalar)
	e.line(depth+1, "%s = \"stablehlo.%s\"(%s, %s) : (%s, %s) -> %s", s, name, a, b, scalar, scalar, scalar)
	e.line(depth+1, "\"stablehlo.return\"(%s) : (%s) -> ()", s, scalar)
	e.line(depth, "}) {dimensions = %s} : (%s, %s) -> %s", i64Array(op.Axes), mlirType(op.Args[0].Type), scalar, mlirType(op.Results[0].Type))
}

func (e *emitter) callback(op *Op, depth int) error {
	callee := e.callees[op.Callee]
	args := op.Args
	var tokIn *Value
	if n := len(args); n > 0 && args[n-1].Type.Token {
		tokIn, args = args[n-1], args[:n-1]
	}
	// The custom call's results are the callback's results (for a tap too:
	// the handler writes them; the program discards them), then the token.
	var rt []string
	var ranks []int // of the results, for their layouts
	if op.Kind == OpTap {
		metas := make([]abi.TensorMeta, len(args))
		for i, a := range args {
			metas[i] = a.Type.Meta()
		}
		specs, err := callee.Signature.Bind(metas)
		if err != nil {
			return opError(op, "%v", err)
		}
		for _, s := range specs {
			rt = append(rt, mlirType(TensorType(s.DType, s.Shape...)))
			ranks = append(ranks, len(s.Shape))
		}
	} else {
		for _, v := range op.Results {
			if !v.Type.Token {
				rt = append(rt, e.ty(v))
				ranks = append(ranks, len(v.Type.Shape))
			}
		}
	}
	operands := append([]*Value{}, args...)
	if tokIn != nil {
		operands = append(operands, tokIn)
		rt = append(rt, mlirType(TokenType))
		ranks = append(ranks, 0) // a token's layout is empty, as JAX gives it
	}
	opRanks := make([]int, len(operands))
	for i, v := range operands {
		if !v.Type.Token {
			opRanks[i] = len(v.Type.Shape)
		}
	}
	attrs := e.callAttrs(op, callee)
	// Name the custom call's results.
	n := len(rt)
	var lhs, base string
	switch n {
	case 0:
	case 1:
		base = e.fresh()
		lhs = base + " = "
	default:
		base = e.fresh()
		lhs = base + ":" + strconv.Itoa(n) + " = "
	}
	resRef := func(i int) string {
		if n == 1 {
			return base
		}
		return base + "#" + strconv.Itoa(i)
	}
	if op.Kind == OpTap {
		for i, v := range op.Results {
			if v.Type.Token {
				e.refs[v.id] = resRef(n - 1)
			} else {
				e.refs[v.id] = e.ref(args[i])
			}
		}
	} else {
		for i, v := range op.Results {
			e.refs[v.id] = resRef(i)
		}
	}
	e.write(depth, lhs, "stablehlo.custom_call @"+FFITarget+"(", e.refList(operands), ") {", attrs,
		", operand_layouts = ", layouts(opRanks), ", result_layouts = ", layouts(ranks),
		"} : (", e.typesOf(operands), ") -> ", resultTypes(rt))
	return nil
}

// layouts is a custom call's operand_layouts or result_layouts: for each
// value of the given rank, XLA's minor-to-major order of a dense row-major
// array (rank 2: [1, 0]), as JAX's ffi_call passes them. Without them XLA may
// give an operand another layout (a transposed one, column-major), and the
// handler reads buffers as row-major.
func layouts(ranks []int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, r := range ranks {
		if i > 0 {
			b.WriteString(", ")
		}
		switch r {
		case 0:
			b.WriteString("dense<> : tensor<0xindex>")
		case 1:
			b.WriteString("dense<0> : tensor<1xindex>")
		default:
			b.WriteString("dense<[")
			for d := r - 1; d >= 0; d-- {
				b.WriteString(strconv.Itoa(d))
				if d > 0 {
					b.WriteString(", ")
				}
			}
			b.WriteString("]> : tensor<")
			b.WriteString(strconv.Itoa(r))
			b.WriteString("xindex>")
		}
	}
	b.WriteByte(']')
	return b.String()
}

func (e *emitter) cond(op *Op, depth int) error {
	name := "stablehlo.if"
	if op.Args[0].Type.DType == abi.S32 {
		name = "stablehlo.case"
	}
	rt := make([]string, len(op.Results))
	for i, v := range op.Results {
		rt[i] = mlirType(v.Type)
	}
	// Results are defined after the regions, but named first (MLIR order).
	lhs := e.define(op.Results)
	e.line(depth, "%s\"%s\"(%s) ({", lhs, name, e.ref(op.Args[0]))
	for i, r := range op.Regions {
		if i > 0 {
			e.line(depth, "}, {")
		}
		if err := e.region(r, depth+1); err != nil {
			return err
		}
		e.line(depth+1, "\"stablehlo.return\"(%s) : (%s) -> ()", e.refList(r.Yield), e.typesOf(r.Yield))
	}
	e.line(depth, "}) : (%s) -> (%s)", mlirType(op.Args[0].Type), strings.Join(rt, ", "))
	return nil
}

// captures lists the values op's regions use that are defined outside op,
// in order of first use.
func captures(op *Op) []*Value {
	inside := map[*Value]bool{}
	seen := map[*Value]bool{}
	var out []*Value
	use := func(v *Value) {
		if !inside[v] && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	var region func(r *Region)
	region = func(r *Region) {
		for _, v := range r.Params {
			inside[v] = true
		}
		for _, o := range r.Ops {
			for _, a := range o.Args {
				use(a)
			}
			for _, sub := range o.Regions {
				region(sub)
			}
			for _, v := range o.Results {
				inside[v] = true
			}
		}
		for _, v := range r.Yield {
			use(v)
		}
	}
	for _, r := range op.Regions {
		region(r)
	}
	return out
}

func (e *emitter) while(op *Op, depth int) error {
	caps := captures(op)
	operands := append(append([]*Value{}, op.Args...), caps...)
	types := e.typesOf(operands)
	var tl []string
	for _, v := range operands {
		tl = append(tl, mlirType(v.Type))
	}
	n := len(operands)
	base := e.fresh()
	lhs := base + " = "
	if n > 1 {
		lhs = base + ":" + strconv.Itoa(n) + " = "
	}
	if n == 0 {
		lhs = ""
	}
	operandRefs := e.refList(operands)
	e.line(depth, "%s\"stablehlo.while\"(%s) ({", lhs, operandRefs)
	saved := make([]string, len(caps))
	for i, v := range caps {
		saved[i] = e.refs[v.id]
	}
	for ri, r := range op.Regions {
		if ri > 0 {
			e.line(depth, "}, {")
		}
		var params []string
		var capRefs []string
		for _, v := range r.Params {
			ref := e.fresh()
			e.refs[v.id] = ref
			params = append(params, ref+": "+e.ty(v))
		}
		for _, v := range caps {
			ref := e.fresh()
			e.refs[v.id] = ref
			capRefs = append(capRefs, ref)
			params = append(params, ref+": "+mlirType(v.Type))
		}
		e.line(depth, "^bb0(%s):", strings.Join(params, ", "))
		if err := e.region(r, depth+1); err != nil {
			return err
		}
		if ri == 0 {
			e.line(depth+1, "\"stablehlo.return\"(%s) : (%s) -> ()", e.refList(r.Yield), e.typesOf(r.Yield))
		} else {
			refs := e.refList(r.Yield)
			ys := e.typesOf(r.Yield)
			if len(caps) > 0 {
				if refs != "" {
					refs += ", "
					ys += ", "
				}
				refs += strings.Join(capRefs, ", ")
				ys += e.typesOf(caps)
			}
			e.line(depth+1, "\"stablehlo.return\"(%s) : (%s) -> ()", refs, ys)
		}
		for i, v := range caps {
			e.refs[v.id] = saved[i]
		}
	}
	e.line(depth, "}) : (%s) -> %s", types, "("+strings.Join(tl, ", ")+")")
	for i, v := range op.Results {
		if n == 1 {
			e.refs[v.id] = base
		} else {
			e.refs[v.id] = base + "#" + strconv.Itoa(i)
		}
	}
	return nil
}

// denseAttr prints a constant as a dense elements attribute, nested by
// shape; a splat prints one element.
func denseAttr(t abi.Tensor) string {
	sz := int(t.DType.Size())
	n := len(t.Data) / sz
	if n == 0 {
		return "dense<>"
	}
	if formatConstant(t)[0] != '[' {
		return "dense<" + mlirElement(t, 0) + ">"
	}
	var b strings.Builder
	b.WriteString("dense<")
	idx := 0
	var nest func(dim int)
	nest = func(dim int) {
		if dim == len(t.Shape) {
			b.WriteString(mlirElement(t, idx))
			idx++
			return
		}
		b.WriteByte('[')
		for i := int64(0); i < t.Shape[dim]; i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			nest(dim + 1)
		}
		b.WriteByte(']')
	}
	nest(0)
	b.WriteByte('>')
	return b.String()
}

// mlirElement prints one element as MLIR reads it: floats in exponent form
// with a '.', non-finite floats as their bit pattern in hex.
func mlirElement(t abi.Tensor, i int) string {
	raw := rawElement(t, i)
	switch t.DType {
	case abi.F32:
		f := math.Float32frombits(uint32(raw))
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return fmt.Sprintf("0x%08X", uint32(raw))
		}
		return mlirFloat(strconv.FormatFloat(float64(f), 'e', -1, 32))
	case abi.F64:
		f := math.Float64frombits(raw)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Sprintf("0x%016X", raw)
		}
		return mlirFloat(strconv.FormatFloat(f, 'e', -1, 64))
	}
	return formatElement(t, i)
}

func mlirFloat(s string) string {
	i := strings.IndexByte(s, 'e')
	if i >= 0 && !strings.Contains(s[:i], ".") {
		return s[:i] + ".0" + s[i:]
	}
	return s
}

func zeroLiteral(d abi.DType) string {
	if isFloat(d) {
		return "0.0e+00"
	}
	return "0"
}

// lowestLiteral is the identity of max: -inf for floats, the minimum of an
// integer type.
func lowestLiteral(d abi.DType) string {
	switch d {
	case abi.F32:
		return "0xFF800000"
	case abi.F64:
		return "0xFFF0000000000000"
	case abi.S8, abi.S16, abi.S32, abi.S64:
		return strconv.FormatInt(-1<<(d.Size()*8-1), 10)
	}
	return "0"
}

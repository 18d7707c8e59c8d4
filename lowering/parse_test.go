package lowering

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
)

var testCat = StaticCatalog{
	"scale":     {Name: "scale", ID: "cb1-" + strings.Repeat("a", 64), Signature: abi.MustParseSignature("(x: f32[n], factor: f32[]) -> f32[n]")},
	"tap_print": {Name: "tap_print", ID: "cb1-" + strings.Repeat("b", 64), Signature: abi.MustParseSignature("(x: f32[n]) -> $0")},
	"matmul":    {Name: "matmul", ID: "cb1-" + strings.Repeat("c", 64), Signature: abi.MustParseSignature("(a: f32[m,k], b: f32[k,n]) -> f32[m,n]")},
	"hist":      {Name: "hist", ID: "cb1-" + strings.Repeat("d", 64), Signature: abi.MustParseSignature("(values: f32[n], edges: f32[b]) -> s64[b]")},
}

// A program using every op and every syntactic form, in canonical text.
const everyOp = `func @every(%x: f32[2,3], %y: f32[3,2], %p: pred[], %k: s32[]) -> (f32[2,2], s32[6], f32[2], pred[2,3]) {
  %c = constant [1, -2.5, 3e+10, inf, -inf, nan] : f32[2,3]
  %z = constant 0 : f32[2,3]
  %t = constant true : pred[]
  %a = add %x, %c : f32[2,3]
  %s = sub %a, %z : f32[2,3]
  %m = mul %s, %s : f32[2,3]
  %d = div %m, %c : f32[2,3]
  %mx = max %d, %x : f32[2,3]
  %mn = min %mx, %x : f32[2,3]
  %n = neg %mn : f32[2,3]
  %e = exp %n : f32[2,3]
  %l = log %e : f32[2,3]
  %cmp = compare ge %l, %x : pred[2,3]
  %sel = select %cmp, %l, %x : f32[2,3]
  %i = convert %sel : s32[2,3]
  %r = reshape %i : s32[6]
  %row = reduce_max %x axes [1] : f32[2]
  %b = broadcast %row dims [0] : f32[2,2]
  %dt = dot %x, %y : f32[2,2]
  %mm = call @matmul(%x, %y) : f32[2,2]
  %sum = reduce_sum %mm axes [0, 1] : f32[]
  %flat = reshape %x : f32[6]
  %sc = io_call @scale(%flat, %sum) ordered chain "log" : f32[6]
  tap @tap_print(%sc)
  %pt = tap @tap_print(%flat) ordered : f32[6]
  %u = io_call @scale(%pt, %sum) : f32[6]
  %q = cond %p {
    %q1 = add %dt, %b : f32[2,2]
    yield %q1
  } else {
    yield %mm
  } : f32[2,2]
  cond %k {
    tap @tap_print(%u) ordered
    yield
  } else {
    yield
  }
  %j, %acc = while(%k, %q) cond(%j0, %a0) {
    %lim = constant 4 : s32[]
    %go = compare lt %j0, %lim : pred[]
    yield %go
  } do(%j0, %a0) {
    %one = constant 1 : s32[]
    %j1 = add %j0, %one : s32[]
    %a1 = add %a0, %dt : f32[2,2]
    yield %j1, %a1
  } : s32[], f32[2,2]
  %tok = create_token : token
  return %acc, %r, %row, %cmp
}
`

func TestRoundTrip(t *testing.T) {
	p, err := Parse("every.cbir", []byte(everyOp))
	require.NoError(t, err)
	assert.Equal(t, everyOp, Print(p))
	require.NoError(t, Check(p, testCat))
	assert.Equal(t, 37, p.NumOps())

	// Non-canonical spelling: comments, spacing, line breaks, the default
	// chain spelled out, aliases.
	messy := `# a comment
func   @f( %x :f32[4] ,%f: f32[ ] )->f32[4]{   # trailing
  %y=call @scale( %x,%f ):f32[4]
  %z = io_call @scale(%y, %f) ordered chain "main"
     : f32[4]
  return %z }`
	q, err := Parse("m.cbir", []byte(messy))
	require.NoError(t, err)
	want := `func @f(%x: f32[4], %f: f32[]) -> f32[4] {
  %y = call @scale(%x, %f) : f32[4]
  %z = io_call @scale(%y, %f) ordered : f32[4]
  return %z
}
`
	assert.Equal(t, want, Print(q))
	q2, err := Parse("again", []byte(Print(q)))
	require.NoError(t, err)
	assert.Equal(t, want, Print(q2))
}

func TestConstants(t *testing.T) {
	p, err := Parse("c", []byte(`func @c() -> (f32[3], s8[2], u16[2], f64[], pred[2]) {
  %a = constant [0.1, -0, 1e-45] : f32[3]
  %b = constant [-128, 127] : s8[2]
  %c = constant [65535, 0] : u16[2]
  %d = constant 2.5 : f64[]
  %e = constant [true, false] : pred[2]
  return %a, %b, %c, %d, %e
}
`))
	require.NoError(t, err)
	vals := map[string]abi.Tensor{}
	p.Walk(func(op *Op) { vals[op.Results[0].Name] = op.Value })
	assert.Equal(t, []float32{0.1, 0, 1e-45}, abi.MustView[float32](vals["a"]))
	assert.Equal(t, []int8{-128, 127}, abi.MustView[int8](vals["b"]))
	assert.Equal(t, []uint16{65535, 0}, abi.MustView[uint16](vals["c"]))
	assert.Equal(t, []float64{2.5}, abi.MustView[float64](vals["d"]))
	assert.Equal(t, []bool{true, false}, abi.MustView[bool](vals["e"]))
	assert.Contains(t, Print(p), "%a = constant [0.1, -0, 1e-45] : f32[3]")
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ src, want string }{
		{``, `p.cbir:1:1: expected "func", got end of file`},
		{`func main`, `p.cbir:1:6: expected the program name (@name), got "main"`},
		{`func @f(%x: f33[2]) -> f32[2] {}`, `p.cbir:1:13: unknown type "f33"`},
		{`func @f(%x: f32[2]) -> f32[2] {
  return %y
}`, `p.cbir:2:10: %y is not defined`},
		{`func @f(%x: f32[2]) -> f32[2] {
  %x = neg %x : f32[2]
  return %x
}`, `p.cbir:2:3: %x is already defined`},
		{`func @f(%x: f32[2]) -> f32[2] {
  %y = frob %x : f32[2]
  return %y
}`, `p.cbir:2:8: unknown op "frob"`},
		{`func @f(%x: f32[2]) -> f32[2] {
  %y = compare lq %x, %x : pred[2]
  return %x
}`, `p.cbir:2:16: unknown direction "lq"`},
		{`func @f(%x: f32[2]) -> f32[2] {
  %y = constant [1, 2, 3] : f32[2]
  return %y
}`, `p.cbir:2:8: constant: 3 values given for f32[2], which has 2 elements`},
		{`func @f(%x: f32[2]) -> f32[2] {
  %y = constant [1, x] : f32[2]
  return %y
}`, `p.cbir:2:21: expected a number, got "x"`},
		{`func @f(%x: s8[2]) -> s8[2] {
  %y = constant 300 : s8[2]
  return %y
}`, `p.cbir:2:17: constant: "300" is not a s8 value`},
		{`func @f(%x: f32[2]) -> f32[2] {
  %y = add %x, %x : f32[2]
}`, `p.cbir:3:1: expected "return" before "}"`},
		{`func @f(%x: f32[2]) -> f32[2] {
  return %x, %x
}`, `p.cbir:2:3: returns 2 values; @f declares 1 results`},
		{`func @f(%x: f32[2]) -> f32[2] {
  %c = cond %x {
    yield %x
  }
  return %x
}`, `p.cbir:5:3: expected "else", got "return"`},
		{`func @f(%x: f32[2]) -> f32[2] {
  %y = call @scale(%x) "x"
  return %x
}`, `p.cbir:2:24: expected ":", got "x"`},
		{`func @f(%x: f32[2]) -> f32[2] {
  %y = io_call @scale(%x) ordered chain "" : f32[2]
  return %x
}`, `p.cbir:2:41: empty chain name`},
		{`func @f(%x: f32[2]) -> f32[2] {
  %a = while(%x) cond(%i, %j) {
    yield %i
  } do(%i) {
    yield %i
  } : f32[2]
  return %x
}`, `p.cbir:2:31: cond region names 2 parameters; the loop carries 1 values`},
		{"func @f() -> () {\n  %s = constant \"x : f32[]\n}", `p.cbir:2:17: unterminated string`},
		{"func @f() -> () {\n  return\n} extra", `p.cbir:3:3: unexpected "extra" after the program`},
		{"func @f() -> () {\n  $\n}", `p.cbir:2:3: unexpected character "$"`},
		{"func @f(%x: f32[99999999999,99999999999]) -> () {\n  return\n}", `p.cbir:1:13: f32[99999999999,99999999999] is too large for the ABI`},
	}
	for _, c := range cases {
		_, err := Parse("p.cbir", []byte(c.src))
		if assert.Error(t, err, c.src) {
			assert.Contains(t, err.Error(), c.want, c.src)
			var le *Error
			assert.ErrorAs(t, err, &le)
		}
	}
}

func TestNestingLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString("func @f(%p: pred[]) -> () {\n")
	for i := 0; i < maxNesting+5; i++ {
		b.WriteString("cond %p {\n")
	}
	_, err := Parse("deep", []byte(b.String()))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nested deeper than 256")
}

func TestCheckErrors(t *testing.T) {
	cases := []struct{ src, want string }{
		{`func @f(%x: f32[4], %g: f32[2]) -> f32[4] {
  %y = call @scale(%x, %g) : f32[4]
  return %y
}`, `c.cbir:2:8: call @scale: argument 1 (factor): expected f32[], got f32[2] (rank 1, want 0) (signature (x: f32[n], factor: f32[]) -> f32[n], operand %g)`},
		{`func @f(%x: s32[4], %g: f32[]) -> f32[4] {
  %y = call @scale(%x, %g) : f32[4]
  return %y
}`, `c.cbir:2:8: call @scale: argument 0 (x): expected f32[n], got s32[4]`},
		{`func @f(%x: f32[4], %g: f32[]) -> f32[5] {
  %y = call @scale(%x, %g) : f32[5]
  return %y
}`, `c.cbir:2:8: call @scale: result 0 (%y): declared f32[5], derived f32[4]`},
		{`func @f(%a: f32[2,3], %b: f32[2,3]) -> f32[2,3] {
  %y = call @matmul(%a, %b) : f32[2,3]
  return %y
}`, `argument 1 (b): expected f32[k=3,n], got f32[2,3] (dimension 0: k=3 was bound by argument 0)`},
		{`func @f(%x: f32[4]) -> f32[4] {
  %y = call @nope(%x) : f32[4]
  return %y
}`, `c.cbir:2:8: call @nope: no callback "nope" (have: hist, matmul, scale, tap_print)`},
		{`func @f(%x: f32[4]) -> f32[4] {
  %y = call @scale(%x) : f32[4]
  return %y
}`, `c.cbir:2:8: call @scale: got 1 inputs, signature (x: f32[n], factor: f32[]) -> f32[n] takes 2`},
		{`func @f(%x: f32[4], %y: f32[3]) -> f32[4] {
  %z = add %x, %y : f32[4]
  return %z
}`, `c.cbir:2:8: add: operand 1 (%y): expected f32[4] (the type of operand 0), got f32[3]`},
		{`func @f(%x: s32[4]) -> s32[4] {
  %z = exp %x : s32[4]
  return %z
}`, `c.cbir:2:8: exp: operand 0 (%x): expected f32 or f64, got s32[4]`},
		{`func @f(%x: f32[4]) -> f32[3] {
  %z = reshape %x : f32[3]
  return %z
}`, `c.cbir:2:8: reshape: cannot reshape f32[4] to f32[3]`},
		{`func @f(%x: f32[4]) -> f32[4,3] {
  %z = broadcast %x dims [1] : f32[4,3]
  return %z
}`, `c.cbir:2:8: broadcast: operand dimension 0 is 4; result dimension 1 is 3 (want equal, or 1)`},
		{`func @f(%x: f32[4]) -> f32[] {
  %z = reduce_sum %x axes [1] : f32[]
  return %z
}`, `c.cbir:2:8: reduce_sum: axes [1] must increase and lie in [0, 1)`},
		{`func @f(%x: f32[2,3]) -> f32[2,2] {
  %z = dot %x, %x : f32[2,2]
  return %z
}`, `c.cbir:2:8: dot: operand 1 (%x): expected f32[3,n], got f32[2,3]`},
		{`func @f(%x: f32[4], %p: f32[]) -> f32[4] {
  %z = cond %p {
    yield %x
  } else {
    yield %x
  } : f32[4]
  return %z
}`, `c.cbir:2:8: cond: operand 0 (%p): expected pred[] or s32[], got f32[]`},
		{`func @f(%x: f32[4], %p: pred[]) -> f32[4] {
  %z = cond %p {
    yield %x
  } else {
    %c = constant 0 : f32[]
    yield %c
  } : f32[4]
  return %z
}`, `c.cbir:6:5: cond: result 0: the first branch yields f32[4], the second f32[]`},
		{`func @f(%x: f32[4]) -> f32[4] {
  %y = while(%x) cond(%v) {
    tap @tap_print(%v) ordered
    %c = constant true : pred[]
    yield %c
  } do(%v) {
    yield %v
  } : f32[4]
  return %y
}`, `c.cbir:3:5: tap @tap_print: ordered effect in the condition of the while loop at c.cbir:2:8; move it into the body`},
		{`func @f(%x: f32[4]) -> f32[4] {
  %y = while(%x) cond(%v) {
    yield %v
  } do(%v) {
    yield %v
  } : f32[4]
  return %y
}`, `c.cbir:3:5: while: the condition must yield one pred[], yields (f32[4])`},
		{`func @f(%x: f32[4], %g: f32[]) -> f32[4] {
  %y = io_call @scale(%x, %g) chain "x" : f32[4]
  return %y
}`, `c.cbir:2:8: io_call @scale: chain "x" given to an unordered effect; add ordered`},
		{`func @f(%x: f32[4]) -> f32[4] {
  %t = create_token : token
  %y, %t2 = io_call @tap_print(%x, %t) : f32[4], token
  return %y
}`, `c.cbir:3:13: io_call @tap_print: only ordered effects take a token`},
	}
	for _, c := range cases {
		p, err := Parse("c.cbir", []byte(c.src))
		require.NoError(t, err, c.src)
		err = Check(p, testCat)
		if assert.Error(t, err, c.src) {
			assert.Contains(t, err.Error(), c.want, c.src)
		}
	}
}

// Scoping: a region's values are not visible after it; captures from the
// enclosing region are.
func TestScopes(t *testing.T) {
	_, err := Parse("s", []byte(`func @f(%x: f32[4], %p: pred[]) -> f32[4] {
  %y = cond %p {
    %inner = neg %x : f32[4]
    yield %inner
  } else {
    yield %inner
  } : f32[4]
  return %y
}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "s:6:11: %inner is not defined")

	// A name is free again once its region has closed.
	_, err = Parse("s", []byte(`func @f(%x: f32[4], %p: pred[]) -> f32[4] {
  %y = cond %p {
    %t = neg %x : f32[4]
    yield %t
  } else {
    %t = exp %x : f32[4]
    yield %t
  } : f32[4]
  return %y
}`))
	require.NoError(t, err)
}

func TestBuilder(t *testing.T) {
	b := NewBuilder("built", testCat)
	x := b.Param("x", TensorType(abi.F32, 4))
	f := b.Constant(abi.Scalar[float32](3))
	y := b.Call("scale", x, f)[0]
	b.IOCall("tap_print", Effect{Ordered: true}, y)
	p := b.Compare(CmpGT, b.ReduceSum(y, 0), b.Constant(abi.Scalar[float32](0)))
	z := b.Cond(p, func() []*Value { return []*Value{b.Unary(OpExp, y)} }, func() []*Value { return []*Value{y} })[0]
	n0 := b.Constant(abi.Scalar[int32](0))
	out := b.While([]*Value{n0, z}, func(c []*Value) *Value {
		return b.Compare(CmpLT, c[0], b.Constant(abi.Scalar[int32](2)))
	}, func(c []*Value) []*Value {
		b.Tap("tap_print", Effect{Ordered: true, Chain: "loop"}, c[1])
		return []*Value{b.Add(c[0], b.Constant(abi.Scalar[int32](1))), b.Mul(c[1], c[1])}
	})
	prog, err := b.Build(out[1])
	require.NoError(t, err)
	text := Print(prog)
	q, err := Parse("built", []byte(text))
	require.NoError(t, err)
	require.NoError(t, Check(q, testCat))
	assert.Equal(t, text, Print(q))
	assert.Contains(t, text, "= call @scale(%x, %v1) : f32[4]")
	require.NoError(t, Lower(prog, Options{}))
	require.NoError(t, VerifyTokens(prog))

	// A type error is reported by Build, naming the op.
	b = NewBuilder("bad", testCat)
	x = b.Param("x", TensorType(abi.F32, 4))
	b.Call("scale", x, x)
	_, err = b.Build()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "call @scale: argument 1 (factor): expected f32[], got f32[4]")
}

func TestDTypeNames(t *testing.T) {
	for _, d := range abi.DTypes() {
		assert.Equal(t, d, dtypeByName(d.String()))
	}
	assert.Equal(t, abi.Invalid, dtypeByName("i32"), "no aliases in the text format")
}

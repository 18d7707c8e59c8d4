package lowering

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/host"
)

func compileText(t *testing.T, src string, opts Options) *Program {
	t.Helper()
	p, err := Compile("t.cbir", []byte(src), testCat, opts)
	require.NoError(t, err)
	return p
}

func TestCSE(t *testing.T) {
	p := compileText(t, `func @f(%x: f32[4], %g: f32[], %p: pred[]) -> (f32[4], f32[4], f32[4]) {
  %a = call @scale(%x, %g) : f32[4]
  %b = call @scale(%x, %g) : f32[4]
  %c1 = constant 2 : f32[]
  %c2 = constant 2 : f32[]
  %d = call @scale(%x, %c1) : f32[4]
  %e = call @scale(%x, %c2) : f32[4]
  %s = add %a, %b : f32[4]
  %t = add %d, %e : f32[4]
  %l1 = io_call @tap_print(%x) : f32[4]
  %l2 = io_call @tap_print(%x) : f32[4]
  %r = cond %p {
    %in = call @scale(%x, %g) : f32[4]
    yield %in
  } else {
    %o = call @scale(%l1, %g) : f32[4]
    yield %o
  } : f32[4]
  %after = call @scale(%l1, %g) : f32[4]
  %u = add %s, %t : f32[4]
  %v = add %u, %after : f32[4]
  %w = add %l2, %r : f32[4]
  return %v, %w, %l1
}`, Options{})
	text := Print(p)
	// One scale(%x, %g), one constant, one scale(%x, %c1); the identical
	// io_calls both stay (effects are never merged); the call inside the
	// branch reuses the outer one, but the one after the cond does not
	// reuse the one inside the else branch (not visible there).
	assert.Equal(t, 1, strings.Count(text, "call @scale(%x, %g)"), text)
	assert.Equal(t, 1, strings.Count(text, "= constant 2"), text)
	assert.Equal(t, 1, strings.Count(text, "call @scale(%x, %c1)"), text)
	assert.Equal(t, 2, strings.Count(text, "io_call @tap_print"), text)
	assert.Equal(t, 2, strings.Count(text, "call @scale(%l1, %g)"), text)
	assert.Contains(t, text, "%s = add %a, %a")
	assert.Contains(t, text, "yield %a\n")
}

func TestDCEKeepsEffectsAndDependencies(t *testing.T) {
	p := compileText(t, `func @f(%x: f32[4], %g: f32[], %p: pred[]) -> f32[4] {
  %dead = call @scale(%x, %g) : f32[4]
  %feeds = exp %dead : f32[4]
  %keep = io_call @tap_print(%feeds) : f32[4]
  %dead2 = neg %g : f32[]
  %two, %unused = cond %p {
    %a = neg %x : f32[4]
    %b = exp %x : f32[4]
    yield %a, %b
  } else {
    %c = call @scale(%x, %g) : f32[4]
    yield %x, %c
  } : f32[4], f32[4]
  %loop = while(%x) cond(%v) {
    %f = constant false : pred[]
    yield %f
  } do(%v) {
    yield %v
  } : f32[4]
  %eff = cond %p {
    tap @tap_print(%x)
    yield %x
  } else {
    yield %x
  } : f32[4]
  return %two
}`, Options{})
	text := Print(p)
	// The io_call and what it depends on stay although %keep is unused.
	assert.Contains(t, text, "%dead = call @scale(%x, %g)")
	assert.Contains(t, text, "%feeds = exp %dead")
	assert.Contains(t, text, "%keep = io_call @tap_print(%feeds)")
	// Pure and unused: gone; the cond's unused result and the ops that
	// computed it in each branch: gone; the pure loop: gone.
	assert.NotContains(t, text, "%dead2")
	assert.NotContains(t, text, "%unused")
	assert.NotContains(t, text, "%b = exp")
	assert.NotContains(t, text, "%c = call")
	assert.NotContains(t, text, "while")
	// A cond with an effect stays though its result is unused.
	assert.Contains(t, text, "  cond %p {\n    tap @tap_print(%x)\n    yield\n  } else {\n    yield\n  }\n")
	assert.Contains(t, text, "%two = cond %p")
}

func TestThreadTokens(t *testing.T) {
	p := compileText(t, `func @f(%x: f32[4], %g: f32[], %p: pred[]) -> f32[4] {
  %a = io_call @scale(%x, %g) ordered : f32[4]
  tap @tap_print(%a) ordered chain "b"
  tap @tap_print(%a)
  %r = cond %p {
    %y = io_call @scale(%a, %g) ordered : f32[4]
    yield %y
  } else {
    yield %a
  } : f32[4]
  %n = constant 0 : s32[]
  %i, %w = while(%n, %r) cond(%j, %v) {
    %lim = constant 3 : s32[]
    %go = compare lt %j, %lim : pred[]
    yield %go
  } do(%j, %v) {
    %one = constant 1 : s32[]
    %j1 = add %j, %one : s32[]
    tap @tap_print(%v) ordered chain "b"
    %v1 = io_call @scale(%v, %g) ordered : f32[4]
    yield %j1, %v1
  } : s32[], f32[4]
  %z = io_call @scale(%w, %g) ordered : f32[4]
  return %z
}`, Options{})
	want := `func @f(%x: f32[4], %g: f32[], %p: pred[]) -> f32[4] {
  %tok0 = create_token : token
  %tok1 = create_token : token
  %a, %tok2 = io_call @scale(%x, %g, %tok1) ordered : f32[4], token
  %tok3 = tap @tap_print(%a, %tok0) ordered chain "b" : token
  tap @tap_print(%a)
  %r, %tok5 = cond %p {
    %y, %tok4 = io_call @scale(%a, %g, %tok2) ordered : f32[4], token
    yield %y, %tok4
  } else {
    yield %a, %tok2
  } : f32[4], token
  %n = constant 0 : s32[]
  %i, %w, %tok12, %tok13 = while(%n, %r, %tok3, %tok5) cond(%j, %v, %tok6, %tok7) {
    %lim = constant 3 : s32[]
    %go = compare lt %j, %lim : pred[]
    yield %go
  } do(%j, %v, %tok8, %tok9) {
    %one = constant 1 : s32[]
    %j1 = add %j, %one : s32[]
    %tok10 = tap @tap_print(%v, %tok8) ordered chain "b" : token
    %v1, %tok11 = io_call @scale(%v, %g, %tok9) ordered : f32[4], token
    yield %j1, %v1, %tok10, %tok11
  } : s32[], f32[4], token, token
  %z, %tok14 = io_call @scale(%w, %g, %tok13) ordered : f32[4], token
  return %z
}
`
	assert.Equal(t, want, Print(p))
	require.NoError(t, VerifyTokens(p))
	// Lowering twice changes nothing.
	require.NoError(t, Lower(p, Options{}))
	assert.Equal(t, want, Print(p))
}

// VerifyTokens rejects programs whose ordered effects are not on their
// chain in program order.
func TestVerifyTokensRejects(t *testing.T) {
	base := `func @f(%x: f32[4], %g: f32[], %p: pred[]) -> f32[4] {
  %tok0 = create_token : token
  %a, %tok1 = io_call @scale(%x, %g, %tok0) ordered : f32[4], token
  %b, %tok2 = io_call @scale(%a, %g, %tok1) ordered : f32[4], token
  %r, %tok4 = cond %p {
    %y, %tok3 = io_call @scale(%b, %g, %tok2) ordered : f32[4], token
    yield %y, %tok3
  } else {
    yield %b, %tok2
  } : f32[4], token
  return %r
}
`
	p, err := Parse("v", []byte(base))
	require.NoError(t, err)
	require.NoError(t, Check(p, testCat))
	require.NoError(t, VerifyTokens(p))

	bad := map[string][2]string{
		"out of order":        {"%b, %tok2 = io_call @scale(%a, %g, %tok1)", "%b, %tok2 = io_call @scale(%a, %g, %tok0)"},
		"branch drops effect": {"yield %y, %tok3", "yield %y, %tok2"},
		"missing token":       {"%b, %tok2 = io_call @scale(%a, %g, %tok1) ordered : f32[4], token", "%b = io_call @scale(%a, %g) ordered : f32[4]\n  %tok2 = create_token : token"},
	}
	for name, edit := range bad {
		t.Run(name, func(t *testing.T) {
			src := strings.Replace(base, edit[0], edit[1], 1)
			require.NotEqual(t, base, src)
			q, err := Parse("v", []byte(src))
			require.NoError(t, err)
			require.NoError(t, Check(q, testCat))
			assert.Error(t, VerifyTokens(q))
		})
	}
}

// progGen generates random programs over f32[4] values with the examples'
// callbacks: arithmetic, pure calls (some repeated, some unused), ordered
// and unordered io_calls and taps on two chains, conds and while loops.
type progGen struct {
	r     *rand.Rand
	b     *Builder
	depth int
	ops   int
}

func (g *progGen) pick(vs []*Value) *Value { return vs[g.r.IntN(len(vs))] }

func (g *progGen) effect() Effect {
	switch g.r.IntN(3) {
	case 0:
		return Effect{}
	case 1:
		return Effect{Ordered: true}
	}
	return Effect{Ordered: true, Chain: "b"}
}

// block emits n random ops using and extending vals (all f32[4]) and
// scalars (f32[]); it returns the new vals.
func (g *progGen) block(n int, vals, scalars []*Value) []*Value {
	b := g.b
	for i := 0; i < n; i++ {
		g.ops++
		x, y := g.pick(vals), g.pick(vals)
		var v *Value
		switch k := g.r.IntN(14); {
		case k < 4:
			v = b.Binary([]Kind{OpAdd, OpSub, OpMul, OpMax, OpMin}[g.r.IntN(5)], x, y)
		case k == 4:
			v = b.Unary(OpNeg, x)
		case k < 7:
			v = b.Call("scale", x, g.pick(scalars))[0]
		case k == 7:
			// A repeated pure call: CSE should merge it.
			v = b.Call("scale", x, scalars[0])[0]
			w := b.Call("scale", x, scalars[0])[0]
			v = b.Add(v, w)
		case k == 8:
			v = b.IOCall("tap_print", g.effect(), x)[0]
		case k == 9:
			b.Tap("tap_print", g.effect(), x)
			continue
		case k == 10:
			grid := b.Reshape(x, 2, 2)
			v = b.Reshape(b.Call("softmax", grid)[0], 4)
		case k == 11:
			scalars = append(scalars, b.ReduceSum(x, 0))
			continue
		case k == 12 && g.depth < 2:
			g.depth++
			p := b.Compare(CmpGT, b.ReduceSum(x, 0), scalars[0])
			v = b.Cond(p, func() []*Value {
				return []*Value{g.pick(g.block(1+g.r.IntN(3), append([]*Value{}, vals...), scalars))}
			}, func() []*Value {
				return []*Value{g.pick(g.block(1+g.r.IntN(3), append([]*Value{}, vals...), scalars))}
			})[0]
			g.depth--
		case k == 13 && g.depth < 2:
			g.depth++
			limit := b.Constant(abi.Scalar[int32](int32(g.r.IntN(3))))
			one := b.Constant(abi.Scalar[int32](1))
			out := b.While([]*Value{b.Constant(abi.Scalar[int32](0)), x}, func(c []*Value) *Value {
				return b.Compare(CmpLT, c[0], limit)
			}, func(c []*Value) []*Value {
				inner := g.block(1+g.r.IntN(3), append(append([]*Value{}, vals...), c[1]), scalars)
				return []*Value{b.Add(c[0], one), inner[len(inner)-1]}
			})
			v = out[1]
			g.depth--
		default:
			v = b.Unary(OpNeg, y)
		}
		vals = append(vals, v)
	}
	return vals
}

// generate builds a random program with n top-level ops.
func generate(seed uint64, cat Catalog, n int) (*Program, error) {
	g := &progGen{r: rand.New(rand.NewPCG(seed, 99)), b: NewBuilder(fmt.Sprintf("gen%d", seed), cat)}
	x := g.b.Param("x", TensorType(abi.F32, 4))
	s := g.b.Param("s", TensorType(abi.F32))
	vals := g.block(n, []*Value{x}, []*Value{s})
	// Return a random subset: the rest is dead unless an effect needs it.
	var outs []*Value
	for _, v := range vals[1:] {
		if g.r.IntN(4) == 0 {
			outs = append(outs, v)
		}
	}
	if len(outs) == 0 {
		outs = append(outs, vals[len(vals)-1])
	}
	return g.b.Build(outs...)
}

// effectLog is what a run did: for each chain its ordered effects in
// order, and the unordered effects as a sorted multiset; each effect as
// its callback and input bytes.
type effectLog struct {
	chains    map[string][]string
	unordered []string
}

func (l *effectLog) add(e Event) {
	var b strings.Builder
	b.WriteString(e.Callback)
	for _, in := range e.Inputs {
		fmt.Fprintf(&b, " %s:%x", in.Type(), in.Data)
	}
	if e.Ordered {
		if l.chains == nil {
			l.chains = map[string][]string{}
		}
		l.chains[e.Chain] = append(l.chains[e.Chain], b.String())
		return
	}
	l.unordered = append(l.unordered, b.String())
	sort.Strings(l.unordered)
}

func runLogged(t *testing.T, h *host.Host, p *Program, inputs ...abi.Tensor) ([]abi.Tensor, *effectLog, error) {
	t.Helper()
	log := &effectLog{}
	ev, err := NewEvaluator(h, p, EvalOptions{Trace: log.add})
	require.NoError(t, err)
	out, err := ev.Run(context.Background(), inputs...)
	return out, log, err
}

// TestPassesPreserveSemantics is the property test: on generated programs,
// the evaluator gives the same results (bit for bit) and the same effects
// (every chain's sequence, and the multiset of unordered effects) before
// and after CSE, DCE and token threading; the lowered program has every
// ordered effect on its chain's token in program order; and the printed
// IR round-trips.
func TestPassesPreserveSemantics(t *testing.T) {
	h := newHost(t, config.EngineWazero)
	cat := HostCatalog(h)
	rounds := 60
	if testing.Short() {
		rounds = 15
	}
	removed, merged := 0, 0
	for seed := uint64(1); seed <= uint64(rounds); seed++ {
		orig, err := generate(seed, cat, 12)
		require.NoError(t, err, "seed %d", seed)
		text := Print(orig)
		re, err := Parse("gen", []byte(text))
		require.NoError(t, err, "seed %d:\n%s", seed, text)
		require.Equal(t, text, Print(re), "seed %d", seed)

		opt := orig.Clone()
		require.Equal(t, text, Print(opt))
		require.NoError(t, Lower(opt, Options{}), "seed %d:\n%s", seed, text)
		require.NoError(t, VerifyTokens(opt))
		require.NoError(t, Check(opt, cat))
		removed += orig.NumOps() - opt.NumOps()
		merged += strings.Count(text, "= call") - strings.Count(Print(opt), "= call")

		rng := rand.New(rand.NewPCG(seed, 7))
		xs := make([]float32, 4)
		for i := range xs {
			xs[i] = rng.Float32()*4 - 2
		}
		x, s := abi.From(xs), abi.Scalar(rng.Float32()+0.5)
		want, wantLog, err1 := runLogged(t, h, orig, x, s)
		got, gotLog, err2 := runLogged(t, h, opt, x, s)
		require.NoError(t, err1, "seed %d:\n%s", seed, text)
		require.NoError(t, err2, "seed %d:\n%s", seed, Print(opt))
		require.Len(t, got, len(want))
		for i := range want {
			assert.True(t, bytes.Equal(want[i].Data, got[i].Data), "seed %d result %d", seed, i)
		}
		assert.Equal(t, wantLog.chains, gotLog.chains, "seed %d: ordered effects", seed)
		assert.Equal(t, wantLog.unordered, gotLog.unordered, "seed %d: unordered effects", seed)
	}
	// The generator must exercise the passes.
	assert.Positive(t, removed, "DCE removed nothing in any program")
	assert.Positive(t, merged, "CSE merged no call in any program")
}

func TestUnionChains(t *testing.T) {
	assert.Equal(t, []string{"a", "b", "c"}, unionChains([]string{"a", "c"}, []string{"b", "c"}))
	a := []string{"a", "b"}
	assert.Equal(t, a, unionChains(a, []string{"b"}))
	assert.Equal(t, []string{"x"}, unionChains(nil, []string{"x"}))
	assert.Nil(t, unionChains(nil, nil))
}

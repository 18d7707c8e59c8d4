package lowering

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/host"
)

// evalPure compiles and runs a program without callbacks on an empty host.
func evalPure(t *testing.T, src string, inputs ...abi.Tensor) []abi.Tensor {
	t.Helper()
	ctx := context.Background()
	h, err := host.New(ctx, nil)
	require.NoError(t, err)
	defer h.Close(ctx)
	p, err := Compile("k.cbir", []byte(src), StaticCatalog{}, Options{})
	require.NoError(t, err)
	ev, err := NewEvaluator(h, p, EvalOptions{})
	require.NoError(t, err)
	out, err := ev.Run(ctx, inputs...)
	require.NoError(t, err)
	return out
}

func TestKernelsFloat(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	out := evalPure(t, `func @f(%a: f32[4], %b: f32[4]) -> (f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], pred[4], f32[4]) {
  %add = add %a, %b : f32[4]
  %div = div %a, %b : f32[4]
  %max = max %a, %b : f32[4]
  %min = min %a, %b : f32[4]
  %neg = neg %a : f32[4]
  %exp = exp %b : f32[4]
  %lt = compare lt %a, %b : pred[4]
  %sel = select %lt, %a, %b : f32[4]
  return %add, %div, %max, %min, %neg, %exp, %lt, %sel
}`, abi.From([]float32{1, nan, -2, 3}), abi.From([]float32{2, 1, 0, inf}))
	v := func(i int) []float32 { return abi.MustView[float32](out[i]) }
	assert.Equal(t, float32(3), v(0)[0])
	assert.True(t, math.IsNaN(float64(v(0)[1])))
	assert.Equal(t, []float32{0.5}, v(1)[:1])
	assert.True(t, math.IsInf(float64(v(1)[2]), -1), "-2/0 = -inf")
	assert.True(t, math.IsNaN(float64(v(2)[1])), "max propagates NaN")
	assert.True(t, math.IsNaN(float64(v(3)[1])), "min propagates NaN")
	assert.Equal(t, float32(0), v(2)[2])
	assert.Equal(t, float32(-2), v(3)[2])
	assert.Equal(t, []float32{-1, 2, -3}, []float32{v(4)[0], v(4)[2], v(4)[3]}, "neg")
	assert.InDelta(t, math.E*math.E, float64(v(5)[0]), 1e-5)
	assert.Equal(t, []bool{true, false, true, true}, abi.MustView[bool](out[6]), "NaN compares false")
	assert.Equal(t, []float32{1, 1, -2, 3}, v(7))
}

func TestKernelsInteger(t *testing.T) {
	out := evalPure(t, `func @f(%a: s32[4], %b: s32[4], %u: u8[2], %w: u8[2]) -> (s32[4], u8[2], s32[4]) {
  %div = div %a, %b : s32[4]
  %udiv = div %u, %w : u8[2]
  %mx = max %a, %b : s32[4]
  return %div, %udiv, %mx
}`, abi.From([]int32{7, -7, math.MinInt32, 5}), abi.From([]int32{2, 2, -1, 0}),
		abi.From([]uint8{9, 9}), abi.From([]uint8{0, 4}))
	assert.Equal(t, []int32{3, -3, math.MinInt32, -1}, abi.MustView[int32](out[0]), "truncation, MinInt/-1, x/0 = -1")
	assert.Equal(t, []uint8{255, 2}, abi.MustView[uint8](out[1]), "unsigned x/0 = all ones")
	assert.Equal(t, []int32{7, 2, -1, 5}, abi.MustView[int32](out[2]))
}

func TestKernelsConvert(t *testing.T) {
	out := evalPure(t, `func @f(%a: f32[6], %i: s32[3]) -> (s8[6], u8[6], pred[6], f64[3], u16[3]) {
  %s = convert %a : s8[6]
  %u = convert %a : u8[6]
  %p = convert %a : pred[6]
  %d = convert %i : f64[3]
  %w = convert %i : u16[3]
  return %s, %u, %p, %d, %w
}`, abi.From([]float32{1.9, -1.9, 1000, -1000, float32(math.NaN()), float32(math.Copysign(0, -1))}), abi.From([]int32{-1, 70000, 3}))
	assert.Equal(t, []int8{1, -1, 127, -128, 0, 0}, abi.MustView[int8](out[0]), "truncate, saturate, NaN -> 0")
	assert.Equal(t, []uint8{1, 0, 255, 0, 0, 0}, abi.MustView[uint8](out[1]))
	assert.Equal(t, []bool{true, true, true, true, true, false}, abi.MustView[bool](out[2]), "NaN is true, -0 is false")
	assert.Equal(t, []float64{-1, 70000, 3}, abi.MustView[float64](out[3]))
	assert.Equal(t, []uint16{65535, 4464, 3}, abi.MustView[uint16](out[4]), "integer conversion wraps")
}

func TestKernelsShapes(t *testing.T) {
	out := evalPure(t, `func @f(%x: f32[2,3], %y: f32[3,2], %r: f32[3]) -> (f32[2,2], f32[2], f32[3], f32[], f32[2,3], f32[4,3], s32[2]) {
  %d = dot %x, %y : f32[2,2]
  %s1 = reduce_sum %x axes [1] : f32[2]
  %m0 = reduce_max %x axes [0] : f32[3]
  %all = reduce_sum %x axes [0, 1] : f32[]
  %b = broadcast %r dims [1] : f32[2,3]
  %one = reshape %r : f32[1,3]
  %b2 = broadcast %one dims [0, 1] : f32[4,3]
  %ic = constant [5, -7, 2, 9, 0, -1] : s32[2,3]
  %im = reduce_max %ic axes [1] : s32[2]
  return %d, %s1, %m0, %all, %b, %b2, %im
}`, abi.From([]float32{1, 2, 3, 4, 5, 6}, 2, 3), abi.From([]float32{1, 0, 0, 1, 1, 1}, 3, 2), abi.From([]float32{7, 8, 9}))
	f := func(i int) []float32 { return abi.MustView[float32](out[i]) }
	assert.Equal(t, []float32{4, 5, 10, 11}, f(0))
	assert.Equal(t, []float32{6, 15}, f(1))
	assert.Equal(t, []float32{4, 5, 6}, f(2))
	assert.Equal(t, []float32{21}, f(3))
	assert.Equal(t, []float32{7, 8, 9, 7, 8, 9}, f(4))
	assert.Equal(t, []float32{7, 8, 9, 7, 8, 9, 7, 8, 9, 7, 8, 9}, f(5))
	assert.Equal(t, []int32{5, 9}, abi.MustView[int32](out[6]))
}

func TestEvalInputsChecked(t *testing.T) {
	ctx := context.Background()
	h, err := host.New(ctx, nil)
	require.NoError(t, err)
	defer h.Close(ctx)
	p, err := Compile("k", []byte("func @f(%x: f32[2]) -> f32[2] {\n  return %x\n}\n"), StaticCatalog{}, Options{})
	require.NoError(t, err)
	ev, err := NewEvaluator(h, p, EvalOptions{})
	require.NoError(t, err)
	_, err = ev.Run(ctx, abi.From([]float32{1, 2, 3}))
	assert.EqualError(t, err, "input 0 (%x): expected f32[2], got f32[3]")
	_, err = ev.Run(ctx)
	assert.EqualError(t, err, "@f takes 1 inputs, got 0")

	// A program naming a callback the host does not have is refused.
	q, err := Compile("k", []byte("func @f(%x: f32[2], %g: f32[]) -> f32[2] {\n  %y = call @scale(%x, %g) : f32[2]\n  return %y\n}\n"), testCat, Options{})
	require.NoError(t, err)
	_, err = NewEvaluator(h, q, EvalOptions{})
	assert.ErrorContains(t, err, `k:2:8: call @scale: no callback "scale"`)
}

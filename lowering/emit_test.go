package lowering

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func emitText(t *testing.T, src string) string {
	t.Helper()
	p := compileText(t, src, Options{})
	out, err := Emit(p, testCat)
	require.NoError(t, err)
	return out
}

// TestEmitCaseWhileCaptures checks the forms the examples do not reach: an
// s32 cond as stablehlo.case, a loop whose body captures outer values (they
// become extra loop-carried values passed through by the body), constants
// nested by shape with non-finite elements, and the attributes of pure and
// ordered calls.
func TestEmitCaseWhileCaptures(t *testing.T) {
	out := emitText(t, `func @f(%x: f32[2,2], %k: s32[], %g: f32[]) -> (f32[2,2], f32[2,2]) {
  %c = constant [1, 2.5, nan, -inf] : f32[2,2]
  %r = cond %k {
    %a = add %x, %c : f32[2,2]
    yield %a
  } else {
    %f = reshape %x : f32[4]
    %s = io_call @scale(%f, %g) ordered chain "c" : f32[4]
    %s2 = reshape %s : f32[2,2]
    yield %s2
  } : f32[2,2]
  %zero = constant 0 : s32[]
  %i, %w = while(%zero, %r) cond(%j, %v) {
    %lim = constant 2 : s32[]
    %go = compare lt %j, %lim : pred[]
    yield %go
  } do(%j, %v) {
    %one = constant 1 : s32[]
    %j1 = add %j, %one : s32[]
    %v1 = add %v, %c : f32[2,2]
    %m = call @matmul(%v1, %x) : f32[2,2]
    yield %j1, %m
  } : s32[], f32[2,2]
  return %w, %r
}`)
	for _, w := range []string{
		`stablehlo.constant dense<[[1.0e+00, 2.5e+00], [0x7FC00000, 0xFF800000]]> : tensor<2x2xf32>`,
		`"stablehlo.case"(%arg1) ({`,
		// Row-major layouts as JAX's ffi_call passes them; a token's (and a
		// scalar's) is empty.
		`stablehlo.custom_call @callbox(%4, %arg2, %0) {`,
		`chain = "c"}, operand_layouts = [dense<0> : tensor<1xindex>, dense<> : tensor<0xindex>, dense<> : tensor<0xindex>], ` +
			`result_layouts = [dense<0> : tensor<1xindex>, dense<> : tensor<0xindex>]} : (tensor<4xf32>, tensor<f32>, !stablehlo.token) -> (tensor<4xf32>, !stablehlo.token)`,
		`operand_layouts = [dense<[1, 0]> : tensor<2xindex>, dense<[1, 0]> : tensor<2xindex>], result_layouts = [dense<[1, 0]> : tensor<2xindex>]} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>`,
		`}) : (tensor<i32>) -> (tensor<2x2xf32>, !stablehlo.token)`,
		`"stablehlo.after_all"() : () -> !stablehlo.token`,
	} {
		assert.Contains(t, out, w)
	}
	// The pure call has no side effect and no chain.
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "cb1-cccc") && strings.Contains(line, "custom_call") {
			assert.NotContains(t, line, "has_side_effect")
			assert.NotContains(t, line, "chain")
		}
	}
	// No region refers to a value defined outside it: in the loop, the
	// captured %c and %x are block arguments.
	whileAt := strings.Index(out, `"stablehlo.while"`)
	require.Positive(t, whileAt)
	loop := out[whileAt:]
	loop = loop[:strings.Index(loop, "}) : (")]
	header := out[whileAt : whileAt+strings.Index(out[whileAt:], "\n")]
	assert.Regexp(t, `"stablehlo.while"\(%\d+, %\d+#0, %1, %arg0\)`, header, "carried: the counter, the value, then the captures %c and %x")
	assert.NotContains(t, loop[len(header):], "%arg0", "the body uses its block argument, not %x")
}

// TestLayouts: the minor-to-major order of a row-major array, per rank, as
// MLIR prints an index vector.
func TestLayouts(t *testing.T) {
	assert.Equal(t, "[]", layouts(nil))
	assert.Equal(t, "[dense<> : tensor<0xindex>, dense<0> : tensor<1xindex>, dense<[1, 0]> : tensor<2xindex>, dense<[3, 2, 1, 0]> : tensor<4xindex>]",
		layouts([]int{0, 1, 2, 4}))
}

func TestEmitRejectsUnthreaded(t *testing.T) {
	p, err := Parse("u", []byte(`func @f(%x: f32[4], %g: f32[]) -> f32[4] {
  %y = io_call @scale(%x, %g) ordered : f32[4]
  return %y
}`))
	require.NoError(t, err)
	require.NoError(t, Check(p, testCat))
	_, err = Emit(p, testCat)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "tokens are not threaded")
}

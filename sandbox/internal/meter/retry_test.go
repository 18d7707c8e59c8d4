package meter

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
)

// TestRetryShapes runs loops the retry shape renumbers labels around
// (results, br_table and br out of nested loops, a branch to the
// function's label) and the ones it leaves inline (parameters, exception
// handlers): each computes what the plain module does and charges exactly
// what the inline shape charges, with a budget that runs out inside the
// loops many times (a refill every 50 units).
func TestRetryShapes(t *testing.T) {
	cases := map[string]string{
		"result": `(func (export "run") (param i32) (result i32) (local $i i32)
  (loop $l (result i32)
    (local.set $i (i32.add (local.get $i) (i32.const 1)))
    (br_if $l (i32.lt_u (local.get $i) (local.get 0)))
    (i32.mul (local.get $i) (i32.const 3))))`,
		"nested br_table": `(func (export "run") (param i32) (result i32) (local $i i32) (local $j i32) (local $s i32)
  (block $out
    (loop $a
      (local.set $j (i32.const 0))
      (block $next
        (loop $b
          (local.set $s (i32.add (local.get $s) (local.get $j)))
          (local.set $j (i32.add (local.get $j) (i32.const 1)))
          (br_if $next (i32.gt_u (local.get $j) (i32.const 30)))
          (br_if $out (i32.gt_u (local.get $s) (i32.const 100000)))
          (br_table $b $next $b (i32.rem_u (i32.add (local.get $s) (local.get $i)) (i32.const 37)))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $a (i32.lt_u (local.get $i) (local.get 0)))))
  (local.get $s))`,
		"return from loop": `(func (export "run") (param i32) (result i32) (local $i i32)
  (block $b (result i32)
    (loop $l
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if 2 (i32.mul (local.get $i) (i32.const 2)) (i32.ge_u (local.get $i) (local.get 0)))
      (br $l))
    (i32.const 0)))`,
		"params": `(type $p (func (param i32) (result i32)))
  (func (export "run") (param i32) (result i32)
  (local.get 0)
  (loop $l (type $p)
    (i32.sub (i32.const 1))
    (local.tee 0)
    (br_if $l (i32.gt_s (local.get 0) (i32.const 0)))
    (local.get 0)
    (drop))
  (global.set $g (i32.const 5)))`,
	}
	ctx := context.Background()
	m := &meterHost{}
	rt := meterRuntime(t, m)
	defer rt.Close(ctx)
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			plain, err := wat.Compile("(module " + shapeGlue + body + ")")
			require.NoError(t, err)
			want, err := run(ctx, rt, plain, 400, nil)
			require.NoError(t, err)
			used := map[bool]int64{}
			for _, inline := range []bool{false, true} {
				metered, err := Instrument(plain, Options{Meter: true, StackLimit: 1 << 20, inline: inline})
				require.NoError(t, err)
				m.reset(50)
				got, err := run(ctx, rt, metered, 400, m)
				require.NoError(t, err)
				require.Equal(t, want.result, got.result, "inline %v", inline)
				require.Greater(t, m.refills, 3, "inline %v: the budget ran out inside the loops", inline)
				used[inline] = m.used(got.budget)

				m.reset(0)
				m.grant = used[inline] - 1
				_, err = run(ctx, rt, metered, 400, m)
				require.True(t, errors.Is(err, errBudget), "inline %v: one unit short must stop: %v", inline, err)
			}
			require.Equal(t, used[true], used[false], "both shapes charge the same")
		})
	}
}

// TestRetryShapeLoops checks that a loop in the retry shape holds no call:
// the refill sits in the added outer loop, before the original loop.
func TestRetryShapeLoops(t *testing.T) {
	src := `(module (func (export "run") (param i32) (loop $l (br_if $l (local.tee 0 (i32.sub (local.get 0) (i32.const 1)))))))`
	out, err := Instrument(wat.Must(src), Options{Meter: true, StackLimit: 1 << 20, noChunks: true})
	require.NoError(t, err)
	// Two loops now: the retry loop (its refill, then the reads of the
	// loop's locals), then the original, which holds no call.
	code := string(out)
	i := indexAfter(code, "\x03\x40\x02\x40") // loop; block
	require.GreaterOrEqual(t, i, 0, "retry loop and its refill block")
	j := indexAfter(code[i:], "\x03\x40") // the next loop: the original
	require.GreaterOrEqual(t, j, 0, "the original loop")
	inner := code[i+j:]
	k := indexAfter(inner, "\x0b\x0b") // the loop's end and the retry loop's
	require.GreaterOrEqual(t, k, 0)
	require.NotContains(t, inner[:k], "\x10", "no call inside the original loop")
}

func indexAfter(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i + len(sub)
		}
	}
	return -1
}

package meter

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"

	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
)

// TestChunkShapes runs counted loops the chunk shape takes (each back-edge
// form, steps up and down, a loop tested at its top, branches and returns
// out of the loop, calls and bulk operations that cut a chunk) and loops it
// must leave to the per-iteration check (a branch out that carries a
// value, a bound or counter written in the body, a step that is not a
// power of two, a test with an else or left by its own label). Whatever the shape, each computes what the plain
// module does and charges exactly what the inline shape charges, with
// refills of 50 units (every chunk cut short by the budget), of 3,000
// (chunks shortened near each refill) and of 2^40 (full chunks); given
// exactly the fuel it used it asks for no refill, and given one unit less
// it stops.
func TestChunkShapes(t *testing.T) {
	type loop struct {
		body    string
		chunked bool
	}
	// run(n) with n = 400 in every case; $i counts, $s sums.
	const head = `(func (export "run") (param $n i32) (result i32) (local $i i32) (local $s i32) (local $k i32)`
	cases := map[string]loop{
		"bound first, up by one": {head + `
  (loop $l
    (local.set $s (i32.add (local.get $s) (i32.mul (local.get $i) (local.get $i))))
    (br_if $l (i32.ne (local.get $n) (local.tee $i (i32.add (local.get $i) (i32.const 1))))))
  (local.get $s))`, true},
		"bound second, down by sixteen": {head + `
  (local.set $i (i32.mul (local.get $n) (i32.const 16)))
  (loop $l
    (i32.store (i32.and (local.get $i) (i32.const 0xfffc)) (local.get $i))
    (br_if $l (i32.ne (local.tee $i (i32.sub (local.get $i) (i32.const 16))) (local.get $k))))
  (local.get $i))`, true},
		"to zero, down by four": {head + `
  (local.set $i (i32.shl (local.get $n) (i32.const 2)))
  (loop $l
    (local.set $s (i32.xor (local.get $s) (local.get $i)))
    (br_if $l (local.tee $i (i32.add (local.get $i) (i32.const -4)))))
  (local.get $s))`, true},
		"wrapping past zero, up by two": {head + `
  (local.set $i (i32.const -400))
  (local.set $k (i32.const 400))
  (loop $l
    (local.set $s (i32.add (local.get $s) (local.get $i)))
    (br_if $l (i32.ne (local.tee $i (i32.add (local.get $i) (i32.const 2))) (local.get $k))))
  (local.get $s))`, true},
		"conditional exit": {head + `
  (block $out
    (loop $l
      (local.set $s (i32.add (local.get $s) (local.get $i)))
      (br_if $out (i32.gt_u (local.get $s) (i32.const 50000)))
      (br_if $l (i32.ne (local.get $n) (local.tee $i (i32.add (local.get $i) (i32.const 1)))))))
  (i32.add (local.get $s) (i32.mul (local.get $i) (i32.const 1000))))`, true},
		"branch out of a nested block": {head + `
  (block $out
    (loop $l
      (if (i32.eq (local.get $i) (i32.const 333))
        (then (global.set $g (local.get $s)) (br $out)))
      (local.set $s (i32.add (local.get $s) (i32.const 3)))
      (br_if $l (i32.ne (local.get $n) (local.tee $i (i32.add (local.get $i) (i32.const 1)))))))
  (local.get $s))`, true},
		"return from the loop": {head + `
  (loop $l
    (local.set $s (i32.add (local.get $s) (local.get $i)))
    (if (i32.eq (local.get $i) (i32.const 377)) (then (return (local.get $s))))
    (br_if $l (i32.ne (local.get $n) (local.tee $i (i32.add (local.get $i) (i32.const 1))))))
  (i32.const -1))`, true},
		"two exits, one nested, inside an outer loop": {head + `
  (local $j i32)
  (block $all
    (loop $outer
      (local.set $i (i32.const 0))
      (block $out
        (loop $l
          (local.set $s (i32.add (local.get $s) (local.get $i)))
          (if (i32.eq (local.get $i) (i32.add (local.get $j) (i32.const 7)))
            (then (br_if $out (i32.and (local.get $j) (i32.const 1)))))
          (br_if $all (i32.gt_u (local.get $s) (i32.const 200000)))
          (br_if $l (i32.ne (local.get $n) (local.tee $i (i32.add (local.get $i) (i32.const 1)))))))
      (local.set $j (i32.add (local.get $j) (i32.const 1)))
      (br_if $outer (i32.lt_u (local.get $j) (i32.const 40)))))
  (i32.add (local.get $s) (i32.mul (local.get $j) (i32.const 1000000))))`, true},
		"exit carrying a value": {head + `
  (block $out (result i32)
    (loop $l
      (local.set $s (i32.add (local.get $s) (local.get $i)))
      (br_if $out (local.get $s) (i32.gt_u (local.get $s) (i32.const 50000)))
      (drop)
      (br_if $l (i32.ne (local.get $n) (local.tee $i (i32.add (local.get $i) (i32.const 1))))))
    (i32.const 0)))`, false},
		"a call in the body, which cuts the chunk": {`(func $sq (param i32) (result i32) (i32.mul (local.get 0) (local.get 0)))` + head + `
  (loop $l
    (local.set $s (i32.add (local.get $s) (call $sq (local.get $i))))
    (br_if $l (i32.ne (local.get $n) (local.tee $i (i32.add (local.get $i) (i32.const 1))))))
  (local.get $s))`, true},
		"memory.fill in the body, which cuts the chunk": {head + `
  (loop $l
    (if (i32.eqz (i32.rem_u (local.get $i) (i32.const 50)))
      (then (memory.fill (local.get $i) (local.get $i) (i32.const 300))))
    (local.set $s (i32.add (local.get $s) (i32.load8_u (local.get $i))))
    (br_if $l (i32.ne (local.get $n) (local.tee $i (i32.add (local.get $i) (i32.const 1))))))
  (local.get $s))`, true},
		"tested at the top (AssemblyScript's for)": {head + `
  (loop $l
    (if (i32.lt_s (local.get $i) (local.get $n))
      (then
        (local.set $s (i32.add (local.get $s) (i32.mul (local.get $i) (i32.const 3))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $l))))
  (local.get $s))`, true},
		"tested at the top, none left": {head + `
  (local.set $i (i32.const 500))
  (loop $l
    (if (i32.lt_u (local.get $i) (local.get $n))
      (then
        (local.set $s (i32.add (local.get $s) (local.get $i)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $l))))
  (i32.add (local.get $s) (local.get $i)))`, true},
		"tested at the top, a checked access calling out on a cold path, an exit": {
			`(func $check (param i32) (result i32) (if (result i32) (i32.ge_u (local.get 0) (i32.const 1000)) (then (unreachable)) (else (local.get 0))))` + head + `
  (block $out
    (loop $l
      (if (i32.lt_u (local.get $i) (local.get $n))
        (then
          (if (i32.eqz (i32.rem_u (local.get $i) (i32.const 97)))
            (then (local.set $s (i32.add (local.get $s) (call $check (local.get $i))))))
          (br_if $out (i32.eq (local.get $i) (i32.const 388)))
          (local.set $s (i32.add (local.get $s) (local.get $i)))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br $l)))))
  (i32.add (local.get $s) (local.get $i)))`, true},
		"tested at the top with an else": {head + `
  (loop $l
    (if (i32.lt_s (local.get $i) (local.get $n))
      (then
        (local.set $s (i32.add (local.get $s) (local.get $i)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $l))
      (else (global.set $g (i32.const 9)))))
  (local.get $s))`, false},
		"tested at the top, leaving by the test's own label": {head + `
  (loop $l
    (if (i32.lt_s (local.get $i) (local.get $n))
      (then
        (local.set $s (i32.add (local.get $s) (local.get $i)))
        (br_if 0 (i32.eq (local.get $i) (i32.const 300)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $l))))
  (i32.add (local.get $s) (local.get $i)))`, false},
		"bound written in the body": {head + `
  (local.set $k (i32.const 800))
  (loop $l
    (local.set $k (i32.sub (local.get $k) (i32.const 1)))
    (br_if $l (i32.ne (local.get $k) (local.tee $i (i32.add (local.get $i) (i32.const 1))))))
  (local.get $i))`, false},
		"counter written in the body": {head + `
  (loop $l
    (if (i32.eq (local.get $i) (i32.const 10)) (then (local.set $i (i32.const 20))))
    (br_if $l (i32.ne (local.get $n) (local.tee $i (i32.add (local.get $i) (i32.const 1))))))
  (local.get $i))`, false},
		"a step of three": {head + `
  (local.set $k (i32.mul (local.get $n) (i32.const 3)))
  (loop $l
    (local.set $s (i32.add (local.get $s) (local.get $i)))
    (br_if $l (i32.ne (local.get $k) (local.tee $i (i32.add (local.get $i) (i32.const 3))))))
  (local.get $s))`, false},
	}
	ctx := context.Background()
	m := &meterHost{}
	rt := meterRuntime(t, m)
	defer rt.Close(ctx)
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			plain, err := wat.Compile("(module " + shapeGlue + c.body + ")")
			require.NoError(t, err)
			want, err := run(ctx, rt, plain, 400, nil)
			require.NoError(t, err)
			opts := Options{Meter: true, StackLimit: 1 << 20}
			chunked, err := Instrument(plain, opts)
			require.NoError(t, err)
			opts.noChunks = true
			perIteration, err := Instrument(plain, opts)
			require.NoError(t, err)
			require.Equal(t, c.chunked, string(chunked) != string(perIteration), "does the loop take the chunk shape")
			inline, err := Instrument(plain, Options{Meter: true, StackLimit: 1 << 20, inline: true})
			require.NoError(t, err)

			m.reset(1 << 40)
			got, err := run(ctx, rt, inline, 400, m)
			require.NoError(t, err)
			require.Equal(t, want.result, got.result)
			used := m.used(got.budget)
			for _, step := range []int64{50, 3000, 1 << 40} {
				m.reset(step)
				got, err := run(ctx, rt, chunked, 400, m)
				require.NoError(t, err, "refills of %d", step)
				require.Equal(t, want.result, got.result, "refills of %d", step)
				require.Equal(t, used, m.used(got.budget), "refills of %d: the inline shape's charge", step)
				if step == 50 && name != "tested at the top, none left" {
					require.Greater(t, m.refills, 20, "the budget ran out inside the loop")
				}
			}
			m.reset(0)
			m.grant = used
			got, err = run(ctx, rt, chunked, 400, m)
			require.NoError(t, err)
			require.Equal(t, 0, m.refills, "its exact budget needs no refill")
			require.Zero(t, got.budget)
			m.reset(0)
			m.grant = used - 1
			_, err = run(ctx, rt, chunked, 400, m)
			require.True(t, errors.Is(err, errBudget), "one unit short must stop: %v", err)
		})
	}
}

// TestChunkRefillPoints checks that the chunk shape asks for more budget
// at the same points as the inline shape, with the same counter: the
// refill sees the same sequence of values, so a timeout or a fuel limit
// stops the guest after the same work.
func TestChunkRefillPoints(t *testing.T) {
	src := `(module (memory (export "memory") 1) (global (export "g") (mut i32) (i32.const 0))
  (func (export "run") (param $n i32) (result i32) (local $i i32) (local $s i32)
    (block $out
      (loop $l
        (local.set $s (i32.add (local.get $s) (i32.rem_u (local.get $i) (i32.const 7))))
        (br_if $out (i32.eq (local.get $s) (i32.const 90000)))
        (br_if $l (i32.ne (local.get $n) (local.tee $i (i32.add (local.get $i) (i32.const 1)))))))
    (local.get $s)))`
	plain := wat.Must(src)
	ctx := context.Background()
	seen := map[bool][]int64{}
	for _, inline := range []bool{true, false} {
		rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
		var counters []int64
		_, err := rt.NewHostModuleBuilder(RefillModule).
			NewFunctionBuilder().WithFunc(func(_ context.Context, b int64) int64 {
			counters = append(counters, b)
			return b + 777
		}).Export(RefillName).
			NewFunctionBuilder().WithFunc(func(context.Context) {}).Export(OverflowName).
			Instantiate(ctx)
		require.NoError(t, err)
		metered, err := Instrument(plain, Options{Meter: true, StackLimit: 1 << 20, inline: inline})
		require.NoError(t, err)
		mod, err := rt.Instantiate(ctx, metered)
		require.NoError(t, err)
		res, err := mod.ExportedFunction("run").Call(ctx, 5000)
		require.NoError(t, err)
		want := 0
		for i := range 5000 {
			want += i % 7
		}
		require.Equal(t, uint64(want), res[0], "the sum of i mod 7 over 5,000 iterations")
		seen[inline] = counters
		require.NoError(t, rt.Close(ctx))
	}
	require.Greater(t, len(seen[true]), 50, "refills inside the loop")
	require.Equal(t, seen[true], seen[false], "the refills' counters, inline then chunked")
}

// TestChunkBlocksWithinMaxBlocks checks that the chunk shape's extra
// blocks come out of Options.MaxBlocks: with room for two, two of five
// counted loops take it and the others keep the retry shape.
func TestChunkBlocksWithinMaxBlocks(t *testing.T) {
	loop := `(local.set $i (i32.const 0)) (loop $l (local.set $s (i32.add (local.get $s) (local.get $i)))
    (br_if $l (i32.ne (local.get $n) (local.tee $i (i32.add (local.get $i) (i32.const 1))))))`
	src := `(module (func (export "run") (param $n i32) (result i32) (local $i i32) (local $s i32) ` +
		strings.Repeat(loop, 5) + ` (local.get $s)))`
	chunks := func(maxBlocks int) int {
		out, err := Instrument(wat.Must(src), Options{Meter: true, StackLimit: 1 << 20, MaxBlocks: maxBlocks})
		require.NoError(t, err)
		// Each chunk's budget cut ends in i64.div_u; i32.wrap_i64; end.
		return strings.Count(string(out), "\x80\xa7\x0b")
	}
	require.Equal(t, 5, chunks(0), "no limit: every loop")
	// 5 blocks and 5 loops: the retry shape needs 5 + 2*5; each chunk two more.
	require.Equal(t, 2, chunks(5+2*5+2*2+1))
	require.Equal(t, 0, chunks(5+2*5+1))
}

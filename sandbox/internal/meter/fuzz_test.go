package meter

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/seed4b3e0ccb/callbox/internal/testing/wat"
)

// FuzzInstrument checks the rewrite against the module it rewrote. The fuzz
// input drives a generator of small valid modules (nested blocks, counted
// loops, if/else, br_table, select, direct and indirect calls, globals,
// loads, stores and memory.grow up to the declared maximum) that always
// terminate. For each module:
//
//   - the instrumented module computes exactly what the plain one does
//     (result, global and memory), given all the budget it asks for;
//   - the budget it used (U) is deterministic: given exactly U it runs to
//     the end without asking for more and leaves 0;
//   - given U-1 it stops at its budget: the refill is called, and here
//     refuses, so the call fails.
func FuzzInstrument(f *testing.F) {
	for _, seed := range []string{
		"",
		"\x07\x03\x02\x01\x00\x05",
		"\x04\x04\x07\x02\x0b\x0a\x03\x01\x02\x09\x06",
		"\x0c\x0c\x0c\x07\x07\x07\x0b\x0b\x01\x01\x01\x01",
		"\x0a\x0a\x0a\x0a\x0d\x0d\x0e\x0e\x08\x08\x04\x04\x03\x03\x02\x02",
	} {
		f.Add([]byte(seed), uint32(12345))
	}
	ctx := context.Background()
	m := &meterHost{}
	rt := meterRuntime(f, m)
	defer rt.Close(ctx)
	f.Fuzz(func(t *testing.T, prog []byte, arg uint32) {
		src := genModule(prog)
		plain, err := wat.Compile(src)
		if err != nil {
			t.Fatalf("generated module does not compile: %v\n%s", err, src)
		}
		metered, err := Instrument(plain, Options{Meter: true, StackLimit: 1 << 20, GrowHook: true})
		if err != nil {
			t.Fatalf("Instrument: %v\n%s", err, src)
		}
		want, err := run(ctx, rt, plain, arg, nil)
		if err != nil {
			t.Fatalf("plain module failed: %v\n%s", err, src)
		}

		// All the budget it asks for.
		m.reset(1 << 62)
		got, err := run(ctx, rt, metered, arg, m)
		if err != nil {
			t.Fatalf("metered module failed: %v\n%s", err, src)
		}
		if got.result != want.result {
			t.Fatalf("metered module computed %+v, plain %+v\n%s", got.result, want.result, src)
		}
		used := m.used(got.budget)
		if used <= 0 {
			t.Fatalf("metered module charged %d", used)
		}

		// The inline shape (every check inside its loop) charges the same.
		inline, err := Instrument(plain, Options{Meter: true, StackLimit: 1 << 20, GrowHook: true, inline: true})
		if err != nil {
			t.Fatalf("Instrument inline: %v\n%s", err, src)
		}
		m.reset(1 << 62)
		if got, err := run(ctx, rt, inline, arg, m); err != nil || got.result != want.result || m.used(got.budget) != used {
			t.Fatalf("inline shape: err %v, %+v (want %+v), used %d (retry shape %d)\n%s", err, got.result, want.result, m.used(got.budget), used, src)
		}

		// With NaN canonicalization (deterministic mode) added, the same
		// result and the same charge: the canonicalizing code is free.
		canon, err := Instrument(plain, Options{Meter: true, StackLimit: 1 << 20, GrowHook: true, CanonicalNaN: true})
		if err != nil {
			t.Fatalf("Instrument with CanonicalNaN: %v\n%s", err, src)
		}
		m.reset(1 << 62)
		if got, err := run(ctx, rt, canon, arg, m); err != nil || got.result != want.result || m.used(got.budget) != used {
			t.Fatalf("with CanonicalNaN: err %v, %+v (want %+v), used %d (without %d)\n%s", err, got.result, want.result, m.used(got.budget), used, src)
		}

		// With the profiler's reports, the same result and the same
		// charge; every entry is matched by an exit, and the last exit
		// (the export's) reports all the fuel used.
		prof, err := Instrument(plain, Options{Meter: true, StackLimit: 1 << 20, GrowHook: true, Profile: true})
		if err != nil {
			t.Fatalf("Instrument with Profile: %v\n%s", err, src)
		}
		m.reset(1 << 62)
		got, err = run(ctx, rt, prof, arg, m)
		if err != nil || got.result != want.result || m.used(got.budget) != used {
			t.Fatalf("with Profile: err %v, %+v (want %+v), used %d (without %d)\n%s", err, got.result, want.result, m.used(got.budget), used, src)
		}
		if m.enters == 0 || m.depth != 0 || m.used(m.lastExit) != used || m.badOrder {
			t.Fatalf("with Profile: %d entries, depth %d after the call, last exit at %d of %d used, fuel going backwards %v\n%s",
				m.enters, m.depth, m.used(m.lastExit), used, m.badOrder, src)
		}

		// Exactly that budget: no refill, nothing left.
		m.reset(0)
		m.grant = used
		got, err = run(ctx, rt, metered, arg, m)
		if err != nil || m.refills != 0 || got.budget != 0 || got.result != want.result {
			t.Fatalf("with its exact budget %d: err %v, %d refills, %d left, %+v (want %+v)\n%s", used, err, m.refills, got.budget, got.result, want.result, src)
		}

		// One less: it stops at its budget.
		m.reset(0)
		m.grant = used - 1
		_, err = run(ctx, rt, metered, arg, m)
		if !errors.Is(err, errBudget) || m.refills != 1 {
			t.Fatalf("with budget %d of the %d it needs: err %v, %d refills; want a stop at the budget\n%s", used-1, used, err, m.refills, src)
		}
	})
}

// shapeGlue is what the shape tests' modules declare beside their
// functions: the memory and the global run reads.
const shapeGlue = `(memory (export "memory") 1) (global $g (export "g") (mut i32) (i32.const 0))`

// meterRuntime is an interpreter runtime with m as the meter's imports.
func meterRuntime(tb testing.TB, m *meterHost) wazero.Runtime {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	if _, err := rt.NewHostModuleBuilder(RefillModule).
		NewFunctionBuilder().WithFunc(m.refill).Export(RefillName).
		NewFunctionBuilder().WithFunc(func(context.Context) { panic(errOverflow) }).Export(OverflowName).
		NewFunctionBuilder().WithFunc(func(context.Context, int32) { m.denied++ }).Export(GrowDeniedName).
		NewFunctionBuilder().WithFunc(m.enter).Export(ProfileEnterName).
		NewFunctionBuilder().WithFunc(m.exit).Export(ProfileExitName).
		Instantiate(ctx); err != nil {
		tb.Fatal(err)
	}
	return rt
}

var (
	errBudget   = errors.New("budget spent")
	errOverflow = errors.New("stack overflow")
)

// meterHost is the host side of the meter for the fuzz test. refill grants
// step more each time (0: refuses, stopping the guest).
type meterHost struct {
	grant   int64 // the initial budget
	step    int64
	granted int64 // total granted, the initial budget included
	refills int
	denied  int
	// the profiler's reports
	enters, depth int
	lastExit      int64
	lastUsed      int64
	badOrder      bool
}

func (m *meterHost) enter(_ context.Context, _ int32, budget int64) {
	m.enters++
	m.depth++
	m.report(budget)
}

func (m *meterHost) exit(_ context.Context, budget int64) {
	m.depth--
	m.lastExit = budget
	m.report(budget)
}

// report notes a report's fuel used, which never goes backwards.
func (m *meterHost) report(budget int64) {
	if u := m.used(budget); u < m.lastUsed {
		m.badOrder = true
	} else {
		m.lastUsed = u
	}
}

func (m *meterHost) reset(step int64) {
	*m = meterHost{step: step}
}

func (m *meterHost) refill(_ context.Context, budget int64) int64 {
	m.refills++
	if m.step == 0 {
		panic(errBudget)
	}
	m.granted += m.step
	return budget + m.step
}

// used is the budget consumed, given what was left in the global.
func (m *meterHost) used(left int64) int64 { return m.granted - left }

type outcome struct {
	result struct {
		ret    uint32
		global uint32
		mem    uint32 // CRC of memory
		pages  uint32
	}
	budget int64 // left in the meter's global
}

// run instantiates wasm and calls run(arg). With a meter it sets the
// budget global to m.grant (or a first slice of m.step) and the stack
// counter to minus 1 MiB.
func run(ctx context.Context, rt wazero.Runtime, wasm []byte, arg uint32, m *meterHost) (outcome, error) {
	var o outcome
	mod, err := rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		return o, err
	}
	defer mod.Close(ctx)
	var budget api.MutableGlobal
	if m != nil {
		budget = mod.ExportedGlobal(BudgetExport).(api.MutableGlobal)
		if m.grant == 0 && m.step > 0 {
			m.grant = m.step
		}
		m.granted = m.grant
		budget.Set(uint64(m.grant))
		stack := -(int64(1) << 20)
		mod.ExportedGlobal(StackExport).(api.MutableGlobal).Set(uint64(stack))
	}
	res, err := mod.ExportedFunction("run").Call(ctx, uint64(arg))
	if err != nil {
		if errors.Is(err, errBudget) || strings.Contains(err.Error(), errBudget.Error()) {
			return o, errBudget
		}
		return o, err
	}
	o.result.ret = uint32(res[0])
	o.result.global = uint32(mod.ExportedGlobal("g").Get())
	mem, _ := mod.Memory().Read(0, mod.Memory().Size())
	o.result.mem = crc32.ChecksumIEEE(mem)
	o.result.pages = mod.Memory().Size() / 65536
	if budget != nil {
		o.budget = int64(budget.Get())
	}
	return o, nil
}

// gen turns fuzz bytes into a module. Every choice reads one byte; when the
// bytes run out every choice is 0 (a constant), so generation ends.
type gen struct {
	b     []byte
	fn    int // index of the function being generated
	depth int
	loops int // counted loops open in this function
	calls int // calls written so far
	sb    strings.Builder
}

const (
	genFuncs    = 4
	genMaxDepth = 4
	genMaxLoops = 2
)

func (g *gen) next() int {
	if len(g.b) == 0 {
		return 0
	}
	v := int(g.b[0])
	g.b = g.b[1:]
	return v
}

func (g *gen) w(format string, args ...any) { fmt.Fprintf(&g.sb, format, args...) }

// expr writes an expression leaving one i32.
func (g *gen) expr() {
	c := g.next()
	if g.depth >= genMaxDepth {
		c %= 2
	}
	g.depth++
	defer func() { g.depth-- }()
	switch c % 16 {
	case 0:
		g.w("(i32.const %d)", int32(g.next()*2654435761))
	case 1:
		g.w("(local.get %d)", g.next()%4)
	case 2:
		ops := []string{"add", "sub", "mul", "xor", "and", "or", "shl", "shr_u", "rotl", "lt_u", "eq"}
		g.w("(i32.%s ", ops[g.next()%len(ops)])
		g.expr()
		g.expr()
		g.w(")")
	case 3:
		g.w("(i32.load offset=%d (i32.and ", 4*(g.next()%4))
		g.expr()
		g.w(" (i32.const 0xfff0)))")
	case 4:
		if g.fn == 0 {
			g.w("(i32.const 4)")
			return
		}
		g.calls++
		g.w("(call $f%d ", g.next()%g.fn)
		g.expr()
		g.expr()
		g.w(")")
	case 5:
		g.w("(block (result i32) ")
		g.stmts()
		g.expr()
		g.w(")")
	case 6:
		g.w("(if (result i32) ")
		g.expr()
		g.w(" (then ")
		g.stmts()
		g.expr()
		g.w(") (else ")
		g.expr()
		g.w("))")
	case 7:
		if g.loops >= genMaxLoops {
			g.w("(global.get $g)")
			return
		}
		l := g.loops
		g.loops++
		g.w("(block (result i32) (local.set $c%d (i32.const %d)) (loop $l%d ", l, 1+g.next()%3, l)
		g.stmts()
		g.w("(br_if $l%d (local.tee $c%d (i32.sub (local.get $c%d) (i32.const 1))))) ", l, l, l)
		g.expr()
		g.w(")")
		g.loops--
	case 8:
		g.w("(select ")
		g.expr()
		g.expr()
		g.expr()
		g.w(")")
	case 9:
		g.w("(global.get $g)")
	case 10:
		if g.fn == 0 {
			g.w("(i32.const 10)")
			return
		}
		g.calls++
		g.w("(call_indirect (type $t) ")
		g.expr()
		g.expr()
		g.w(" (i32.rem_u ")
		g.expr()
		g.w(" (i32.const %d)))", g.fn)
	case 11:
		g.w("(block $a (result i32) (drop (block $b (result i32) (br_table $a $b $a ")
		g.expr()
		g.expr()
		g.w("))) (i32.const 11))")
	case 12:
		g.w("(local.tee %d ", 2+g.next()%2)
		g.expr()
		g.w(")")
	case 13:
		g.w("(memory.grow (i32.const %d))", g.next()%3)
	case 14:
		g.w("(block $x (result i32) (br_if $x ")
		g.expr()
		g.expr()
		g.w(") (drop) (i32.const 14))")
	default:
		g.w("(memory.size)")
	}
}

// stmts writes zero to two statements.
func (g *gen) stmts() {
	for n := g.next() % 3; n > 0; n-- {
		switch g.next() % 5 {
		case 4:
			g.countedLoop()
		case 0:
			g.w("(local.set %d ", 2+g.next()%2)
			g.expr()
			g.w(") ")
		case 1:
			g.w("(i32.store (i32.and ")
			g.expr()
			g.w(" (i32.const 0xfff0)) ")
			g.expr()
			g.w(") ")
		case 2:
			g.w("(global.set $g ")
			g.expr()
			g.w(") ")
		default:
			g.w("(drop ")
			g.expr()
			g.w(") ")
		}
	}
}

// countedLoop writes a loop in the shape compilers give a counted loop
// (the meter's chunk shape, chunk.go): $c moves by a step of plus or
// minus a power of two until it equals $n, with the back edge in one of
// the three forms the chunk shape takes, or counts up by one while it is
// below $n (signed or not), tested at the top; a conditional branch out
// of the loop sits in the middle of the body. A loop that calls nothing runs up
// to 600 times (many chunks), or 20 inside another loop; one that calls,
// up to 3 times, so that loops calling loops stay short.
func (g *gen) countedLoop() {
	if g.loops >= genMaxLoops {
		return
	}
	l := g.loops
	g.loops++
	defer func() { g.loops-- }()
	outer, calls := g.sb, g.calls
	g.sb = strings.Builder{}
	g.stmts()
	g.w("(br_if $x%d (i32.eq (i32.and ", l)
	g.expr()
	g.w(" (i32.const 63)) (i32.const 5))) ")
	g.stmts()
	body := g.sb.String()
	g.sb = outer
	trips := 1 + g.next()%3
	if g.calls == calls && l == 0 {
		trips = 1 + (g.next()<<8|g.next())%600
	} else if g.calls == calls {
		trips = 1 + g.next()%20
	}
	step := []int{1, -1, 4, -4, 2, 16}[g.next()%6]
	start := int32(g.next() * 977)
	op, c := "add", step
	if g.next()%2 == 1 {
		op, c = "sub", -step
	}
	form := g.next() % 5
	bound := start + int32(trips*step)
	if form == 2 { // the bound is 0: start where the trips end there
		start, bound = -int32(trips*step), 0
	}
	if form >= 3 { // tested at the top, as AssemblyScript's for: $c counts up to $n
		test := []string{"lt_s", "lt_u"}[form-3]
		g.w("(block $x%d (local.set $c%d (i32.const %d)) (local.set $n%d (i32.const %d)) ", l, l, start, l, start+int32(trips))
		g.w("(loop $l%d (if (i32.%s (local.get $c%d) (local.get $n%d)) (then %s", l, test, l, l, body)
		g.w("(local.set $c%d (i32.add (local.get $c%d) (i32.const 1))) (br $l%d))))) ", l, l, l)
		return
	}
	g.w("(block $x%d (local.set $c%d (i32.const %d)) (local.set $n%d (i32.const %d)) (loop $l%d %s", l, l, start, l, bound, l, body)
	next := fmt.Sprintf("(local.tee $c%d (i32.%s (local.get $c%d) (i32.const %d)))", l, op, l, c)
	switch form {
	case 0:
		g.w("(br_if $l%d (i32.ne (local.get $n%d) %s))", l, l, next)
	case 1:
		g.w("(br_if $l%d (i32.ne %s (local.get $n%d)))", l, next, l)
	default:
		g.w("(br_if $l%d %s)", l, next)
	}
	g.w(")) ")
}

func genModule(prog []byte) string {
	g := &gen{b: prog}
	g.w("(module\n  (type $t (func (param i32 i32) (result i32)))\n  (memory (export \"memory\") 1 8)\n")
	g.w("  (global $g (export \"g\") (mut i32) (i32.const 7))\n")
	g.w("  (table %d funcref)\n  (elem (i32.const 0)", genFuncs)
	for i := 0; i < genFuncs; i++ {
		g.w(" $f%d", i)
	}
	g.w(")\n")
	for i := 0; i < genFuncs; i++ {
		g.fn = i
		g.w("  (func $f%d (type $t) (local i32 i32) ", i)
		for l := 0; l < genMaxLoops; l++ {
			g.w("(local $c%d i32) (local $n%d i32) ", l, l)
		}
		g.stmts()
		g.expr()
		g.w(")\n")
	}
	// run calls every function, so all the generated code runs.
	g.w("  (func (export \"run\") (param i32) (result i32) (call $f0 (local.get 0) (i32.const 3))")
	for i := 1; i < genFuncs; i++ {
		g.w(" (call $f%d (local.get 0) (i32.const %d)) i32.xor", i, i)
	}
	g.w(")\n)")
	return g.sb.String()
}

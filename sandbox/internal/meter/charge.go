// charge.go: the code the rewrite emits to charge: bulk operations by
// their operands (chargeKind), the budget check and refill, the cached
// budget's write-back and reload, and the stack counter's check and
// release.

package meter

// How a 0xfc-prefixed operation is charged beyond its one unit.
type chargeKind int

const (
	chargeNone     chargeKind = iota
	chargeBytes               // its length operand in bytes, at BytesPerFuel
	chargeElements            // its length operand in table elements
	chargeGrow                // table.grow: its delta, when it succeeds
)

// bulkCharge classifies the 0xfc-prefixed instruction at fn[pos].
func bulkCharge(fn []byte, pos int) chargeKind {
	r := &reader{b: fn, pos: pos + 1}
	switch r.u32() {
	case 8, 10, 11: // memory.init, memory.copy, memory.fill
		return chargeBytes
	case 12, 14, 17: // table.init, table.copy, table.fill
		return chargeElements
	case 15: // table.grow
		return chargeGrow
	}
	return chargeNone
}

// chargeGrowPages charges memory.grow's pages at PageFuel (only the inserter
// uses it).
const chargeGrowPages chargeKind = 100

// setTmp copies the operand on top of the stack (a length or delta) into
// scratch local k, leaving it on the stack.
func (in *inserter) setTmp(w *writer, k int64) {
	w.byte(0x22) // local.tee
	w.u32(uint32(in.tmp + k))
}

// charge subtracts the cost of the length in scratch local 0 from the
// cached budget, refilling when it runs out.
func (in *inserter) charge(w *writer, kind chargeKind) {
	l := uint32(in.local)
	w.byte(0x20)
	w.u32(l)
	w.byte(0x20)
	w.u32(uint32(in.tmp))
	w.byte(0xad) // i64.extend_i32_u
	switch kind {
	case chargeBytes: // (n + BytesPerFuel-1) / BytesPerFuel
		w.byte(0x42)
		w.s64(BytesPerFuel - 1)
		w.byte(0x7c) // i64.add
		w.byte(0x42)
		w.s64(BytesPerFuel)
		w.byte(0x80) // i64.div_u (a power of two: compiled as a shift)
	case chargeElements:
		if ElementFuel != 1 {
			w.byte(0x42)
			w.s64(ElementFuel)
			w.byte(0x7e) // i64.mul
		}
	case chargeGrowPages:
		w.byte(0x42)
		w.s64(PageFuel)
		w.byte(0x7e) // i64.mul
	}
	w.byte(0x7d) // i64.sub
	in.m.refillLocalIfSpent(w, l)
}

// chargeIfGrown follows a grow whose delta is in scratch local 0 and whose
// result (-1 when refused) is on the stack: it charges the delta when the
// grow succeeded and leaves the result on the stack.
func (in *inserter) chargeIfGrown(w *writer, kind chargeKind) {
	in.setTmp(w, 1)
	w.raw([]byte{0x41, 0x7f, 0x47, 0x04, 0x40}) // i32.const -1; i32.ne; if
	in.charge(w, kind)
	w.byte(0x0b)
	w.byte(0x20)
	w.u32(uint32(in.tmp + 1))
}

// store writes a cached budget back to the global.
func (in *inserter) store(w *writer) {
	if in.local >= 0 {
		w.byte(0x20)
		w.u32(uint32(in.local))
		w.byte(0x24)
		w.u32(in.m.budgetGlobal)
	}
}

// load refreshes a cached budget from the global after a call.
func (in *inserter) load(w *writer) {
	if in.local >= 0 {
		w.byte(0x23)
		w.u32(in.m.budgetGlobal)
		w.byte(0x21)
		w.u32(uint32(in.local))
	}
}

// leave runs before the function returns: budget written back, frame
// released, the profiler told.
func (in *inserter) leave(w *writer) {
	in.store(w)
	in.m.stackRelease(w, in.frame)
	if in.m.opts.Profile {
		in.budgetValue(w)
		w.byte(0x10)
		w.u32(in.m.exitFunc)
	}
}

// enter tells the profiler that function fn (its index in the module as
// built) has started, after its entry charge.
func (in *inserter) enter(w *writer, fn uint32) {
	w.byte(0x41) // i32.const
	w.s64(int64(int32(fn)))
	in.budgetValue(w)
	w.byte(0x10)
	w.u32(in.m.enterFunc)
}

// budgetValue pushes the budget's current value: the cached local's, or
// the global's.
func (in *inserter) budgetValue(w *writer) {
	if in.local >= 0 {
		w.byte(0x20)
		w.u32(uint32(in.local))
		return
	}
	w.byte(0x23)
	w.u32(in.m.budgetGlobal)
}

// budgetCheck charges cost and refills the budget when it runs out, on the
// cached local when there is one.
func (in *inserter) budgetCheck(w *writer, cost int64) {
	if in.local < 0 {
		in.m.budgetCheck(w, cost)
		return
	}
	l := uint32(in.local)
	w.byte(0x20)
	w.u32(l)
	w.byte(0x42)
	w.s64(-cost)
	w.byte(0x7c) // i64.add
	in.m.refillLocalIfSpent(w, l)
}

// refillLocalIfSpent follows a budget value on the stack: it stores it in
// local l and, when it is negative, calls the refill import with it and
// stores the refilled budget back.
func (m *rewriter) refillLocalIfSpent(w *writer, l uint32) {
	w.byte(0x22)
	w.u32(l)                                    // local.tee
	w.raw([]byte{0x42, 0x00, 0x53, 0x04, 0x40}) // i64.const 0; i64.lt_s; if
	w.byte(0x20)
	w.u32(l) // local.get
	w.byte(0x10)
	w.u32(m.refillFunc) // call refill
	w.byte(0x21)
	w.u32(l) // local.set
	w.byte(0x0b)
}

// budgetCheck emits the budget check charging cost.
func (m *rewriter) budgetCheck(w *writer, cost int64) {
	g := m.budgetGlobal
	m.addToGlobal(w, g, -cost)
	w.byte(0x23)
	w.u32(g)
	w.raw([]byte{0x42, 0x00, 0x53, 0x04, 0x40}) // i64.const 0; i64.lt_s; if
	w.byte(0x23)
	w.u32(g)
	w.byte(0x10)
	w.u32(m.refillFunc)
	w.byte(0x24)
	w.u32(g)
	w.byte(0x0b)
}

// stackCheck charges a frame and calls overflow when the limit is passed.
func (m *rewriter) stackCheck(w *writer, frame int64) {
	g := m.stackGlobal
	m.addToGlobal(w, g, frame)
	w.byte(0x23)
	w.u32(g)
	w.raw([]byte{0x42, 0x00, 0x55, 0x04, 0x40}) // i64.const 0; i64.gt_s; if
	w.byte(0x10)
	w.u32(m.overflowFunc)
	w.byte(0x0b)
}

// stackRelease returns a frame's bytes.
func (m *rewriter) stackRelease(w *writer, frame int64) {
	if m.opts.Meter {
		m.addToGlobal(w, m.stackGlobal, -frame)
	}
}

// addToGlobal emits global.get g; i64.const delta; i64.add; global.set g.
func (m *rewriter) addToGlobal(w *writer, g uint32, delta int64) {
	w.byte(0x23)
	w.u32(g)
	w.byte(0x42)
	w.s64(delta)
	w.byte(0x7c) // i64.add
	w.byte(0x24)
	w.u32(g)
}

// insert.go: the inserter, which copies one function's code
// instruction by instruction: loops in the retry shape and their branch
// labels renumbered (copyControl), the locals a loop reads touched before
// it, and calls, returns and bulk operations with their budget syncs,
// frame releases and charges around them (copyInstr).

package meter

import "slices"

// inserter emits the per-function instrumentation around copied code.
type inserter struct {
	m     *rewriter
	frame int64
	local int64 // the budget's local index, or -1 when the global is used directly
	tmp   int64 // the first of two i32 scratch locals for bulk charges, or -1
	// nanF32, nanF64 and nanV128 are the scratch locals of NaN
	// canonicalization (Options.CanonicalNaN), or -1 where the function
	// has no operation of that class.
	nanF32, nanF64, nanV128 int64
	// retry: loops get the retry shape, and branch labels are renumbered
	// past the added loops.
	retry bool
	// frames holds, for each open block of the original code, the labels
	// added around it (1 for a loop in the retry shape, else 0).
	frames []int
	// ltypes is the first byte of each local's type, parameters first
	// (may be short for functions with more than 65,536 locals).
	ltypes []byte
	// results holds, for each open block of the original code, whether
	// its label takes values (a block's or if's results, a loop's
	// parameters); funcResults whether the function's label does.
	results     []bool
	funcResults bool
	// chunkTmp is the first of the chunk shape's two i32 locals, or -1
	// when the function has none; chunk is the loop in the chunk shape
	// being copied, if any (chunk.go).
	chunkTmp int64
	chunk    *chunkLoop
	chunked  bool // some loop took the chunk shape
	// spareBlocks is how many blocks the chunk shape may still add
	// before the function passes Options.MaxBlocks.
	spareBlocks int
}

// copyControl copies the instruction at r when it is a control
// instruction whose labels the retry shape affects, and reports whether
// it was a loop given that shape (whose check it emitted, charging
// costs[next]). Other instructions are left for copyInstr.
//
// A loop with no parameters becomes
//
//	loop $retry (bt)                      ;; added, same block type
//	  (if (i64.lt_s (local.get $b) (i64.const 0))
//	    (local.set $b (i64.add (call $refill (local.get $b)) (i64.const cost))))
//	  loop $l (bt)                         ;; the original
//	    (local.set $b (i64.sub (local.get $b) (i64.const cost)))
//	    (br_if $retry (i64.lt_s (local.get $b) (i64.const 0)))
//	    ...body...
//	  end
//	end
//
// so the hot loop holds no call: compilers that spill every value live
// across a call (wazero's register allocator) keep the loop's values in
// registers. Leaving the loop at its header and entering it again is
// exact — a loop without parameters carries its state in locals — and the
// refilled budget gets the iteration's cost back, since the loop charges
// it again: fuel counts are those of the inline shape.
func (in *inserter) copyControl(r *reader, w *writer, costs []int64, next int) (copied, checked bool, err error) {
	start := r.pos
	if c := in.chunk; c != nil && start == c.tail {
		in.chunkBackEdge(w)
		r.pos = c.end
		return true, false, nil
	} else if c != nil && c.top && start == c.bound { // the test reads $lim for $n
		r.pos++
		r.u32()
		w.byte(0x20)
		w.u32(uint32(in.chunkTmp + 1))
		return true, false, r.err
	}
	switch op := r.b[r.pos]; op {
	case 0x02, 0x04: // block, if
		br := &reader{b: r.b, pos: start + 1}
		br.skipBlockType()
		in.frames = append(in.frames, 0)
		_, results := in.blockArity(r.b[start+1 : br.pos])
		in.results = append(in.results, br.err == nil && results)
	case 0x03: // loop
		r.pos++
		bt := r.pos
		r.skipBlockType()
		if r.err != nil {
			return false, false, r.err
		}
		params, _ := in.blockArity(r.b[bt:r.pos])
		if in.local < 0 || next >= len(costs) || params {
			in.frames = append(in.frames, 0)
			in.results = append(in.results, params)
			r.pos = start
			return false, false, nil
		}
		cost := costs[next]
		if c := in.findChunk(r.b, r.b[bt:r.pos], r.pos, cost); c != nil {
			in.openChunk(w, c)
			in.frames = append(in.frames, c.added())
			in.results = append(in.results, false)
			c.frame, in.chunk, in.chunked = len(in.frames)-1, c, true
			return true, true, nil
		}
		l := uint32(in.local)
		w.byte(0x03)
		w.raw(r.b[bt:r.pos])
		w.raw([]byte{0x02, 0x40}) // block
		w.byte(0x20)
		w.u32(l)
		w.raw([]byte{0x42, 0x00, 0x59, 0x0d, 0x00}) // i64.const 0; i64.ge_s; br_if 0
		w.byte(0x20)
		w.u32(l)
		w.byte(0x10)
		w.u32(in.m.refillFunc)
		w.byte(0x42)
		w.s64(cost)
		w.byte(0x7c) // i64.add
		w.byte(0x21)
		w.u32(l)
		w.byte(0x0b)
		if !slices.Contains(in.frames, 1) {
			in.touch(w, r.b, r.pos, l)
		}
		w.byte(0x03)
		w.raw(r.b[bt:r.pos])
		w.byte(0x20)
		w.u32(l)
		w.byte(0x42)
		w.s64(cost)
		w.byte(0x7d) // i64.sub
		w.byte(0x22)
		w.u32(l)                                                      // local.tee
		w.raw([]byte{0x42, 0x00, 0x53, 0x04, 0x40, 0x0c, 0x02, 0x0b}) // i64.const 0; i64.lt_s; if; br 2; end
		in.frames = append(in.frames, 1)
		in.results = append(in.results, false)
		return true, true, nil
	case 0x0b: // end of a block (the function's own end is not copied here)
		if len(in.frames) == 0 {
			return false, false, unsupported("unbalanced end")
		}
		added := in.frames[len(in.frames)-1]
		in.frames = in.frames[:len(in.frames)-1]
		in.results = in.results[:len(in.results)-1]
		r.pos++
		if in.chunk != nil && in.chunk.frame == len(in.frames) {
			in.closeChunk(w)
			return true, false, nil
		}
		w.byte(0x0b)
		for ; added > 0; added-- {
			w.byte(0x0b)
		}
		return true, false, nil
	case 0x0c, 0x0d: // br, br_if
		r.pos++
		d := r.u32()
		if c := in.chunk; c != nil && int(d) > len(in.frames)-1-c.frame { // out of the chunk
			if op == 0x0d {
				in.chunkExit(w, len(in.frames)-1-c.frame)
				return true, false, r.err
			}
			in.chunkRefund(w)
		}
		w.byte(op)
		w.u32(in.label(d))
		return true, false, r.err
	case 0x0e: // br_table
		r.pos++
		n := r.u32()
		if r.err != nil {
			return false, false, r.err
		}
		w.byte(op)
		w.u32(n)
		for k := uint64(0); k <= uint64(n) && r.err == nil; k++ {
			w.u32(in.label(r.u32()))
		}
		return true, false, r.err
	}
	return false, false, nil
}

// maxTouched bounds the locals touch reads before one loop.
const maxTouched = 12

// touch emits, before a loop whose body starts at b[pos], a read of each
// scalar local the loop reads (at most maxTouched, in order of first
// read), folded into nothing: (local.set $b (i64.add (local.get $b)
// (i64.extend_i32_u (i32.and (i32.or x...) (i32.const 0))))). It runs once
// per entry into the loop, not per iteration. Its purpose is the register
// allocator's: wazero's reloads a value that lives across a call (the
// refill just before) at each use, and a loop header inherits the
// registers of the block before it, so a value first used inside the loop
// would be reloaded from the stack on every iteration; read once here, it
// enters the loop in a register.
func (in *inserter) touch(w *writer, b []byte, pos int, budget uint32) {
	r := &reader{b: b, pos: pos}
	var seen [maxTouched]uint32
	n := 0
	for depth := 1; depth > 0 && r.more() && n < maxTouched; {
		op := r.b[r.pos]
		start := r.pos
		if r.skipInstr() != nil {
			return
		}
		switch op {
		case 0x02, 0x03, 0x04, 0x06, 0x1f:
			depth++
		case 0x0b:
			depth--
		case 0x20, 0x22: // local.get, local.tee
			lr := &reader{b: b, pos: start + 1}
			x := lr.u32()
			if int(x) >= len(in.ltypes) || uint32(x) == budget || slices.Contains(seen[:n], x) {
				continue
			}
			switch in.ltypes[x] {
			case 0x7f, 0x7e, 0x7d, 0x7c:
				seen[n] = x
				n++
			}
		}
	}
	if n == 0 {
		return
	}
	for k, x := range seen[:n] {
		w.byte(0x20)
		w.u32(x)
		switch in.ltypes[x] {
		case 0x7e:
			w.byte(0xa7) // i32.wrap_i64
		case 0x7d:
			w.byte(0xbc) // i32.reinterpret_f32
		case 0x7c:
			w.byte(0xbd) // i64.reinterpret_f64
			w.byte(0xa7)
		}
		if k > 0 {
			w.byte(0x72) // i32.or
		}
	}
	w.raw([]byte{0x41, 0x00, 0x71, 0xad}) // i32.const 0; i32.and; i64.extend_i32_u
	w.byte(0x20)
	w.u32(budget)
	w.byte(0x7c) // i64.add
	w.byte(0x21)
	w.u32(budget)
}

// label renumbers a branch's label depth past the labels added inside it.
func (in *inserter) label(d uint32) uint32 {
	out := d
	for k := 0; k < int(d) && k < len(in.frames); k++ {
		out += uint32(in.frames[len(in.frames)-1-k])
	}
	return out
}

// blockArity reports whether a block type (its encoding) takes
// parameters and whether it has results.
func (in *inserter) blockArity(bt []byte) (params, results bool) {
	switch {
	case len(bt) == 1 && bt[0] == 0x40:
		return false, false
	case len(bt) == 1 && bt[0] >= 0x6f || len(bt) > 0 && (bt[0] == 0x63 || bt[0] == 0x64):
		return false, true // one value type
	}
	r := &reader{b: bt}
	idx := int64(r.leb(5)) // s33, non-negative for a type index
	if idx < 0 || int(idx) >= len(in.m.types) {
		return true, true
	}
	return in.m.types[idx].params > 0, len(in.m.types[idx].results) > 0
}

// copyInstr copies one instruction, remapping function indices, syncing a
// cached budget around calls, and releasing the frame before anything that
// leaves the function directly.
func (in *inserter) copyInstr(r *reader, w *writer) error {
	m := in.m
	start := r.pos
	switch op := r.byte(); op {
	case 0x10: // call
		in.chunkBudget(w)
		in.store(w)
		w.byte(op)
		w.u32(m.shift(r.u32()))
		in.load(w)
		return r.err
	case 0xd2: // ref.func
		w.byte(op)
		w.u32(m.shift(r.u32()))
		return r.err
	case 0x11, 0x14: // call_indirect, call_ref
		r.pos = start
		if err := r.skipInstr(); err != nil {
			return err
		}
		in.chunkBudget(w)
		in.store(w)
		w.raw(r.b[start:r.pos])
		in.load(w)
		return nil
	case 0x12: // return_call
		in.chunkLeave(w)
		in.leave(w)
		w.byte(op)
		w.u32(m.shift(r.u32()))
		return r.err
	case 0x0f, 0x13, 0x15: // return, return_call_indirect, return_call_ref
		in.chunkLeave(w)
		in.leave(w)
	case 0x08, 0x09, 0x0a: // throw, rethrow, throw_ref
		in.chunkLeave(w)
		in.store(w)
	case 0x40: // memory.grow
		in.chunkBudget(w)
		if in.tmp >= 0 {
			in.setTmp(w, 0)
		}
		if m.hook {
			if mem := r.u32(); mem != 0 {
				return unsupported("memory.grow of memory %d", mem)
			}
			w.byte(0x10)
			w.u32(m.hookFunc)
		} else {
			r.pos = start
			if err := r.skipInstr(); err != nil {
				return err
			}
			w.raw(r.b[start:r.pos])
		}
		if in.tmp >= 0 {
			in.chargeIfGrown(w, chargeGrowPages)
		}
		return r.err
	case 0xfc:
		if in.tmp < 0 {
			break
		}
		kind := bulkCharge(r.b, start)
		if kind != chargeNone {
			in.chunkBudget(w)
		}
		switch kind {
		case chargeBytes, chargeElements:
			in.setTmp(w, 0)
			in.charge(w, kind)
		case chargeGrow:
			in.setTmp(w, 0)
			r.pos = start
			if err := r.skipInstr(); err != nil {
				return err
			}
			w.raw(r.b[start:r.pos])
			in.chargeIfGrown(w, chargeElements)
			return nil
		}
	}
	r.pos = start
	if err := r.skipInstr(); err != nil {
		return err
	}
	w.raw(r.b[start:r.pos])
	if m.opts.CanonicalNaN {
		in.canonicalize(w, nanClassOf(r.b, start))
	}
	return nil
}

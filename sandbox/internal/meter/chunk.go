// chunk.go: counted inner loops charged a chunk of iterations at a time.
//
// A loop in the retry shape pays a subtract and a branch on every
// iteration. For a loop whose trip count the rewrite can read off its own
// exit test, the chunk shape charges many iterations at once instead and
// lets the loop's own compare end the chunk, so the loop body holds no
// check at all. It applies to an innermost loop (no loop inside it) with
// no parameters and no results, that calls nothing and holds no operation
// the meter charges by operand or that unwinds (calls, memory.grow, bulk
// operations, exceptions), whose body ends with the back edge compilers
// emit for a counted loop:
//
//	local.get $n  local.get $i  i32.const c  i32.add|i32.sub  local.tee $i  i32.ne  br_if 0
//	local.get $i  i32.const c  i32.add|i32.sub  local.tee $i  local.get $n  i32.ne  br_if 0
//	local.get $i  i32.const c  i32.add|i32.sub  local.tee $i  br_if 0     ;; $n is 0
//
// where $i and $n are i32 locals the body writes nowhere else, the step d
// (c, or -c for a subtraction) is plus or minus a power of two up to 2^16,
// and no other branch targets the loop. Such a loop runs until $i, moved
// by d after each iteration, equals $n: from a given $i its trip count is
// known. The loop becomes
//
//	loop $chunk
//	  ;; n := iterations of the next chunk: the trips left (at most
//	  ;; chunkMax), cut to what the budget covers (at least one)
//	  ;; $lim := $i + n*d
//	  ;; budget -= n*cost; refill when negative (only when n is 1)
//	  block $done                ;; with conditional exits only
//	    block $pad ...           ;; one per conditional exit
//	      loop $l
//	        body                 ;; a conditional exit branches to its pad;
//	                             ;; a br or return out gives back first
//	        $i += d; br_if $l ($i != $lim)
//	      end
//	      br_if $chunk ($i != $n)
//	      br $done
//	    end                      ;; each pad: give back the charge of the
//	    <give back; br target>   ;; iterations that will not run, and
//	  end                        ;; branch on to the exit's target
//	end
//
// The body's own branches keep their places and polarity, so the path
// that stays in the loop falls through as it did.
//
// Fuel is exactly the inline shape's: every iteration is charged cost
// before it runs; a chunk never takes the budget below zero (n is bounded
// by the budget), so the refill runs at the same iteration, with the same
// counter, as the inline shape's; a branch out of the loop adds back the
// cost of the chunk's iterations that did not start. After a trap inside a
// chunk the budget's global has not been written since the function's
// last call, as in the other shapes.
//
// A chunk is normally the rest of the loop, cut only where the budget
// runs out, so the budget, not the chunk, decides when the host gets
// control: the refill points are the inline shape's.

package meter

// chunkMax bounds a chunk's iterations (with chunkMaxCost, its charge
// fits in 31 bits). A chunk is normally the whole loop: its length is the
// trips left, cut only where the budget runs out, so the loop leaves its
// inner loop where the program does, once per entry (a chunk cut at a
// fixed length costs a mispredicted branch per cut; matmul's inner loop
// cut at 44 iterations ran 9% slower than with a check per iteration).
const chunkMax = 1 << 20

// chunkMaxCost is the dearest iteration the chunk shape takes: above it a
// check per iteration is a small part of the iteration's work.
const chunkMaxCost = 512

// chunkLoop describes a loop given the chunk shape.
type chunkLoop struct {
	i, n  uint32 // the induction variable and the bound's locals
	zero  bool   // the bound is the constant 0 (n unused)
	step  int64  // d: what each iteration adds to $i
	shift uint32 // log2 |d|
	cost  int64  // the units one iteration costs
	max   int64  // the longest chunk, in iterations
	tail  int    // where the back edge starts in the original code
	end   int    // where the loop's end is in the original code
	frame int    // the loop's entry in inserter.frames
	// exits holds, for each conditional branch out of the loop in code
	// order, its target: how many labels out from the block enclosing
	// the loop (0: that block). Each gets a landing pad after the loop
	// (closeChunk); taken counts those copied so far.
	exits []uint32
	taken int
}

// added is how many labels the chunk shape puts around the original
// loop: the chunk loop, and with exits a block that skips their pads
// and a pad each.
func (c *chunkLoop) added() int {
	if len(c.exits) == 0 {
		return 1
	}
	return 2 + len(c.exits)
}

// findChunk reports whether the loop whose body starts at b[body], after
// its block type bt, takes the chunk shape, charging cost per iteration,
// and if so how.
func (in *inserter) findChunk(b, bt []byte, body int, cost int64) *chunkLoop {
	if len(bt) != 1 || bt[0] != 0x40 || cost < 1 || cost > chunkMaxCost || in.chunkTmp < 0 {
		return nil
	}
	type place struct {
		local, depth, label uint32
		pos                 int
		op                  byte
	}
	var starts []int // the instructions directly in the loop's body
	var writes, branches []place
	r := &reader{b: b, pos: body}
	for depth := uint32(0); r.more(); {
		start := r.pos
		if depth == 0 {
			starts = append(starts, start)
		}
		op := b[start]
		switch op {
		case 0x03, 0x06, 0x1f, 0x18, // loop, try, try_table, delegate
			0x08, 0x09, 0x0a, // throw, rethrow, throw_ref
			0x10, 0x11, 0x12, 0x13, 0x14, 0x15, // calls
			0x40: // memory.grow
			return nil
		case 0xfc:
			if bulkCharge(b, start) != chargeNone {
				return nil
			}
		}
		if r.skipInstr() != nil {
			return nil
		}
		lr := &reader{b: b, pos: start + 1}
		switch op {
		case 0x02, 0x04: // block, if
			depth++
		case 0x0b: // end
			if depth > 0 {
				depth--
				continue
			}
			c := in.backEdge(b, starts[:len(starts)-1])
			if c == nil {
				return nil
			}
			c.end, c.cost = start, cost
			c.max = min(chunkMax, int64(1)<<31>>c.shift)
			var exits []uint32
			for _, w := range writes {
				if w.local == c.n && !c.zero || w.local == c.i && w.pos < c.tail {
					return nil
				}
			}
			for _, br := range branches {
				switch {
				case br.label < br.depth: // inside the loop
				case br.label == br.depth: // the loop: only its back edge
					if br.pos < c.tail {
						return nil
					}
				case br.op == 0x0e: // a table that can leave the loop
					return nil
				case br.op == 0x0d: // br_if out: its target must take no values
					if in.labelResults(br.label - br.depth - 1) {
						return nil
					}
					exits = append(exits, br.label-br.depth-1)
				}
			}
			// The chunk shape's blocks beyond the retry shape's two: the
			// budget's two ifs, and the exits' pads.
			c.exits = exits
			if need := 1 + c.added(); need <= in.spareBlocks {
				in.spareBlocks -= need
				return c
			}
			return nil
		case 0x21, 0x22: // local.set, local.tee
			writes = append(writes, place{local: lr.u32(), pos: start})
		case 0x0c, 0x0d: // br, br_if
			branches = append(branches, place{depth: depth, label: lr.u32(), pos: start, op: op})
		case 0x0e: // br_table
			n := lr.u32()
			for k := uint64(0); k <= uint64(n) && lr.err == nil; k++ {
				branches = append(branches, place{depth: depth, label: lr.u32(), pos: start, op: op})
			}
		}
	}
	return nil
}

// backEdge matches the last instructions of a loop's body (starting at
// the offsets in starts) against the counted back edges findChunk takes.
func (in *inserter) backEdge(b []byte, starts []int) *chunkLoop {
	ins := func(k int) (op byte, imm *reader) { // the k-th instruction from the end
		p := starts[len(starts)-k]
		return b[p], &reader{b: b, pos: p + 1}
	}
	local := func(k int, want byte) (uint32, bool) {
		op, imm := ins(k)
		x := imm.u32()
		return x, op == want && imm.err == nil && int(x) < len(in.ltypes) && in.ltypes[x] == 0x7f
	}
	step := func(k int) (int64, bool) { // i32.const c; i32.add|i32.sub at k, k-1
		op, imm := ins(k)
		c := int64(int32(imm.s32()))
		add, _ := ins(k - 1)
		if op != 0x41 || imm.err != nil || add != 0x6a && add != 0x6b {
			return 0, false
		}
		if add == 0x6b {
			c = -c
		}
		a := max(c, -c)
		return c, c != 0 && a <= 1<<16 && a&(a-1) == 0
	}
	if len(starts) < 5 {
		return nil
	}
	if op, imm := ins(1); op != 0x0d || imm.u32() != 0 || imm.err != nil {
		return nil
	}
	c := &chunkLoop{}
	var ok [4]bool
	switch op, _ := ins(2); {
	case op == 0x47 && len(starts) >= 7: // ... i32.ne; br_if 0
		if first, _ := ins(7); first == 0x20 && len(starts) >= 7 {
			if x, isGet := local(6, 0x20); isGet { // local.get $n; local.get $i; ...; local.tee $i; i32.ne
				c.n, ok[0] = local(7, 0x20)
				c.i, ok[1] = x, true
				c.step, ok[2] = step(5)
				tee, isTee := local(3, 0x22)
				ok[3] = isTee && tee == c.i
				c.tail = starts[len(starts)-7]
				break
			}
		}
		// local.get $i; i32.const c; add|sub; local.tee $i; local.get $n; i32.ne
		c.i, ok[0] = local(7, 0x20)
		c.step, ok[1] = step(6)
		tee, isTee := local(4, 0x22)
		ok[2] = isTee && tee == c.i
		c.n, ok[3] = local(3, 0x20)
		c.tail = starts[len(starts)-7]
	default: // local.get $i; i32.const c; add|sub; local.tee $i; br_if 0
		c.i, ok[0] = local(5, 0x20)
		c.step, ok[1] = step(4)
		tee, isTee := local(2, 0x22)
		ok[2] = isTee && tee == c.i
		c.zero, ok[3] = true, true
		c.tail = starts[len(starts)-5]
	}
	if ok != [4]bool{true, true, true, true} || !c.zero && c.n == c.i {
		return nil
	}
	for d := max(c.step, -c.step); d > 1; d >>= 1 {
		c.shift++
	}
	return c
}

// labelResults reports whether the label o levels out from the block
// that encloses the current loop (0: that block) takes values: an
// enclosing block's results, a loop's parameters, or the function's
// results.
func (in *inserter) labelResults(o uint32) bool {
	if int(o) < len(in.results) {
		return in.results[len(in.results)-1-int(o)]
	}
	return in.funcResults
}

// openChunk emits the chunk loop and its charge, and opens the original
// loop inside it.
func (in *inserter) openChunk(w *writer, c *chunkLoop) {
	b, t, lim := uint32(in.local), uint32(in.chunkTmp), uint32(in.chunkTmp+1)
	get := func(x uint32) { w.byte(0x20); w.u32(x) }
	i32 := func(v int64) { w.byte(0x41); w.s64(int64(int32(uint32(v)))) } // as its 32 bits
	i64 := func(v int64) { w.byte(0x42); w.s64(v) }
	w.raw([]byte{0x03, 0x40}) // loop $chunk
	// The trips left before $i reaches $n, less one, scaled by |d|:
	// E = ($n - $i) * sign(d) - |d| (modulo 2^32). When E < max*|d| the
	// loop ends within max iterations, after E/|d| + 1 of them (E is a
	// multiple of |d| then, or $i never meets $n).
	bound := func() {
		if c.zero {
			i32(0)
		} else {
			get(c.n)
		}
	}
	if c.step > 0 {
		bound()
		get(c.i)
	} else {
		get(c.i)
		bound()
	}
	w.byte(0x6b) // i32.sub
	i32(max(c.step, -c.step))
	w.byte(0x6b)
	w.byte(0x22) // local.tee $lim (E for now)
	w.u32(lim)
	if c.shift > 0 {
		i32(int64(c.shift))
		w.byte(0x76) // i32.shr_u
	}
	i32(1)
	w.byte(0x6a) // i32.add
	i32(c.max)
	get(lim)
	i32(c.max << c.shift)
	w.byte(0x49) // i32.lt_u
	w.byte(0x1b) // select: n
	w.byte(0x21) // local.set $t
	w.u32(t)
	// No more iterations than the budget covers, and at least one: when
	// the budget is short of n's charge, n = min(n, budget / cost), or 1
	// when the budget is below one iteration's cost.
	get(b)
	get(t)
	w.byte(0xad) // i64.extend_i32_u
	i64(c.cost)
	w.raw([]byte{0x7e, 0x53, 0x04, 0x40}) // i64.mul; i64.lt_s; if
	get(b)
	i64(c.cost)
	w.raw([]byte{0x53, 0x04, 0x7f}) // i64.lt_s; if (result i32)
	i32(1)
	w.byte(0x05) // else
	get(b)
	i64(c.cost)
	w.raw([]byte{0x80, 0xa7, 0x0b}) // i64.div_u; i32.wrap_i64; end
	w.byte(0x22)
	w.u32(lim)
	get(t)
	get(lim)
	get(t)
	w.raw([]byte{0x49, 0x1b}) // i32.lt_u; select: the smaller
	w.byte(0x21)
	w.u32(t)
	w.byte(0x0b) // end
	// Charge the chunk.
	get(b)
	get(t)
	w.byte(0xad) // i64.extend_i32_u
	i64(c.cost)
	w.raw([]byte{0x7e, 0x7d}) // i64.mul; i64.sub
	in.m.refillLocalIfSpent(w, b)
	// $lim = $i + n*d
	get(c.i)
	get(t)
	if c.shift > 0 {
		i32(int64(c.shift))
		w.byte(0x74) // i32.shl
	}
	if c.step > 0 {
		w.byte(0x6a)
	} else {
		w.byte(0x6b)
	}
	w.byte(0x21)
	w.u32(lim)
	if len(c.exits) > 0 {
		w.raw([]byte{0x02, 0x40}) // block $done
		for range c.exits {
			w.raw([]byte{0x02, 0x40}) // block $pad
		}
	}
	w.raw([]byte{0x03, 0x40}) // loop $l
}

// chunkExit copies a conditional branch out of the chunk's loop, k blocks
// deep inside it: it goes to the exit's pad, which gives back the charge
// and branches on (closeChunk). The branch keeps its place and polarity,
// so the loop's path that stays in it falls through as before.
func (in *inserter) chunkExit(w *writer, k int) {
	c := in.chunk
	c.taken++
	w.byte(0x0d)
	w.u32(uint32(k + c.taken)) // the blocks, the loop, the pads before it
}

// chunkRefund gives back, before a branch out of the chunk, the charge of
// the chunk's iterations that will not start: ($lim - $i) / d - 1 of them.
func (in *inserter) chunkRefund(w *writer) {
	c := in.chunk
	b, lim := uint32(in.local), uint32(in.chunkTmp+1)
	w.byte(0x20)
	w.u32(b)
	first, second := lim, c.i
	if c.step < 0 {
		first, second = c.i, lim
	}
	w.byte(0x20)
	w.u32(first)
	w.byte(0x20)
	w.u32(second)
	w.byte(0x6b) // i32.sub
	if c.shift > 0 {
		w.byte(0x41)
		w.s64(int64(c.shift))
		w.byte(0x76) // i32.shr_u
	}
	w.raw([]byte{0x41, 0x01, 0x6b, 0xad}) // i32.const 1; i32.sub; i64.extend_i32_u
	w.byte(0x42)
	w.s64(c.cost)
	w.raw([]byte{0x7e, 0x7c}) // i64.mul; i64.add
	w.byte(0x21)
	w.u32(b)
}

// chunkBackEdge replaces the loop's back edge: $i moves as before, and
// the chunk ends at $lim.
func (in *inserter) chunkBackEdge(w *writer) {
	c := in.chunk
	w.byte(0x20)
	w.u32(c.i)
	w.byte(0x41)
	w.s64(c.step)
	w.byte(0x6a) // i32.add
	w.byte(0x22)
	w.u32(c.i)
	w.byte(0x20)
	w.u32(uint32(in.chunkTmp + 1))
	w.raw([]byte{0x47, 0x0d, 0x00}) // i32.ne; br_if 0
}

// closeChunk ends the original loop and, unless $i reached $n, starts the
// next chunk; then come the exits' pads, each giving back the charge of
// the iterations that will not run and branching to its exit's target.
// The chunk's frame has been popped: in.label counts from outside it.
func (in *inserter) closeChunk(w *writer) {
	c := in.chunk
	m := uint32(len(c.exits))
	w.byte(0x0b)
	w.byte(0x20)
	w.u32(c.i)
	if !c.zero {
		w.byte(0x20)
		w.u32(c.n)
		w.byte(0x47) // i32.ne
	}
	w.byte(0x0d) // br_if $chunk
	if m == 0 {
		w.raw([]byte{0x00, 0x0b}) // end $chunk
		in.chunk = nil
		return
	}
	w.u32(m + 1)
	w.byte(0x0c) // br $done
	w.u32(m)
	for j, o := range c.exits {
		w.byte(0x0b) // end of the pad
		in.chunkRefund(w)
		w.byte(0x0c)
		w.u32(m - uint32(j+1) + 2 + in.label(o))
	}
	w.raw([]byte{0x0b, 0x0b}) // end $done; end $chunk
	in.chunk = nil
}

// blockResults reports whether a block type (its encoding) has results.
func (in *inserter) blockResults(bt []byte) bool {
	if len(bt) == 1 && bt[0] == 0x40 {
		return false
	}
	if len(bt) == 1 && bt[0] >= 0x6f || len(bt) > 0 && (bt[0] == 0x63 || bt[0] == 0x64) {
		return true
	}
	r := &reader{b: bt}
	idx := int64(r.leb(5))
	return idx < 0 || int(idx) >= len(in.m.types) || len(in.m.types[idx].results) > 0
}

// chunk.go: counted inner loops charged a chunk of iterations at a time.
//
// A loop in the retry shape pays a subtract and a branch on every
// iteration. For a loop whose trip count the rewrite can read off its own
// exit test, the chunk shape charges many iterations at once instead and
// lets the loop's own compare end the chunk, so the loop body holds no
// check at all. It applies to an innermost loop (no loop inside it) with
// no parameters and no results, without exception handlers, in one of two
// forms. A loop whose body ends with the back edge compilers emit for a
// counted loop:
//
//	local.get $n  local.get $i  i32.const c  i32.add|i32.sub  local.tee $i  i32.ne  br_if 0
//	local.get $i  i32.const c  i32.add|i32.sub  local.tee $i  local.get $n  i32.ne  br_if 0
//	local.get $i  i32.const c  i32.add|i32.sub  local.tee $i  br_if 0     ;; $n is 0
//
// with the step d (c, or -c for a subtraction) plus or minus a power of two
// up to 2^16: it runs until $i, moved by d after each iteration, equals $n.
// And a loop tested at its top, as AssemblyScript writes a for loop:
//
//	loop  local.get $i  local.get $n  i32.lt_s|i32.lt_u  if  ...  $i += 1  br 1  end  end
//
// which runs while $i < $n. In both $i and $n are i32 locals the body
// writes nowhere else and no other branch targets the loop, so from a
// given $i the trip count is known. The loop becomes
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
//	        $i += d; br_if $l ($i != $lim)      ;; or the top test: $i < $lim
//	      end
//	      br_if $chunk ($i != $n)               ;; or $i < $n
//	      ;; (tested at the top: charge the last test's pass)
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
// counter, as the inline shape's; a branch out of the loop, a return or a
// throw adds back the cost of the chunk's iterations that did not start.
// Anything in the body that reads or charges the budget — a call (whose
// callee charges the budget's global), a bulk operation, a memory.grow —
// first cuts the chunk at the current iteration (chunkCut), so it meets
// the inline shape's budget; a checked access that calls out on its
// failure path costs nothing while it does not fail. After a trap the
// budget's global holds what the function last wrote before a call, as in
// the other shapes.
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
	tail  int    // where the back edge starts in the original code (-1: top)
	end   int    // where the loop's end is in the original code
	back  int    // the one branch back to the loop
	step0 int    // the one write to $i
	// top: the loop is tested at its top (topTest): test is its compare,
	// bound where it reads $n.
	top   bool
	test  byte
	bound int
	frame int // the loop's entry in inserter.frames
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
	var inner []int  // and those directly in a block or if in it
	var writes, branches []place
	elses := 0 // else clauses directly in an if in the body
	r := &reader{b: b, pos: body}
	for depth := uint32(0); r.more(); {
		start := r.pos
		switch depth {
		case 0:
			starts = append(starts, start)
		case 1:
			inner = append(inner, start)
		}
		op := b[start]
		switch op {
		case 0x03, 0x06, 0x1f, 0x18, 0x09: // loop, try, try_table, delegate, rethrow
			return nil
		case 0x05: // else
			if depth == 1 {
				elses++
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
			if c == nil && elses == 0 {
				c = in.topTest(b, starts[:len(starts)-1], inner[:max(len(inner)-1, 0)]) // less the if's end
			}
			if c == nil {
				return nil
			}
			c.end, c.cost = start, cost
			c.max = min(chunkMax, int64(1)<<31>>c.shift)
			var exits []uint32
			for _, w := range writes {
				if w.local == c.n && !c.zero || w.local == c.i && w.pos != c.step0 {
					return nil
				}
			}
			for _, br := range branches {
				switch {
				case br.label < br.depth: // inside the loop
					if c.top && br.label == br.depth-1 { // the test's if: leaves the loop
						return nil
					}
				case br.label == br.depth: // the loop: only its back edge
					if br.pos != c.back {
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
			// budget's ifs (two more for a loop tested at its top: the
			// charge skipped when no trip is left, the last test's
			// charge), and the exits' pads.
			c.exits = exits
			need := 1 + c.added()
			if c.top {
				need += 2
			}
			if need <= in.spareBlocks {
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
	if len(starts) < 5 {
		return nil
	}
	at := func(k int) int { return starts[len(starts)-k] } // the k-th instruction from the end
	if op, imm := instrAt(b, at(1)); op != 0x0d || imm.u32() != 0 || imm.err != nil {
		return nil
	}
	c := &chunkLoop{back: at(1)}
	var ok [4]bool
	switch op, _ := instrAt(b, at(2)); {
	case op == 0x47 && len(starts) >= 7: // ... i32.ne; br_if 0
		if _, isGet := in.i32Local(b, at(6), 0x20); isGet {
			// local.get $n; local.get $i; i32.const c; add|sub; local.tee $i; i32.ne
			c.n, ok[0] = in.i32Local(b, at(7), 0x20)
			c.i, ok[1] = in.i32Local(b, at(6), 0x20)
			c.step, ok[2] = stepAt(b, at(5), at(4))
			c.step0 = at(3)
			tee, isTee := in.i32Local(b, at(3), 0x22)
			ok[3] = isTee && tee == c.i
		} else {
			// local.get $i; i32.const c; add|sub; local.tee $i; local.get $n; i32.ne
			c.i, ok[0] = in.i32Local(b, at(7), 0x20)
			c.step, ok[1] = stepAt(b, at(6), at(5))
			c.step0 = at(4)
			tee, isTee := in.i32Local(b, at(4), 0x22)
			ok[2] = isTee && tee == c.i
			c.n, ok[3] = in.i32Local(b, at(3), 0x20)
		}
		c.tail = at(7)
	default: // local.get $i; i32.const c; add|sub; local.tee $i; br_if 0
		c.i, ok[0] = in.i32Local(b, at(5), 0x20)
		c.step, ok[1] = stepAt(b, at(4), at(3))
		c.step0 = at(2)
		tee, isTee := in.i32Local(b, at(2), 0x22)
		ok[2] = isTee && tee == c.i
		c.zero, ok[3] = true, true
		c.tail = at(5)
	}
	if ok != [4]bool{true, true, true, true} || !c.zero && c.n == c.i {
		return nil
	}
	for d := max(c.step, -c.step); d > 1; d >>= 1 {
		c.shift++
	}
	return c
}

// topTest matches a loop tested at its top, as AssemblyScript writes a
// for loop: the body (its instructions at starts) is
//
//	local.get $i  local.get $n  i32.lt_s|i32.lt_u  if
//	  ...
//	  local.get $i  i32.const 1  i32.add  local.set $i  br 1
//	end
//
// with no else (inner holds the if's own instructions).
func (in *inserter) topTest(b []byte, starts, inner []int) *chunkLoop {
	if len(starts) != 4 || len(inner) < 5 {
		return nil
	}
	c := &chunkLoop{top: true, step: 1, tail: -1}
	var ok [6]bool
	c.i, ok[0] = in.i32Local(b, starts[0], 0x20)
	c.n, ok[1] = in.i32Local(b, starts[1], 0x20)
	c.bound = starts[1]
	op, _ := instrAt(b, starts[2])
	c.test, ok[2] = op, op == 0x48 || op == 0x49
	ok[3] = b[starts[3]] == 0x04 && starts[3]+1 < len(b) && b[starts[3]+1] == 0x40
	at := func(k int) int { return inner[len(inner)-k] }
	get, isGet := in.i32Local(b, at(5), 0x20)
	step, isStep := stepAt(b, at(4), at(3))
	set, isSet := in.i32Local(b, at(2), 0x21)
	ok[4] = isGet && get == c.i && isStep && step == 1 && isSet && set == c.i
	bop, imm := instrAt(b, at(1))
	ok[5] = bop == 0x0c && imm.u32() == 1 && imm.err == nil
	if ok != [6]bool{true, true, true, true, true, true} || c.n == c.i {
		return nil
	}
	c.step0, c.back = at(2), at(1)
	return c
}

// instrAt returns the opcode at b[p] and a reader of its immediates.
func instrAt(b []byte, p int) (byte, *reader) {
	return b[p], &reader{b: b, pos: p + 1}
}

// i32Local reads the local index of the local.get, set or tee (want) at
// b[p], and reports whether it is that instruction on an i32 local.
func (in *inserter) i32Local(b []byte, p int, want byte) (uint32, bool) {
	op, imm := instrAt(b, p)
	x := imm.u32()
	return x, op == want && imm.err == nil && int(x) < len(in.ltypes) && in.ltypes[x] == 0x7f
}

// stepAt reads the step d of `i32.const c; i32.add|i32.sub` at b[p] and
// b[q] (c, or -c for a subtraction), and reports whether it is a nonzero
// power of two up to 2^16 either way.
func stepAt(b []byte, p, q int) (int64, bool) {
	op, imm := instrAt(b, p)
	c := int64(imm.s32())
	add, _ := instrAt(b, q)
	if op != 0x41 || imm.err != nil || add != 0x6a && add != 0x6b {
		return 0, false
	}
	if add == 0x6b {
		c = -c
	}
	a := max(c, -c)
	return c, c != 0 && a <= 1<<16 && a&(a-1) == 0
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
	if c.top {
		in.topTrips(w, c)
	} else {
		in.backEdgeTrips(w, c)
	}
	// No more iterations than the budget covers, and at least one (none
	// when a loop tested at its top has none left): when the budget is
	// short of n's charge, n = min(n, budget / cost), or min(n, 1) when
	// the budget is below one iteration's cost.
	get(b)
	get(t)
	w.byte(0xad) // i64.extend_i32_u
	i64(c.cost)
	w.raw([]byte{0x7e, 0x53, 0x04, 0x40}) // i64.mul; i64.lt_s; if
	get(b)
	i64(c.cost)
	w.raw([]byte{0x53, 0x04, 0x7f}) // i64.lt_s; if (result i32)
	get(t)
	i32(1)
	get(t)
	i32(1)
	w.raw([]byte{0x49, 0x1b}) // i32.lt_u; select: min(n, 1)
	w.byte(0x05)              // else
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
	// Charge the chunk (a loop tested at its top may have no iteration
	// left: then nothing).
	if c.top {
		get(t)
		w.raw([]byte{0x04, 0x40}) // if
	}
	get(b)
	get(t)
	w.byte(0xad) // i64.extend_i32_u
	i64(c.cost)
	w.raw([]byte{0x7e, 0x7d}) // i64.mul; i64.sub
	in.m.refillLocalIfSpent(w, b)
	if c.top {
		w.byte(0x0b)
	}
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

// backEdgeTrips leaves in $t the iterations a loop with a counted back
// edge has left from $i, at most c.max.
func (in *inserter) backEdgeTrips(w *writer, c *chunkLoop) {
	t, lim := uint32(in.chunkTmp), uint32(in.chunkTmp+1)
	get := func(x uint32) { w.byte(0x20); w.u32(x) }
	i32 := func(v int64) { w.byte(0x41); w.s64(int64(int32(uint32(v)))) } // as its 32 bits
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
}

// topTrips leaves in $t the iterations a loop tested at its top has left
// from $i ($n - $i while $i < $n, else none), at most c.max.
func (in *inserter) topTrips(w *writer, c *chunkLoop) {
	t, lim := uint32(in.chunkTmp), uint32(in.chunkTmp+1)
	get := func(x uint32) { w.byte(0x20); w.u32(x) }
	get(c.n)
	get(c.i)
	w.raw([]byte{0x6b, 0x41, 0x00}) // i32.sub; i32.const 0
	get(c.i)
	get(c.n)
	w.raw([]byte{c.test, 0x1b}) // the loop's test; select
	w.byte(0x22)                // local.tee $lim (the trips for now)
	w.u32(lim)
	w.byte(0x41)
	w.s64(c.max)
	get(lim)
	w.byte(0x41)
	w.s64(c.max)
	w.raw([]byte{0x49, 0x1b}) // i32.lt_u; select: the smaller
	w.byte(0x21)
	w.u32(t)
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

// chunkLeave gives back, in a chunk, the iterations that will not start,
// before the function is left (return, a tail call, a throw).
func (in *inserter) chunkLeave(w *writer) {
	if in.chunk != nil {
		in.chunkRefund(w)
	}
}

// chunkBudget cuts the chunk, if any, before an instruction that reads or
// charges the budget (chunkCut).
func (in *inserter) chunkBudget(w *writer) {
	if in.chunk != nil {
		in.chunkCut(w)
	}
}

// chunkCut ends the chunk with the current iteration, before anything
// in it that reads or charges the budget (a call, a bulk operation, a
// grow): it gives back the iterations that will not start in this chunk,
// so the budget is the inline shape's, and points $lim one step on, so
// the next test ends the chunk and the next chunk starts from the budget
// then.
func (in *inserter) chunkCut(w *writer) {
	in.chunkRefund(w)
	in.nextI(w)
	w.byte(0x21)
	w.u32(uint32(in.chunkTmp + 1))
}

// nextI pushes $i + d.
func (in *inserter) nextI(w *writer) {
	w.byte(0x20)
	w.u32(in.chunk.i)
	w.byte(0x41)
	w.s64(in.chunk.step)
	w.byte(0x6a) // i32.add
}

// chunkBackEdge replaces the loop's back edge: $i moves as before, and
// the chunk ends at $lim.
func (in *inserter) chunkBackEdge(w *writer) {
	c := in.chunk
	in.nextI(w)
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
	switch {
	case c.top:
		w.byte(0x20)
		w.u32(c.n)
		w.byte(c.test)
	case !c.zero:
		w.byte(0x20)
		w.u32(c.n)
		w.byte(0x47) // i32.ne
	}
	w.byte(0x0d) // br_if $chunk
	if m == 0 {
		w.byte(0x00)
	} else {
		w.u32(m + 1)
	}
	if c.top { // the test that ends the loop: its pass is charged too
		in.budgetCheck(w, c.cost)
	}
	if m == 0 {
		w.byte(0x0b) // end $chunk
		in.chunk = nil
		return
	}
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

// code.go: the code section: every function body instrumented
// (instrumentFunc: the check points, the wrapping block, the cached
// budget local), and the body of the injected memory.grow wrapper.

package meter

import "fmt"

// rewriteCode instruments every function body.
func (m *rewriter) rewriteCode(body []byte) ([]byte, error) {
	r := &reader{b: body}
	w := &writer{b: make([]byte, 0, len(body)+len(body)/4+64)}
	n := r.u32()
	if n != uint32(len(m.funcTypes)) {
		return nil, unsupported("%d function bodies for %d functions", n, len(m.funcTypes))
	}
	hook := m.hook
	if hook {
		w.u32(n + 1)
	} else {
		w.u32(n)
	}
	for i := uint32(0); i < n && r.err == nil; i++ {
		fn := r.bytes(uint64(r.u32()))
		if r.err != nil {
			break
		}
		origBase := uint64(r.pos - len(fn))
		m.places = m.places[:0]
		out, err := m.instrumentFunc(fn, m.types[m.funcTypes[i]], m.numFuncImports+i)
		if err != nil {
			return nil, fmt.Errorf("function %d: %w", m.numFuncImports+i, err)
		}
		w.u32(uint32(len(out)))
		if m.smap != nil {
			newBase := uint64(len(w.b))
			pairs := make([]uint64, len(m.places))
			for k := 0; k < len(pairs); k += 2 {
				pairs[k], pairs[k+1] = newBase+m.places[k], origBase+m.places[k+1]
			}
			m.smap.funcs = append(m.smap.funcs, funcPlaces{start: newBase, end: newBase + uint64(len(out)), pairs: pairs})
		}
		w.raw(out)
	}
	if r.err != nil {
		return nil, r.err
	}
	if hook {
		body := m.growHookBody()
		w.u32(uint32(len(body)))
		w.raw(body)
	}
	return w.b, nil
}

// instrumentFunc rewrites one body:
//
//	<locals>
//	<stack check: counter += frame; trap when positive>
//	<with Profile: call profile_enter(idx, budget)>
//	<budget check: charge segment 0>
//	block (result T...)  <original code, with a budget check after every
//	                      loop header, a stack release before every return
//	                      and tail call, and function indices remapped>
//	end
//	<stack release: counter -= frame>
//	<with Profile: call profile_exit(budget)>
//	end
func (m *rewriter) instrumentFunc(fn []byte, typ funcType, idx uint32) ([]byte, error) {
	r := &reader{b: fn}
	numLocals := uint64(typ.params)
	groups := r.u32()
	ltypes := append(m.ltypes[:0], typ.ptypes...)
	defer func() { m.ltypes = ltypes }()
	for n := groups; n > 0 && r.err == nil; n-- {
		k := r.u32()
		numLocals += uint64(k)
		if r.pos < len(r.b) && len(ltypes)+int(k) <= 1<<16 {
			for c := r.b[r.pos]; k > 0; k-- {
				ltypes = append(ltypes, c)
			}
		}
		r.skipValType()
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(fn) == r.pos || fn[len(fn)-1] != 0x0b {
		return nil, unsupported("function body does not end with end")
	}
	locals := fn[:r.pos]
	code, last := r.pos, len(fn)-1 // the final end is fn[last]
	frame := int64(min(numLocals, 1<<40))*8 + FrameOverhead

	// Pass 1: find check points (entry, and after each loop header) and the
	// instruction count of the segment each one starts.
	// It also counts blocks and notes bulk operations.
	points := append(m.points[:0], code)
	costs := append(m.costs[:0], 0)
	defer func() { m.points, m.costs = points, costs }()
	blocks, bulk, handlers := 0, false, false
	var nan nanClasses // the NaN-producing operations the body has, when canonicalizing
	for r.pos < last && r.err == nil {
		start := r.pos
		op := r.b[r.pos]
		if err := r.skipInstr(); err != nil {
			return nil, err
		}
		if m.opts.CanonicalNaN {
			nan |= nanClassOf(fn, start).bit()
		}
		costs[len(costs)-1]++
		switch op {
		case 0x02, 0x03, 0x04, 0x06, 0x1f: // block, loop, if, try, try_table
			if blocks++; m.opts.MaxBlocks > 0 && blocks > m.opts.MaxBlocks {
				return nil, fmt.Errorf("%w: more than %d", ErrTooManyBlocks, m.opts.MaxBlocks)
			}
			if op == 0x03 { // loop: a new segment starts after its block type
				points = append(points, r.pos)
				costs = append(costs, 0)
			}
			if op == 0x06 || op == 0x1f {
				handlers = true
			}
		case 0x40: // memory.grow
			bulk = true
		case 0xfc:
			if bulkCharge(fn, start) != chargeNone {
				bulk = true
			}
		}
	}
	if r.pos != last {
		return nil, unsupported("function body runs past its end")
	}

	// Pass 2: copy, inserting checks and remapping indices. A function
	// with loops keeps the budget in an added local while it runs, so the
	// check inside a loop touches a register, not the global in memory;
	// the global is written back before calls and exits and reloaded after
	// calls. The result is valid until the next call of instrumentFunc.
	w := &m.body
	w.b = w.b[:0]
	meter := m.opts.Meter
	ins := &inserter{m: m, frame: frame, local: -1, tmp: -1, nanF32: -1, nanF64: -1, nanV128: -1, frames: m.frames[:0], ltypes: ltypes,
		results: m.labelResults[:0], funcResults: len(typ.results) > 0, chunkTmp: -1, spareBlocks: 1 << 30}
	defer func() { m.labelResults = ins.results }()
	defer func() { m.frames = ins.frames }()
	// Loops get the retry shape (inserter.copyControl) unless the function
	// has exception handlers, whose labels (catch clauses, delegate,
	// rethrow) the relabeling does not follow, or the shape's two extra
	// blocks per loop would take it past MaxBlocks: wazero's compile time
	// grows with the square of a function's blocks, and this keeps the
	// rewrite's worst case where the inline shape had it.
	loops := len(points) - 1
	ins.retry = meter && !handlers && !m.opts.inline && (m.opts.MaxBlocks <= 0 || blocks+2*loops <= m.opts.MaxBlocks)
	if m.opts.MaxBlocks > 0 {
		ins.spareBlocks = m.opts.MaxBlocks - blocks - 2*loops
	}
	localsEnd := -1 // where the locals end in w, when locals were added
	if budget := meter && (len(points) > 1 || bulk); budget || nan != 0 {
		// Added locals, after the function's own: the budget (one i64)
		// and, with bulk operations, two i32s (a bulk operation's length,
		// a grow's result); one scratch local per class of NaN-producing
		// operation the body has (canonicalNaN).
		next := int64(numLocals)
		var add []byte // (count, type) pairs
		if budget {
			ins.local, next, add = next, next+1, append(add, 1, 0x7e)
			if bulk {
				ins.tmp, next, add = next, next+2, append(add, 2, 0x7f)
			}
		}
		for _, c := range []struct {
			classes nanClasses
			typ     byte
			local   *int64
		}{{nanF32.bit(), 0x7d, &ins.nanF32}, {nanF64.bit(), 0x7c, &ins.nanF64}, {nanF32x4.bit() | nanF64x2.bit(), 0x7b, &ins.nanV128}} {
			if nan&c.classes != 0 {
				*c.local, next, add = next, next+1, append(add, 1, c.typ)
			}
		}
		// The chunk shape's two i32s (chunk.go) come last, so that when
		// no loop takes the shape they can be dropped (dropUnusedChunkLocals)
		// without moving another local.
		if budget && ins.retry && loops > 0 && !m.opts.noChunks {
			ins.chunkTmp, add = next, append(add, 2, 0x7f)
		}
		lr := &reader{b: fn}
		lr.u32()
		w.u32(groups + uint32(len(add)/2))
		w.raw(fn[lr.pos:code])
		w.raw(add)
		localsEnd = len(w.b)
	} else {
		w.raw(locals)
	}
	if meter {
		m.stackCheck(w, frame)
		if ins.local >= 0 {
			w.byte(0x23)
			w.u32(m.budgetGlobal)
			w.byte(0x21)
			w.u32(uint32(ins.local))
		}
		if m.opts.Profile { // before the entry charge, which is the function's own
			ins.enter(w, idx)
		}
		ins.budgetCheck(w, costs[0])
		w.byte(0x02) // block
		w.raw(m.blockType(typ.results))
	}
	r = &reader{b: fn, pos: code}
	next := 1
	m.record(0, code) // the function's prologue: its first instruction
	for r.pos < last {
		m.record(len(w.b), r.pos)
		if ins.retry {
			copied, checked, err := ins.copyControl(r, w, costs, next)
			if err != nil {
				return nil, err
			}
			if checked {
				next++
			}
			if copied {
				continue
			}
		}
		if err := ins.copyInstr(r, w); err != nil {
			return nil, err
		}
		if meter && next < len(points) && r.pos == points[next] {
			ins.budgetCheck(w, costs[next])
			next++
		}
	}
	m.record(len(w.b), last) // the epilogue: the function's end
	if meter {
		w.byte(0x0b) // end of the wrapping block
		ins.leave(w)
	}
	w.byte(0x0b)
	if ins.chunkTmp >= 0 && !ins.chunked && r.err == nil {
		m.dropUnusedChunkLocals(localsEnd)
	}
	return m.body.b, r.err
}

// dropUnusedChunkLocals removes the chunk shape's two locals, the last
// group declared before m.body.b[localsEnd:], when no loop used them, and
// moves the source map's places with the code.
func (m *rewriter) dropUnusedChunkLocals(localsEnd int) {
	b := m.body.b
	hr := &reader{b: b}
	groups := hr.u32()
	var count writer
	count.u32(groups - 1)
	n := copy(b, count.b) // never longer than the old count
	n += copy(b[n:], b[hr.pos:localsEnd-2])
	shift := localsEnd - n
	n += copy(b[n:], b[localsEnd:])
	m.body.b = b[:n]
	for k := 0; k < len(m.places); k += 2 {
		if m.places[k] >= uint64(localsEnd) {
			m.places[k] -= uint64(shift)
		}
	}
}

// growHookBody is the injected wrapper around memory.grow:
//
//	(func (param $pages i32) (result i32) (local $r i32)
//	  (local.tee $r (memory.grow (local.get $pages)))
//	  (if (i32.eq (i32.const -1)) (then (call $grow_denied (local.get $pages))))
//	  (local.get $r))
func (m *rewriter) growHookBody() []byte {
	w := &writer{}
	w.raw([]byte{1, 1, 0x7f})       // one i32 local
	w.raw([]byte{0x20, 0, 0x40, 0}) // local.get 0; memory.grow 0
	w.raw([]byte{0x22, 1})          // local.tee 1
	w.raw([]byte{0x41, 0x7f, 0x46}) // i32.const -1; i32.eq
	w.raw([]byte{0x04, 0x40, 0x20, 0, 0x10})
	w.u32(m.deniedFunc) // if; local.get 0; call $grow_denied
	w.raw([]byte{0x0b, 0x20, 1, 0x0b})
	return w.b
}

// sections.go: the rewrite of every section but code: types, imports,
// functions, globals, exports and elements (the added imports, globals
// and exports, and function indices shifted past the added imports), the
// constant expressions in them, and the name section.

package meter

func (m *rewriter) rewriteTypes(body []byte) []byte {
	w := &writer{}
	w.u32(uint32(len(m.types) + len(m.extraTypes)))
	if body != nil {
		r := &reader{b: body}
		r.u32()
		w.raw(body[r.pos:])
	}
	for _, t := range m.extraTypes {
		w.raw(t)
	}
	return w.b
}

func (m *rewriter) rewriteImports(body []byte) []byte {
	w := &writer{}
	var rest []byte
	n := uint32(0)
	if body != nil {
		r := &reader{b: body}
		n = r.u32()
		rest = body[r.pos:]
	}
	type imp struct {
		name string
		typ  uint32
	}
	var added []imp
	if m.opts.Meter {
		added = append(added, imp{RefillName, m.refillType}, imp{OverflowName, m.overflowType})
	}
	if m.hook {
		added = append(added, imp{GrowDeniedName, m.deniedType})
	}
	if m.opts.Profile {
		added = append(added, imp{ProfileEnterName, m.enterType}, imp{ProfileExitName, m.exitType})
	}
	w.u32(n + uint32(len(added)))
	w.raw(rest)
	for _, a := range added {
		w.name(RefillModule)
		w.name(a.name)
		w.byte(0x00)
		w.u32(a.typ)
	}
	return w.b
}

// rewriteFunctions declares the grow wrapper after the module's functions.
func (m *rewriter) rewriteFunctions(body []byte) []byte {
	if !m.hook {
		return body
	}
	r := &reader{b: body}
	n := r.u32()
	w := &writer{}
	w.u32(n + 1)
	w.raw(body[r.pos:])
	w.u32(m.hookType)
	return w.b
}

func (m *rewriter) rewriteGlobals(body []byte) ([]byte, error) {
	w := &writer{}
	n := uint32(0)
	var r *reader
	if body != nil {
		r = &reader{b: body}
		n = r.u32()
	}
	if !m.opts.Meter {
		return body, nil
	}
	w.u32(n + 2)
	for i := uint32(0); i < n; i++ {
		start := r.pos
		r.skipValType()
		r.byte()
		w.raw(body[start:r.pos])
		if err := m.copyConstExpr(r, w); err != nil {
			return nil, err
		}
	}
	if r != nil && r.err != nil {
		return nil, r.err
	}
	w.raw([]byte{0x7e, 0x01, 0x42, 0x00, 0x0b}) // budget: (mut i64) (i64.const 0)
	w.raw([]byte{0x7e, 0x01, 0x42})             // stack: (mut i64) (i64.const -limit)
	w.s64(-m.opts.StackLimit)
	w.byte(0x0b)
	return w.b, nil
}

func (m *rewriter) rewriteExports(body []byte) ([]byte, error) {
	if !m.opts.Meter && m.addedImports == 0 {
		return body, nil
	}
	w := &writer{}
	n := uint32(0)
	var r *reader
	if body != nil {
		r = &reader{b: body}
		n = r.u32()
	}
	added := uint32(0)
	if m.opts.Meter {
		added = 2
	}
	w.u32(n + added)
	for i := uint32(0); i < n; i++ {
		w.name(r.name())
		kind := r.byte()
		idx := r.u32()
		if kind == 0x00 {
			idx = m.shift(idx)
		}
		w.byte(kind)
		w.u32(idx)
	}
	if r != nil && r.err != nil {
		return nil, r.err
	}
	if m.opts.Meter {
		w.name(BudgetExport)
		w.byte(0x03)
		w.u32(m.budgetGlobal)
		w.name(StackExport)
		w.byte(0x03)
		w.u32(m.stackGlobal)
	}
	return w.b, nil
}

// rewriteElements remaps function indices in all eight element segment
// forms.
func (m *rewriter) rewriteElements(body []byte) ([]byte, error) {
	r := &reader{b: body}
	w := &writer{}
	n := r.u32()
	w.u32(n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		flags := r.u32()
		w.u32(flags)
		if flags > 7 {
			return nil, unsupported("element segment flags %d", flags)
		}
		if flags&1 == 0 { // active
			if flags&2 != 0 {
				w.u32(r.u32()) // table index
			}
			if err := m.copyConstExpr(r, w); err != nil {
				return nil, err
			}
		}
		exprs := flags&4 != 0
		if flags&3 != 0 { // elemkind or reftype
			if exprs {
				start := r.pos
				r.skipRefType()
				w.raw(r.b[start:r.pos])
			} else {
				w.byte(r.byte())
			}
		}
		count := r.u32()
		w.u32(count)
		for j := uint32(0); j < count && r.err == nil; j++ {
			if exprs {
				if err := m.copyConstExpr(r, w); err != nil {
					return nil, err
				}
			} else {
				w.u32(m.shift(r.u32()))
			}
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return w.b, nil
}

// copyConstExpr copies a constant expression up to and including its end,
// remapping ref.func.
func (m *rewriter) copyConstExpr(r *reader, w *writer) error {
	for r.err == nil {
		start := r.pos
		op := r.byte()
		switch op {
		case 0x0b:
			w.byte(op)
			return nil
		case 0xd2:
			w.byte(op)
			w.u32(m.shift(r.u32()))
			continue
		}
		r.pos = start
		if err := r.skipInstr(); err != nil {
			return err
		}
		w.raw(r.b[start:r.pos])
	}
	return r.err
}

// rewriteCustom rewrites the function indices of the name section and keeps
// every other custom section as is. A name section it cannot parse is
// dropped (nil): it only feeds stack traces.
func (m *rewriter) rewriteCustom(body []byte) []byte {
	r := &reader{b: body}
	name := r.name()
	if r.err != nil || name != "name" {
		return body
	}
	w := &writer{}
	w.name(name)
	for r.more() {
		id := r.byte()
		sub := r.bytes(uint64(r.u32()))
		if r.err != nil {
			return nil
		}
		if id != 1 && id != 2 {
			w.byte(id)
			w.u32(uint32(len(sub)))
			w.raw(sub)
			continue
		}
		sr := &reader{b: sub}
		sw := &writer{}
		n := sr.u32()
		sw.u32(n)
		for i := uint32(0); i < n && sr.err == nil; i++ {
			sw.u32(m.shift(sr.u32()))
			if id == 1 {
				sw.name(sr.name())
				continue
			}
			k := sr.u32() // local names: a name map per function
			sw.u32(k)
			for j := uint32(0); j < k && sr.err == nil; j++ {
				sw.u32(sr.u32())
				sw.name(sr.name())
			}
		}
		if sr.err != nil {
			return nil
		}
		w.byte(id)
		w.u32(uint32(len(sw.b)))
		w.raw(sw.b)
	}
	return w.b
}

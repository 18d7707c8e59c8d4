// encoding.go: the binary format underneath the rewrite: reader decodes
// it (LEB128s, names, types, and skipping whole instructions) and writer
// encodes it.

package meter

import "errors"

// reader decodes the binary format; the first error sticks.
type reader struct {
	b   []byte
	pos int
	err error
}

var errEOF = errors.New("unexpected end of module")

func (r *reader) more() bool { return r.err == nil && r.pos < len(r.b) }

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.pos >= len(r.b) {
		r.fail(errEOF)
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *reader) bytes(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)-r.pos) {
		r.fail(errEOF)
		return nil
	}
	out := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return out
}

// leb reads an unsigned or signed LEB128 of at most maxBytes bytes and
// returns its low 64 bits (the rewriter only re-encodes u32 values).
func (r *reader) leb(maxBytes int) uint64 {
	var v uint64
	for i := 0; i < maxBytes; i++ {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if i < 10 {
			v |= uint64(c&0x7f) << (7 * uint(i))
		}
		if c&0x80 == 0 {
			return v
		}
	}
	r.fail(errors.New("LEB128 too long"))
	return 0
}

func (r *reader) u32() uint32 { return uint32(r.leb(5)) }

// s32 reads a signed LEB128 of at most 5 bytes (an i32.const's value):
// leb's bits, sign-extended from the last byte read.
func (r *reader) s32() int32 {
	start := r.pos
	v := r.leb(5)
	if bits := 7 * uint(r.pos-start); bits < 64 && v&(1<<(bits-1)) != 0 {
		v |= ^uint64(0) << bits
	}
	return int32(v)
}
func (r *reader) name() string {
	return string(r.bytes(uint64(r.u32())))
}

// skipValType skips a value type: a one-byte type, or a (ref null? ht)
// from the function-references proposal.
func (r *reader) skipValType() {
	switch c := r.byte(); c {
	case 0x63, 0x64:
		r.leb(5) // heap type (s33)
	}
}

func (r *reader) skipValTypes() {
	for n := r.u32(); n > 0 && r.err == nil; n-- {
		r.skipValType()
	}
}

func (r *reader) skipRefType() { r.skipValType() }

// skipLimits skips a memory or table type's limits and returns their
// flags (bit 2 marks a 64-bit memory or table).
func (r *reader) skipLimits() byte {
	flags := r.byte()
	r.leb(10)
	if flags&1 != 0 {
		r.leb(10)
	}
	return flags
}

// skipBlockType skips a block type: 0x40, a value type, or a type index.
func (r *reader) skipBlockType() {
	if r.pos >= len(r.b) {
		r.fail(errEOF)
		return
	}
	switch c := r.b[r.pos]; {
	case c == 0x40 || c >= 0x6f && c <= 0x7f:
		r.pos++
	case c == 0x63 || c == 0x64:
		r.pos++
		r.leb(5)
	default:
		r.leb(5) // s33 type index
	}
}

// skipMemarg skips a memory immediate: alignment (bit 6 flags a memory
// index, multi-memory) and offset.
func (r *reader) skipMemarg() {
	align := r.u32()
	if align&0x40 != 0 {
		r.u32()
	}
	r.leb(10)
}

// skipInstr skips one instruction with its immediates. Every opcode of the
// core spec, bulk memory, reference types, SIMD, threads, tail calls and
// legacy and new exception handling is known; the GC proposal's 0xFB
// prefix is not.
func (r *reader) skipInstr() error {
	op := r.byte()
	switch {
	case op == 0x00, op == 0x01, op == 0x05, op == 0x0a, op == 0x0b, op == 0x0f, op == 0x19,
		op == 0x1a, op == 0x1b, op == 0xd1, op == 0xd3, op == 0xd4, op >= 0x45 && op <= 0xc4:
		// no immediates
	case op >= 0x02 && op <= 0x04, op == 0x06: // block, loop, if, try
		r.skipBlockType()
	case op == 0x07, op == 0x08, op == 0x09, op == 0x0c, op == 0x0d, op == 0x10, op == 0x12,
		op == 0x14, op == 0x15, op == 0x18, op == 0xd2, op == 0xd5, op == 0xd6,
		op >= 0x20 && op <= 0x26:
		r.u32()
	case op == 0x0e: // br_table
		for n := r.u32(); n > 0 && r.err == nil; n-- {
			r.u32()
		}
		r.u32()
	case op == 0x11, op == 0x13: // call_indirect, return_call_indirect
		r.u32()
		r.u32()
	case op == 0x1c: // select t*
		r.skipValTypes()
	case op == 0x1f: // try_table
		r.skipBlockType()
		for n := r.u32(); n > 0 && r.err == nil; n-- {
			kind := r.byte()
			if kind == 0x00 || kind == 0x01 {
				r.u32() // tag
			}
			r.u32() // label
		}
	case op >= 0x28 && op <= 0x3e:
		r.skipMemarg()
	case op == 0x3f, op == 0x40: // memory.size, memory.grow
		r.u32()
	case op == 0x41:
		r.leb(5)
	case op == 0x42:
		r.leb(10)
	case op == 0x43:
		r.bytes(4)
	case op == 0x44:
		r.bytes(8)
	case op == 0xd0: // ref.null ht
		r.leb(5)
	case op == 0xfc:
		r.skipFC(r.u32())
	case op == 0xfd:
		r.skipSIMD(r.u32())
	case op == 0xfe:
		sub := r.u32()
		if sub == 0x03 { // atomic.fence
			r.byte()
		} else {
			r.skipMemarg()
		}
	default:
		r.fail(unsupported("opcode 0x%02x", op))
	}
	return r.err
}

func (r *reader) skipFC(sub uint32) {
	switch {
	case sub <= 7: // saturating truncations
	case sub == 8: // memory.init data mem
		r.u32()
		r.u32()
	case sub == 9, sub == 11, sub == 13, sub >= 15 && sub <= 17: // data.drop, memory.fill, elem.drop, table.grow/size/fill
		r.u32()
	case sub == 10, sub == 12, sub == 14: // memory.copy, table.init, table.copy
		r.u32()
		r.u32()
	default:
		r.fail(unsupported("opcode 0xfc %d", sub))
	}
}

func (r *reader) skipSIMD(sub uint32) {
	switch {
	case sub <= 11, sub == 92, sub == 93: // loads, stores, load zero
		r.skipMemarg()
	case sub == 12, sub == 13: // v128.const, i8x16.shuffle
		r.bytes(16)
	case sub >= 21 && sub <= 34: // extract/replace lane
		r.byte()
	case sub >= 84 && sub <= 91: // load/store lane
		r.skipMemarg()
		r.byte()
	case sub <= 0x113: // every other SIMD and relaxed-SIMD op has no immediate
	default:
		r.fail(unsupported("opcode 0xfd %d", sub))
	}
}

// writer encodes the binary format.
type writer struct{ b []byte }

func (w *writer) byte(c byte)  { w.b = append(w.b, c) }
func (w *writer) raw(p []byte) { w.b = append(w.b, p...) }

func (w *writer) u32(v uint32) {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			c |= 0x80
		}
		w.b = append(w.b, c)
		if v == 0 {
			return
		}
	}
}

func (w *writer) s64(v int64) {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		done := v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0
		if !done {
			c |= 0x80
		}
		w.b = append(w.b, c)
		if done {
			return
		}
	}
}

func (w *writer) name(s string) {
	w.u32(uint32(len(s)))
	w.b = append(w.b, s...)
}

func (w *writer) section(id byte, body []byte) {
	w.byte(id)
	w.u32(uint32(len(body)))
	w.raw(body)
}

// ulebLen is the length of v's unsigned LEB128 encoding.
func ulebLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

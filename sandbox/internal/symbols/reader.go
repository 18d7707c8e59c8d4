package symbols

// reader reads the name section's encodings (wasmbin reads the rest);
// any error stops it (ok turns false) and every later read returns zero.
type reader struct {
	b   []byte
	pos int
	bad bool
}

func (r *reader) ok() bool { return !r.bad }

// more reports whether bytes are left and nothing failed.
func (r *reader) more() bool { return !r.bad && r.pos < len(r.b) }

func (r *reader) byte() byte {
	if r.bad || r.pos >= len(r.b) {
		r.bad = true
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *reader) u32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		if r.bad {
			return 0
		}
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
	r.bad = true
	return 0
}

func (r *reader) bytes(n uint64) []byte {
	if r.bad || n > uint64(len(r.b)-r.pos) {
		r.bad = true
		return nil
	}
	b := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return b
}

func (r *reader) name() string { return string(r.bytes(uint64(r.u32()))) }

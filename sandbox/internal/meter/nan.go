// nan.go: NaN canonicalization (Options.CanonicalNaN), for deterministic
// mode on an engine whose compiler cannot do it (wazero). The spec lets
// an arithmetic operation that returns a NaN return any NaN (sign and
// payload); engines and CPUs differ (x86 makes 0/0 a negative NaN, and
// wazero's scalar min of two NaNs returns the first where wasmtime's
// returns the second). After every such operation the rewrite replaces a
// NaN result by the canonical NaN, 0x7fc00000 (f32) or
// 0x7ff8000000000000 (f64), lane by lane for SIMD: the NaN wasmtime's
// Cranelift option (cranelift_nan_canonicalization) produces, so both
// engines give the same bits. Operations that move bits without
// arithmetic (abs, neg, copysign, loads, stores, reinterpret, pmin, pmax)
// are exact already and left alone; relaxed SIMD is refused at load.

package meter

// nanClass is the result type of a NaN-producing operation.
type nanClass uint8

const (
	nanNone nanClass = iota
	nanF32
	nanF64
	nanF32x4
	nanF64x2
)

// nanClasses is a set of nanClass.
type nanClasses uint8

func (c nanClass) bit() nanClasses {
	if c == nanNone {
		return 0
	}
	return 1 << c
}

// nanClassOf classifies the instruction at b[pos].
func nanClassOf(b []byte, pos int) nanClass {
	switch op := b[pos]; {
	case op >= 0x8d && op <= 0x97, op == 0xb6: // f32 ceil..max, f32.demote_f64
		return nanF32
	case op >= 0x9b && op <= 0xa5, op == 0xbb: // f64 ceil..max, f64.promote_f32
		return nanF64
	case op == 0xfd:
		r := &reader{b: b, pos: pos + 1}
		switch sub := r.u32(); {
		case r.err != nil:
		case sub == 94, sub >= 103 && sub <= 106, sub >= 227 && sub <= 233: // demote_f64x2_zero; ceil, floor, trunc, nearest; sqrt..max
			return nanF32x4
		case sub == 95, sub == 116, sub == 117, sub == 122, sub == 148, sub >= 239 && sub <= 245: // promote_low_f32x4; ceil, floor, trunc, nearest; sqrt..max
			return nanF64x2
		}
	}
	return nanNone
}

// canonicalize emits, after an operation of class c whose result is on
// the stack, the code that replaces a NaN result by the canonical NaN.
//
//	f32: local.set $t; f32.const nan; local.get $t; local.get $t; local.get $t; f32.ne; select
//	f32x4: local.set $v; local.get $v; v128.const nan x4; local.get $v; local.get $v; f32x4.eq; v128.bitselect
func (in *inserter) canonicalize(w *writer, c nanClass) {
	switch c {
	case nanF32:
		t := uint32(in.nanF32)
		w.byte(0x21)
		w.u32(t)
		w.raw([]byte{0x43, 0x00, 0x00, 0xc0, 0x7f})
		in.getN(w, t, 3)
		w.raw([]byte{0x5c, 0x1b}) // f32.ne; select
	case nanF64:
		t := uint32(in.nanF64)
		w.byte(0x21)
		w.u32(t)
		w.raw([]byte{0x44, 0, 0, 0, 0, 0, 0, 0xf8, 0x7f})
		in.getN(w, t, 3)
		w.raw([]byte{0x62, 0x1b}) // f64.ne; select
	case nanF32x4, nanF64x2:
		t := uint32(in.nanV128)
		w.byte(0x21)
		w.u32(t)
		in.getN(w, t, 1)
		w.raw([]byte{0xfd, 12}) // v128.const
		eq := byte(0x41)        // f32x4.eq
		if c == nanF32x4 {
			for range 4 {
				w.raw([]byte{0x00, 0x00, 0xc0, 0x7f})
			}
		} else {
			eq = 0x47 // f64x2.eq
			for range 2 {
				w.raw([]byte{0, 0, 0, 0, 0, 0, 0xf8, 0x7f})
			}
		}
		in.getN(w, t, 2)
		w.raw([]byte{0xfd, eq, 0xfd, 0x52}) // eq; v128.bitselect
	}
}

// getN emits n local.get of local t.
func (in *inserter) getN(w *writer, t uint32, n int) {
	for range n {
		w.byte(0x20)
		w.u32(t)
	}
}

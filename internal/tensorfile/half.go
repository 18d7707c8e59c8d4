package tensorfile

import "math"

// F16ToFloat64 widens an IEEE 754 binary16 value (NumPy's float16, the ABI's
// f16) given by its bits. Every binary16 value is exactly representable as a
// float64; a NaN keeps its sign and payload.
func F16ToFloat64(h uint16) float64 {
	sign := uint64(h&0x8000) << 48
	exp := int(h>>10) & 0x1f
	mant := uint64(h & 0x3ff)
	switch exp {
	case 0: // zero or subnormal: mant × 2^-24
		v := math.Ldexp(float64(mant), -24)
		return math.Float64frombits(math.Float64bits(v) | sign)
	case 0x1f: // infinity or NaN
		return math.Float64frombits(sign | 0x7ff<<52 | mant<<42)
	}
	v := math.Ldexp(float64(1024+mant), exp-25)
	return math.Float64frombits(math.Float64bits(v) | sign)
}

// Float64ToF16 narrows a float64 to binary16 bits, rounding to nearest with
// ties to even in one step (as NumPy's astype(np.float16) does; going
// through float32 would round twice). Values too large for binary16 become
// infinities; a NaN stays a NaN with the top bits of its payload.
func Float64ToF16(f float64) uint16 {
	bits := math.Float64bits(f)
	sign := uint16(bits>>48) & 0x8000
	exp := int(bits>>52) & 0x7ff
	mant := bits & (1<<52 - 1)
	if exp == 0x7ff {
		if mant == 0 {
			return sign | 0x7c00
		}
		h := uint16(mant >> 42)
		if h == 0 {
			h = 0x200 // keep it a NaN when the payload sits in the low bits
		}
		return sign | 0x7c00 | h
	}
	e := exp - 1023
	sig := mant | 1<<52
	if exp == 0 { // float64 subnormal: far below binary16's range
		e, sig = -1022, mant
	}
	if e > 15 {
		return sign | 0x7c00
	}
	// q is the value in units of the target's last place, 2^(E-10), where
	// E is the exponent the result is written with (subnormals share -14).
	// Subnormals and normals are contiguous in the encoding, so the bits
	// are (E+14)<<10 + q, and a carry out of the mantissa moves into the
	// exponent by itself.
	E := max(e, -14)
	shift := uint(42 + E - e)
	var q uint64
	if shift < 64 {
		q = sig >> shift
		rem := sig & (1<<shift - 1)
		half := uint64(1) << (shift - 1)
		if rem > half || (rem == half && q&1 == 1) {
			q++
		}
	}
	h := uint64(E+14)<<10 + q
	if h >= 0x7c00 {
		return sign | 0x7c00
	}
	return sign | uint16(h)
}

package spectest

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/seed4b3e0ccb/callbox/internal/testing/wasmspec"
)

// val is one wasm value, engine-neutral: numbers and v128 as bits, a
// reference as null or not (an externref also carries the host value the
// script passed in).
type val struct {
	kind   string // i32, i64, f32, f64, v128, funcref, externref
	lo, hi uint64 // bits; a v128's low and high halves
	null   bool
	ref    uint64 // an externref's host value
}

// String renders a value exactly: two results are the same bits (and the
// same reference) exactly when their strings are equal.
func (v val) String() string {
	switch v.kind {
	case "i32", "f32":
		return fmt.Sprintf("%s:%#08x", v.kind, uint32(v.lo))
	case "i64", "f64":
		return fmt.Sprintf("%s:%#016x", v.kind, v.lo)
	case "v128":
		return fmt.Sprintf("v128:%016x_%016x", v.hi, v.lo)
	case "externref":
		if v.null {
			return "externref:null"
		}
		return fmt.Sprintf("externref:%d", v.ref)
	case "funcref":
		if v.null {
			return "funcref:null"
		}
		return "funcref:func"
	}
	return v.kind + ":?"
}

func render(vs []val) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = v.String()
	}
	return "[" + strings.Join(s, " ") + "]"
}

// parseNumber reads a wast2json number (the bits, as an unsigned or,
// rarely, a signed decimal) of the given bit width.
func parseNumber(s string, bits int) (uint64, error) {
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		return u & mask(bits), nil
	}
	i, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad number %q", s)
	}
	return uint64(i) & mask(bits), nil
}

func mask(bits int) uint64 {
	if bits >= 64 {
		return ^uint64(0)
	}
	return 1<<bits - 1
}

func laneBits(lane string) int {
	switch lane {
	case "i8":
		return 8
	case "i16":
		return 16
	case "i32", "f32":
		return 32
	}
	return 64
}

// arg converts a script argument (never a NaN pattern) into a value.
func arg(v wasmspec.Value) (val, error) {
	out := val{kind: v.Type}
	switch v.Type {
	case "i32", "f32", "i64", "f64":
		var s string
		if err := json.Unmarshal(v.Value, &s); err != nil {
			return out, err
		}
		bits := 32
		if v.Type == "i64" || v.Type == "f64" {
			bits = 64
		}
		n, err := parseNumber(s, bits)
		out.lo = n
		return out, err
	case "v128":
		var lanes []string
		if err := json.Unmarshal(v.Value, &lanes); err != nil {
			return out, err
		}
		w := laneBits(v.LaneType)
		for i, l := range lanes {
			n, err := parseNumber(l, w)
			if err != nil {
				return out, err
			}
			setLane(&out, i, w, n)
		}
		return out, nil
	case "externref", "funcref":
		var s string
		if err := json.Unmarshal(v.Value, &s); err != nil {
			return out, err
		}
		if s == "null" {
			out.null = true
			return out, nil
		}
		n, err := strconv.ParseUint(s, 10, 64)
		out.ref = n
		return out, err
	}
	return out, fmt.Errorf("unknown argument type %q", v.Type)
}

func setLane(v *val, i, w int, n uint64) {
	bit := i * w
	if bit < 64 {
		v.lo |= n << bit
	} else {
		v.hi |= n << (bit - 64)
	}
}

func lane(v val, i, w int) uint64 {
	bit := i * w
	if bit < 64 {
		return v.lo >> bit & mask(w)
	}
	return v.hi >> (bit - 64) & mask(w)
}

// matches reports whether got is what the script expects: the same bits,
// or a NaN of the expected kind (canonical: only the quiet bit set in the
// payload; arithmetic: the quiet bit set), lane by lane for v128.
func matches(v wasmspec.Value, got val) bool {
	if got.kind != v.Type {
		return false
	}
	switch v.Type {
	case "i32", "i64", "f32", "f64":
		var s string
		if json.Unmarshal(v.Value, &s) != nil {
			return false
		}
		bits := 32
		if v.Type == "i64" || v.Type == "f64" {
			bits = 64
		}
		return numberMatches(s, v.Type, bits, got.lo)
	case "v128":
		var lanes []string
		if json.Unmarshal(v.Value, &lanes) != nil {
			return false
		}
		w := laneBits(v.LaneType)
		kind := "i"
		if strings.HasPrefix(v.LaneType, "f") {
			kind = "f"
		}
		for i, l := range lanes {
			if !numberMatches(l, fmt.Sprintf("%s%d", kind, w), w, lane(got, i, w)) {
				return false
			}
		}
		return true
	case "externref", "funcref":
		if len(v.Value) == 0 {
			return true // any reference
		}
		var s string
		if json.Unmarshal(v.Value, &s) != nil {
			return false
		}
		if s == "null" {
			return got.null
		}
		n, err := strconv.ParseUint(s, 10, 64)
		return err == nil && !got.null && (v.Type == "funcref" || got.ref == n)
	}
	return false
}

func numberMatches(s, typ string, bits int, got uint64) bool {
	switch s {
	case "nan:canonical", "nan:arithmetic":
		var quiet, expo uint64
		switch typ {
		case "f32":
			quiet, expo = 1<<22, 0xff<<23
		case "f64":
			quiet, expo = 1<<51, 0x7ff<<52
		default:
			return false
		}
		if got&expo != expo || got&quiet == 0 {
			return false
		}
		if s == "nan:canonical" {
			payload := got &^ (expo | 1<<(bits-1))
			return payload == quiet
		}
		return true
	}
	want, err := parseNumber(s, bits)
	return err == nil && want == got&mask(bits)
}

// canonicalized reports whether got is plain's outcome of an
// assert_return with every NaN the plain engine returned replaced by the
// canonical NaN of its type (lane by lane for v128, by the lane type the
// script expects), and nothing else changed: what deterministic mode's
// NaN canonicalization must do.
func canonicalized(c wasmspec.Command, got, plain outcome) bool {
	if c.Type != "assert_return" || len(got.results) != len(plain.results) || len(plain.results) != len(c.Expected) ||
		!strings.HasPrefix(got.text, "ok ") || !strings.HasPrefix(plain.text, "ok ") {
		return false
	}
	for j, p := range plain.results {
		want := p
		switch p.kind {
		case "f32":
			want.lo = canonicalLane(p.lo, 32)
		case "f64":
			want.lo = canonicalLane(p.lo, 64)
		case "v128":
			w := laneBits(c.Expected[j].LaneType)
			if !strings.HasPrefix(c.Expected[j].LaneType, "f") {
				break
			}
			want.lo, want.hi = 0, 0
			for i := 0; i < 128/w; i++ {
				l := canonicalLane(lane(p, i, w), w) << (i * w % 64)
				if i*w < 64 {
					want.lo |= l
				} else {
					want.hi |= l
				}
			}
		}
		if got.results[j] != want {
			return false
		}
	}
	return true
}

// canonicalLane is the canonical NaN of a w-bit float lane when bits is a
// NaN, else bits.
func canonicalLane(bits uint64, w int) uint64 {
	if w == 32 {
		if f := math.Float32frombits(uint32(bits)); f != f {
			return 0x7fc00000
		}
		return bits
	}
	if f := math.Float64frombits(bits); f != f {
		return 0x7ff8000000000000
	}
	return bits
}

package abi

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDTypeNumbersAreXLAs(t *testing.T) {
	want := map[string]DType{"pred": 1, "s8": 2, "s16": 3, "s32": 4, "s64": 5, "u8": 6, "u16": 7, "u32": 8,
		"u64": 9, "f16": 10, "f32": 11, "f64": 12, "c64": 15, "bf16": 16, "c128": 18}
	for name, code := range want {
		d, err := ParseDType(name)
		require.NoError(t, err, name)
		assert.Equal(t, code, d, name)
		assert.Equal(t, name, d.String())
	}
	assert.Len(t, DTypes(), len(want))
	_, err := ParseDType("f8")
	assert.ErrorContains(t, err, `unknown dtype "f8"`)
	assert.False(t, DType(13).Valid())
	assert.Equal(t, uint32(0), DType(99).Size())
}

func TestParseSignature(t *testing.T) {
	cases := map[string]string{
		"(x: f32[n,m], v: f32[m]) -> f32[n]":          "(x: f32[n,m], v: f32[m]) -> f32[n]",
		"(f32[b,n])->f32[b,n]":                        "(f32[b,n]) -> f32[b,n]",
		"(x: f32[n]) -> $x":                           "(x: f32[n]) -> $x",
		"(x: f32[n]) -> $0":                           "(x: f32[n]) -> $x",
		"(f32[n]) -> ($0)":                            "(f32[n]) -> $0",
		"() -> (a: f32[], b: u8[16])":                 "() -> (a: f32[], b: u8[16])",
		"( values : f32 [ n ] , e: f32[k]) -> s64[k]": "(values: f32[n], e: f32[k]) -> s64[k]",
		"(bool[2], i32[3]) -> ()":                     "(pred[2], s32[3]) -> ()",
	}
	for in, want := range cases {
		s, err := ParseSignature(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, s.String(), in)
		again, err := ParseSignature(s.String())
		require.NoError(t, err)
		assert.True(t, s.Equal(again), "round trip of %q", in)
	}
}

func TestParseSignatureErrors(t *testing.T) {
	cases := map[string]string{
		"f32[n] -> f32[n]":                  `at byte 0: expected "("`,
		"(f32[n]) f32[n]":                   `expected "->"`,
		"(f33[n]) -> f32[n]":                `unknown dtype "f33"`,
		"(f32[n]) -> f32[m]":                `result 0 uses dimension "m", which no parameter binds`,
		"(x: f32[n], x: f32[n]) -> ()":      `parameter name "x" used twice`,
		"(f32[n]) -> $3":                    "passes through input 3, but there are 1 inputs",
		"(x: f32[n]) -> $y":                 "no parameter has that name",
		"(f32[n) -> f32[n]":                 `expected "," or "]"`,
		"(f32[99999999999999999999]) -> ()": "out of range",
		"(f32[n]) -> f32[n] junk":           "after the signature",
	}
	for in, want := range cases {
		_, err := ParseSignature(in)
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), want, in)
	}
}

func TestBind(t *testing.T) {
	s := MustParseSignature("(x: f32[n,m], v: f32[m]) -> (f32[n], s64[m,2], $v)")
	outs, err := s.Bind([]TensorMeta{{F32, Shape{3, 4}}, {F32, Shape{4}}})
	require.NoError(t, err)
	assert.Equal(t, []OutputSpec{{F32, Shape{3}, -1}, {S64, Shape{4, 2}, -1}, {F32, Shape{4}, 1}}, outs)

	_, err = s.Bind([]TensorMeta{{F32, Shape{3, 4}}, {F32, Shape{5}}})
	assert.EqualError(t, err, "argument 1 (v): expected f32[m=4], got f32[5] (dimension 0: m=4 was bound by argument 0)")
	_, err = s.Bind([]TensorMeta{{F64, Shape{3, 4}}, {F32, Shape{4}}})
	assert.EqualError(t, err, "argument 0 (x): expected f32[n,m], got f64[3,4]")
	_, err = s.Bind([]TensorMeta{{F32, Shape{3}}, {F32, Shape{4}}})
	assert.EqualError(t, err, "argument 0 (x): expected f32[n,m], got f32[3] (rank 1, want 2)")
	_, err = s.Bind([]TensorMeta{{F32, Shape{3, 4}}})
	assert.ErrorContains(t, err, "got 1 inputs")

	// A symbol repeated inside one tensor binds once: a square matrix.
	square := MustParseSignature("(a: f32[n,n]) -> f32[n]")
	outs, err = square.Bind([]TensorMeta{{F32, Shape{3, 3}}})
	require.NoError(t, err)
	assert.Equal(t, []OutputSpec{{F32, Shape{3}, -1}}, outs)
	_, err = square.Bind([]TensorMeta{{F32, Shape{2, 3}}})
	assert.EqualError(t, err, "argument 0 (a): expected f32[n=2,n=2], got f32[2,3] (dimension 1: n=2 was bound by argument 0)")
	_, err = square.Bind([]TensorMeta{{F32, Shape{3, 2}}})
	assert.EqualError(t, err, "argument 0 (a): expected f32[n=3,n=3], got f32[3,2] (dimension 1: n=3 was bound by argument 0)")
	// ... and across arguments, in both orders of binding.
	pair := MustParseSignature("(a: f32[n,k], b: f32[k,n]) -> f32[n,n]")
	outs, err = pair.Bind([]TensorMeta{{F32, Shape{2, 5}}, {F32, Shape{5, 2}}})
	require.NoError(t, err)
	assert.Equal(t, Shape{2, 2}, outs[0].Shape)
	_, err = pair.Bind([]TensorMeta{{F32, Shape{2, 5}}, {F32, Shape{5, 3}}})
	assert.EqualError(t, err, "argument 1 (b): expected f32[k=5,n=2], got f32[5,3] (dimension 1: n=2 was bound by argument 0)")
	_, err = pair.Bind([]TensorMeta{{F32, Shape{2, 5}}, {F32, Shape{4, 2}}})
	assert.EqualError(t, err, "argument 1 (b): expected f32[k=5,n=2], got f32[4,2] (dimension 0: k=5 was bound by argument 0)")

	fixed := MustParseSignature("(f32[2,3]) -> f32[]")
	_, err = fixed.Bind([]TensorMeta{{F32, Shape{2, 4}}})
	assert.ErrorContains(t, err, "dimension 1 is 4, want 3")
}

func TestSignatureTable(t *testing.T) {
	table, err := ParseSignatureTable([]byte("# comment\nscale = (f32[n], f32[]) -> f32[n]\n\x00\x00\nsum=(f32[n])->f32[]\nscale = (f32[n], f32[]) -> f32[n]\n"))
	require.NoError(t, err)
	assert.Len(t, table, 2)
	assert.Equal(t, "(f32[n]) -> f32[]", table["sum"].String())
	assert.Equal(t, "scale = (f32[n], f32[]) -> f32[n]\nsum = (f32[n]) -> f32[]\n", string(formatSignatureTable(table)))

	_, err = ParseSignatureTable([]byte("a = (f32[n]) -> f32[n]\na = (f32[n]) -> f64[n]\n"))
	assert.ErrorContains(t, err, "declared twice")
	_, err = ParseSignatureTable([]byte("no equals sign\n"))
	assert.ErrorContains(t, err, "line 1")
}

func TestTensorHelpers(t *testing.T) {
	x := From([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	require.NoError(t, x.Validate())
	assert.Equal(t, "f32[2,3]", x.Type())
	v, err := View[float32](x)
	require.NoError(t, err)
	assert.Equal(t, float32(6), v[5])
	_, err = View[int32](x)
	assert.ErrorContains(t, err, "cannot view f32 data as s32")

	s := Scalar[int64](7)
	assert.Equal(t, Shape{}, s.Shape)
	assert.Equal(t, "s64[]", s.Type())

	n, err := New(BF16, 2, 2)
	require.NoError(t, err)
	assert.Len(t, MustView[uint16](n), 4)

	bad := Tensor{DType: F32, Shape: Shape{3}, Data: make([]byte, 8)}
	assert.ErrorContains(t, bad.Validate(), "needs 12 bytes of data, has 8")
	_, err = Shape{-1}.NumElements()
	assert.ErrorContains(t, err, "negative")
	_, err = Shape{math.MaxInt64, math.MaxInt64}.NumElements()
	assert.ErrorContains(t, err, "overflows")
	assert.Panics(t, func() { From([]float32{1, 2}, 3) })
}

func TestFrameRoundTrip(t *testing.T) {
	for _, plan := range []func([]TensorMeta, []OutputSpec) (*FrameLayout, error){planFrame, planFrameSkewed} {
		ins := []TensorMeta{{F32, Shape{2, 3}}, {S32, Shape{}}, {U8, Shape{0}}}
		outs := []OutputSpec{{F64, Shape{3}, -1}, {F32, Shape{2, 3}, 0}}
		l, err := plan(ins, outs)
		require.NoError(t, err)
		const base = 1 << 16
		mem := make([]byte, base+int(l.Size)+128)
		frame := mem[base : base+int(l.Size)]
		require.NoError(t, l.WriteMeta(frame, base, 42))

		f, err := DecodeFrame(mem, base)
		require.NoError(t, err)
		assert.Equal(t, uint64(42), f.CallID)
		require.Len(t, f.Inputs, 3)
		require.Len(t, f.Outputs, 2)
		assert.Equal(t, Shape{2, 3}, f.Inputs[0].Shape)
		assert.Equal(t, uint32(24), f.Inputs[0].ByteLen)
		assert.Equal(t, Shape{}, f.Inputs[1].Shape)
		assert.Equal(t, uint32(0), f.Inputs[2].ByteLen)
		assert.Equal(t, f.Inputs[0].Data, f.Outputs[1].Data, "an aliased output shares its input's buffer")
		assert.Equal(t, FlagOutput|FlagAlias, f.Outputs[1].Flags)
		for _, d := range append(f.Inputs, f.Outputs...) {
			assert.Zero(t, d.Data%MinDataAlign, "data aligned to the ABI minimum")
		}
		meta := append([]byte(nil), frame[:l.MetaLen]...)
		require.NoError(t, l.Verify(frame, base, meta))

		// A write past output 0 is caught and located.
		end := l.Outputs[0].End()
		frame[end+2] ^= 0xff
		err = l.Verify(frame, base, meta)
		assert.ErrorContains(t, err, "guest wrote past the end of its 24-byte buffer: the first changed byte is at end+2")
		frame[end+2] ^= 0xff

		// A rewritten descriptor field is caught and named.
		descOut0 := FrameHeaderSize + 3*DescriptorSize
		binary.LittleEndian.PutUint32(frame[descOut0+16:], 8)
		err = l.Verify(frame, base, meta)
		assert.ErrorContains(t, err, "the data pointer of output 0's descriptor")
	}
}

func TestDecodeFrameRejectsHostileFrames(t *testing.T) {
	l, err := planFrame([]TensorMeta{{F32, Shape{4}}}, []OutputSpec{{F32, Shape{4}, -1}})
	require.NoError(t, err)
	const base = 256
	const in0, out0 = base + FrameHeaderSize, base + FrameHeaderSize + DescriptorSize
	fresh := func() []byte {
		mem := make([]byte, base+int(l.Size))
		require.NoError(t, l.WriteMeta(mem[base:], base, 1))
		return mem
	}
	le := binary.LittleEndian
	dims := func(m []byte, at int) uint64 { return uint64(le.Uint32(m[at+8:])) }
	// Each refusal names what it read and the guest address of the field
	// that is wrong: the descriptors' offsets are checked for the input
	// (index 0) and the output (index 1), so an offset computed from the
	// wrong descriptor or field shows.
	cases := []struct {
		name    string
		corrupt func(m []byte)
		what    string
		offset  func(m []byte) uint64
		msg     string
	}{
		{"magic", func(m []byte) { m[base] = 'X' }, "frame header", func([]byte) uint64 { return base }, "magic"},
		{"version", func(m []byte) { le.PutUint32(m[base+4:], 2) }, "frame header", func([]byte) uint64 { return base + 4 }, "version 2, want 1"},
		{"huge count", func(m []byte) { le.PutUint32(m[base+8:], math.MaxUint32) }, "descriptor array", func([]byte) uint64 { return in0 }, "outside guest memory"},
		{"unaligned descriptors", func(m []byte) { le.PutUint32(m[base+16:], in0+4) }, "descriptor array", func([]byte) uint64 { return in0 + 4 }, ""},
		{"dims pointer", func(m []byte) { le.PutUint32(m[in0+8:], math.MaxUint32-3) }, "dims array", func([]byte) uint64 { return math.MaxUint32 - 3 }, "outside guest memory"},
		{"rank", func(m []byte) { le.PutUint32(m[in0+4:], 1<<20) }, "descriptor", func([]byte) uint64 { return in0 + 4 }, "rank 1048576 exceeds 32"},
		{"rank one past the most", func(m []byte) { le.PutUint32(m[out0+4:], MaxRank+1) }, "descriptor", func([]byte) uint64 { return out0 + 4 }, "rank 33 exceeds 32"},
		{"dtype", func(m []byte) { le.PutUint32(m[in0:], 13) }, "descriptor", func([]byte) uint64 { return in0 }, "dtype 13 is not an ABI v1 type"},
		{"output dtype", func(m []byte) { le.PutUint32(m[out0:], 13) }, "descriptor", func([]byte) uint64 { return out0 }, "dtype 13"},
		{"byte length", func(m []byte) { le.PutUint32(m[in0+20:], 15) }, "descriptor", func([]byte) uint64 { return in0 + 20 }, "byte length 15 does not match f32[4] (16 bytes)"},
		{"output byte length", func(m []byte) { le.PutUint32(m[out0+20:], 17) }, "descriptor", func([]byte) uint64 { return out0 + 20 }, "byte length 17 does not match f32[4] (16 bytes)"},
		{"data pointer", func(m []byte) { le.PutUint32(m[in0+16:], math.MaxUint32-8) }, "tensor data", func([]byte) uint64 { return math.MaxUint32 - 8 }, "outside guest memory"},
		{"unaligned data", func(m []byte) { le.PutUint32(m[out0+16:], le.Uint32(m[out0+16:])+4) }, "tensor data", func(m []byte) uint64 { return uint64(le.Uint32(m[out0+16:])) }, ""},
		{"negative dim", func(m []byte) { le.PutUint64(m[dims(m, in0):], uint64(1<<63)) }, "descriptor", func(m []byte) uint64 { return dims(m, in0) }, "negative"},
		{"alias past the inputs", func(m []byte) { le.PutUint32(m[out0+12:], FlagOutput|FlagAlias); le.PutUint32(m[out0+24:], 9) }, "descriptor", func([]byte) uint64 { return out0 + 24 }, "alias 9 is not an input index"},
		{"alias one past the inputs", func(m []byte) { le.PutUint32(m[out0+12:], FlagOutput|FlagAlias); le.PutUint32(m[out0+24:], 1) }, "descriptor", func([]byte) uint64 { return out0 + 24 }, "alias 1 is not an input index"},
		{"alias on an input", func(m []byte) { le.PutUint32(m[in0+12:], FlagAlias) }, "descriptor", func([]byte) uint64 { return in0 + 24 }, "alias 0 is not an input index"},
		{"output flag on an input", func(m []byte) { le.PutUint32(m[in0+12:], FlagOutput) }, "descriptor", func([]byte) uint64 { return in0 + 12 }, "output flag is true for descriptor 0 of 1 inputs"},
		{"no output flag on an output", func(m []byte) { le.PutUint32(m[out0+12:], 0) }, "descriptor", func([]byte) uint64 { return out0 + 12 }, "output flag is false for descriptor 1 of 1 inputs"},
	}
	for _, c := range cases {
		mem := fresh()
		c.corrupt(mem)
		want := c.offset(mem)
		_, err := DecodeFrame(mem, base)
		var v *Violation
		require.ErrorAs(t, err, &v, c.name)
		assert.Equal(t, c.what, v.What, c.name)
		assert.Equal(t, want, v.Offset, "%s: %v", c.name, err)
		assert.Contains(t, v.Msg, c.msg, c.name)
	}
	_, err = DecodeFrame(make([]byte, 16), 0)
	assert.Error(t, err)

	// The boundaries themselves are accepted: an output aliasing the last
	// input, and a tensor of rank MaxRank.
	mem := fresh()
	le.PutUint32(mem[out0+12:], FlagOutput|FlagAlias)
	le.PutUint32(mem[out0+24:], 0)
	f, err := DecodeFrame(mem, base)
	require.NoError(t, err)
	assert.Equal(t, FlagOutput|FlagAlias, f.Outputs[0].Flags)
	shape := make(Shape, MaxRank)
	for i := range shape {
		shape[i] = 1
	}
	deep, err := planFrame([]TensorMeta{{U8, shape}}, nil)
	require.NoError(t, err)
	mem = make([]byte, base+int(deep.Size))
	require.NoError(t, deep.WriteMeta(mem[base:], base, 1))
	f, err = DecodeFrame(mem, base)
	require.NoError(t, err)
	assert.Len(t, f.Inputs[0].Shape, MaxRank)
}

func TestGuestBytes(t *testing.T) {
	mem := make([]byte, 100)
	b, err := GuestBytes(mem, 90, 10, "x")
	require.NoError(t, err)
	assert.Len(t, b, 10)
	assert.Equal(t, 10, cap(b), "the slice cannot be extended past its range")
	for _, c := range [][2]uint64{{91, 10}, {math.MaxUint32, 2}, {0, math.MaxUint64}, {math.MaxUint64, 1}} {
		_, err := GuestBytes(mem, c[0], c[1], "x")
		assert.Error(t, err, "%v", c)
	}
	_, err = GuestBytes(mem, 100, 0, "x")
	assert.NoError(t, err)
}

func TestStatus(t *testing.T) {
	assert.True(t, StatusInvalidArgument.Valid())
	assert.Equal(t, "INVALID_ARGUMENT", StatusInvalidArgument.String())
	assert.False(t, Status(77).Valid())
	assert.Equal(t, "status(77)", Status(77).String())
}

func TestStridesMustFitWasm32(t *testing.T) {
	empty := Tensor{DType: F32, Shape: Shape{0, 5_000_000_000}, Data: []byte{}}
	assert.ErrorContains(t, empty.Validate(), "strides beyond the 4 GiB")
	ok := Tensor{DType: F32, Shape: Shape{0, 1000}, Data: []byte{}}
	assert.NoError(t, ok.Validate())
}

func TestSignatureTableTrailingComment(t *testing.T) {
	table, err := ParseSignatureTable([]byte("tap = (x: f32[n]) -> $x   # passes x through\n"))
	require.NoError(t, err)
	assert.Equal(t, "(x: f32[n]) -> $x", table["tap"].String())
}

func TestPredBytesAreZeroOrOne(t *testing.T) {
	bad := Tensor{DType: PRED, Shape: Shape{3}, Data: []byte{0, 1, 2}}
	assert.ErrorContains(t, bad.Validate(), "element 2 is 2")
	assert.NoError(t, From([]bool{true, false}).Validate())
}

// TestBounds checks each limit of the ABI at the bound and one past it,
// where an off-by-one (< for <=, or the reverse) would show: ranks,
// byte lengths, table lookups and the line numbers errors report.
func TestBounds(t *testing.T) {
	// Ranks: MaxRank is allowed, one more is not (shapes and signatures).
	ones := func(n int) Shape {
		s := make(Shape, n)
		for i := range s {
			s[i] = 1
		}
		return s
	}
	n, err := ones(MaxRank).NumElements()
	require.NoError(t, err)
	assert.Equal(t, uint64(1), n)
	_, err = ones(MaxRank + 1).NumElements()
	assert.EqualError(t, err, "rank 33 exceeds the ABI maximum 32")
	dims := func(n int) string { return strings.TrimSuffix(strings.Repeat("1,", n), ",") }
	_, err = ParseSignature("(x: f32[" + dims(MaxRank) + "]) -> f32[" + dims(MaxRank) + "]")
	require.NoError(t, err)
	_, err = ParseSignature("(x: f32[" + dims(MaxRank+1) + "]) -> f32[]")
	assert.ErrorContains(t, err, "rank 33")
	_, err = ParseSignature("(x: f32[]) -> f32[" + dims(MaxRank+1) + "]")
	assert.ErrorContains(t, err, "rank 33")

	// Byte lengths: MaxTensorBytes is allowed, one more is not.
	assert.NoError(t, Shape{0, MaxTensorBytes}.checkStrides(U8))
	assert.Error(t, Shape{0, MaxTensorBytes + 1}.checkStrides(U8))
	_, err = New(U8, MaxTensorBytes+1)
	assert.ErrorContains(t, err, "above the ABI maximum")
	big := Tensor{DType: U8, Shape: Shape{MaxTensorBytes + 1}}
	assert.ErrorContains(t, big.Validate(), "above the ABI maximum")
	_, err = MustParseSignature("(x: u8[n]) -> u8[n]").Bind([]TensorMeta{{U8, Shape{MaxTensorBytes}}})
	assert.NoError(t, err, "a result of exactly MaxTensorBytes")
	_, err = MustParseSignature("(x: u8[n]) -> (u8[n], u8[2])").Bind([]TensorMeta{{U8, Shape{MaxTensorBytes}}})
	assert.NoError(t, err)
	_, err = MustParseSignature("(x: u16[n]) -> u16[n]").Bind([]TensorMeta{{U16, Shape{MaxTensorBytes/2 + 1}}})
	assert.ErrorContains(t, err, "too large for the ABI")
	// Overflow of the element count and of the byte length.
	_, err = Shape{1 << 32, 1 << 32}.NumElements()
	assert.ErrorContains(t, err, "overflows")
	n, err = Shape{1 << 31, 1 << 32}.NumElements()
	require.NoError(t, err)
	assert.Equal(t, uint64(1)<<63, n)
	_, err = Shape{1 << 61}.ByteLen(F64) // 2^64 bytes
	assert.ErrorContains(t, err, "overflows")
	b, err := Shape{1<<61 - 1}.ByteLen(F64)
	require.NoError(t, err)
	assert.Equal(t, uint64(math.MaxUint64-7), b)

	// Table lookups one past their end name the value instead of panicking.
	assert.False(t, DType(len(dtypeTable)).Valid())
	assert.True(t, C128.Valid())
	assert.Equal(t, "unknown", numKinds.String())
	assert.Equal(t, "Unknown", numKinds.Ident())
	last := numKinds - 1
	assert.Equal(t, kindIdents[last], last.Ident())
	assert.Equal(t, kindNames[last], last.String())
	assert.Equal(t, "UNAUTHENTICATED", Code(len(codeNames)-1).String())
	assert.Equal(t, "code(17)", Code(len(codeNames)).String())
	assert.Equal(t, "code(-1)", Code(-1).String())
	assert.Len(t, Kinds(), int(numKinds)-1)

	// The largest count that does not overflow, and a dimension 0 checked
	// for strides as well as the last one.
	n, err = Shape{math.MaxUint64 / 3, 3}.NumElements()
	require.NoError(t, err)
	assert.Equal(t, uint64(math.MaxUint64), n)
	assert.Error(t, Shape{MaxTensorBytes + 1, 0}.checkStrides(U8))
	// A tensor of exactly MaxTensorBytes is within the maximum: what is
	// wrong with this one is its missing data.
	exact := Tensor{DType: U8, Shape: Shape{MaxTensorBytes}}
	assert.ErrorContains(t, exact.Validate(), "needs 4294967295 bytes of data, has 0")
	// Empty tensors: no data, and a zero dimension binds a symbol.
	e, err := New(F32, 0)
	require.NoError(t, err)
	assert.Empty(t, e.Data)
	assert.NotNil(t, From([]float32{}, 0).Data)
	outs, err := MustParseSignature("(x: f32[n]) -> f32[n]").Bind([]TensorMeta{{F32, Shape{0}}})
	require.NoError(t, err)
	assert.Equal(t, Shape{0}, outs[0].Shape)
	var ae *ArgumentError
	_, err = MustParseSignature("(x: f32[n]) -> f32[n]").Bind(nil)
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, -1, ae.Index, "a count mismatch names no argument")
	// Views: same-size dtypes are not interchangeable, but f16/bf16 view as u16.
	_, err = View[uint16](From([]int16{1}, 1))
	assert.ErrorContains(t, err, "cannot view s16 data as u16")
	h, err := New(BF16, 1)
	require.NoError(t, err)
	_, err = View[uint16](h)
	assert.NoError(t, err)
	// Pass-through results name an existing parameter: the last one, not
	// one past it.
	_, err = ParseSignature("(x: f32[], y: s8[2]) -> $1")
	require.NoError(t, err)
	_, err = ParseSignature("(x: f32[], y: s8[2]) -> $2")
	assert.Error(t, err)
	// Identifiers start with a letter or underscore: every edge of the
	// ranges.
	for _, name := range []string{"a", "z", "A", "Z", "_"} {
		_, err := ParseSignature("(" + name + ": f32[" + name + "]) -> f32[" + name + "]")
		assert.NoError(t, err, name)
	}
	for _, name := range []string{"`", "{", "@", "["} {
		_, err := ParseSignature("(" + name + ": f32[]) -> f32[]")
		assert.Error(t, err, name)
	}
	assert.Equal(t, "OK", Code(0).String())
	// Frame planning: an output may alias the last input, not one past it;
	// a frame may end exactly at the 4 GiB boundary, not one byte past.
	_, err = Plan([]TensorMeta{{F32, Shape{2}}}, []OutputSpec{{F32, Shape{2}, 0}}, PlanOptions{})
	require.NoError(t, err)
	_, err = Plan([]TensorMeta{{F32, Shape{2}}}, []OutputSpec{{F32, Shape{2}, 1}}, PlanOptions{})
	assert.ErrorContains(t, err, "output 0 aliases input 1 of 1")
	l, err := Plan([]TensorMeta{{F32, Shape{2}}}, nil, PlanOptions{})
	require.NoError(t, err)
	frame := make([]byte, l.Size)
	require.NoError(t, l.WriteMeta(frame, uint32(math.MaxUint32-l.Size), 1))
	assert.ErrorContains(t, l.WriteMeta(frame, uint32(math.MaxUint32-l.Size+1), 1), "passes the 4 GiB guest address space")

	// Errors count lines from 1.
	_, err = ParseSignatureTable([]byte("a = (f32[n]) -> f32[n]\nb = (f32[n) -> f32[n]\n"))
	assert.ErrorContains(t, err, "signature table line 2 (b)")
	_, err = ParseSignatureTable([]byte("\na = (f32[n]) -> f32[n]\na = (f64[n]) -> f64[n]\n"))
	assert.ErrorContains(t, err, "signature table line 3: a declared twice")
}

// TestPlanPlacesEveryBuffer: data buffers of odd sizes start on DataAlign
// boundaries (16 past one, skewed), after the metadata and each other's
// ends (an output's guard included), and an input the caller placed
// (zero-copy) is used where it is.
func TestPlanPlacesEveryBuffer(t *testing.T) {
	ins := []TensorMeta{{U8, Shape{1}}, {U8, Shape{3}}, {F64, Shape{5}}, {S16, Shape{}}}
	outs := []OutputSpec{{U8, Shape{7}, -1}, {S16, Shape{3}, -1}, {U8, Shape{3}, 1}}
	for _, skewed := range []bool{false, true} {
		l, err := Plan(ins, outs, PlanOptions{Skewed: skewed})
		require.NoError(t, err)
		want := uint32(0)
		if skewed {
			want = MinDataAlign
		}
		end := uint64(l.MetaLen)
		for i, r := range l.Inputs {
			assert.Equal(t, want, r.Off%DataAlign, "input %d at %d", i, r.Off)
			assert.GreaterOrEqual(t, uint64(r.Off), end, "input %d overlaps what precedes it", i)
			end = r.End()
		}
		for i, r := range l.Outputs[:2] {
			assert.Equal(t, want, r.Off%DataAlign, "output %d at %d", i, r.Off)
			assert.GreaterOrEqual(t, uint64(r.Off), end, "output %d overlaps what precedes it", i)
			assert.Equal(t, r.End(), uint64(l.Guards[i].Off), "output %d's guard follows it", i)
			end = l.Guards[i].End()
		}
		assert.Equal(t, l.Inputs[1], l.Outputs[2], "the aliased output is its input's buffer")
		assert.LessOrEqual(t, end, uint64(l.Size))
	}
	// Packed tightly: a buffer of exactly DataAlign bytes is followed at
	// once by the next; the first starts at the first boundary past the
	// metadata.
	l, err := Plan([]TensorMeta{{F32, Shape{16}}, {U8, Shape{1}}}, nil, PlanOptions{})
	require.NoError(t, err)
	assert.Equal(t, (l.MetaLen+DataAlign-1)/DataAlign*DataAlign, l.Inputs[0].Off)
	assert.Equal(t, l.Inputs[0].Off+DataAlign, l.Inputs[1].Off)
	// A caller-placed input may end on the last byte of the address space,
	// not one past it.
	_, err = Plan([]TensorMeta{{U8, Shape{15}}}, nil, PlanOptions{InputAt: []uint32{math.MaxUint32 - 15}})
	require.NoError(t, err)
	_, err = Plan([]TensorMeta{{U8, Shape{16}}}, nil, PlanOptions{InputAt: []uint32{math.MaxUint32 - 15}})
	assert.ErrorContains(t, err, "out of range")
	l, err = Plan(ins[:2], nil, PlanOptions{InputAt: []uint32{0, 4096}})
	require.NoError(t, err)
	assert.Equal(t, Region{Off: 4096, Len: 3, Abs: true}, l.Inputs[1], "the caller's placement")
	assert.False(t, l.Inputs[0].Abs, "0: placed in the frame")
	_, err = Plan(ins[:1], nil, PlanOptions{InputAt: []uint32{4100}})
	assert.ErrorContains(t, err, "misaligned")
	// A signature cut short anywhere is an error, never a panic.
	for _, text := range []string{"(", "(x", "(x:", "(x: f32[", "(x: f32[n]) ->", "(x: f32[n]) -> $"} {
		_, err := ParseSignature(text)
		assert.Error(t, err, text)
	}
}

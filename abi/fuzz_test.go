package abi

import (
	"bytes"
	"errors"
	"testing"
)

// Fuzz targets for everything in abi that reads guest- or user-controlled
// bytes: the frame decoder (the reference for guest SDKs), the host's
// post-call frame check, the signature parser and the signature table.

// FuzzDecodeFrame decodes arbitrary guest memory at an arbitrary address.
// It must not panic, and whatever it accepts must be in bounds and
// self-consistent.
func FuzzDecodeFrame(f *testing.F) {
	l, err := planFrame([]TensorMeta{{F32, Shape{2, 3}}, {S32, Shape{}}}, []OutputSpec{{F64, Shape{3}, -1}, {F32, Shape{2, 3}, 0}})
	if err != nil {
		f.Fatal(err)
	}
	for _, base := range []uint32{0, 64, 1000} {
		mem := make([]byte, int(base)+int(l.Size))
		if err := l.WriteMeta(mem[base:], base, 7); err != nil {
			f.Fatal(err)
		}
		f.Add(mem, base)
	}
	f.Add([]byte{}, uint32(0))
	f.Add(make([]byte, 64), uint32(0xffffffe0))
	f.Fuzz(func(t *testing.T, mem []byte, ptr uint32) {
		fr, err := DecodeFrame(mem, ptr)
		if err != nil {
			var v *Violation
			if !errors.As(err, &v) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		for _, d := range append(fr.Inputs, fr.Outputs...) {
			if uint64(d.Data)+uint64(d.ByteLen) > uint64(len(mem)) {
				t.Fatalf("accepted data [%d, +%d) outside %d bytes", d.Data, d.ByteLen, len(mem))
			}
			if n, err := d.Shape.ByteLen(d.DType); err != nil || n != uint64(d.ByteLen) {
				t.Fatalf("accepted %s%s with byte length %d", d.DType, d.Shape, d.ByteLen)
			}
			if len(d.Shape) > MaxRank || d.Data%MinDataAlign != 0 {
				t.Fatalf("accepted rank %d, data %d", len(d.Shape), d.Data)
			}
		}
	})
}

// fuzzMetas turns bytes into tensor types: each input takes a dtype byte,
// a rank byte (0..3) and up to three dimension bytes (0..15).
func fuzzMetas(b []byte, max int) []TensorMeta {
	dtypes := DTypes()
	var out []TensorMeta
	for len(b) >= 2 && len(out) < max {
		m := TensorMeta{DType: dtypes[int(b[0])%len(dtypes)], Shape: Shape{}}
		rank := int(b[1]) % 4
		b = b[2:]
		for j := 0; j < rank && len(b) > 0; j++ {
			m.Shape = append(m.Shape, int64(b[0]%16))
			b = b[1:]
		}
		out = append(out, m)
	}
	return out
}

// FuzzFrameVerify lays out a frame for fuzzed tensor types, lets a "guest"
// flip one byte of it, and checks Verify: it must fail exactly when the
// byte is in the metadata or a guard, naming that byte's address, and the
// untouched frame must decode to the types it was planned from.
func FuzzFrameVerify(f *testing.F) {
	f.Add([]byte{10, 2, 3, 4, 3, 0}, []byte{10, 1, 5}, uint32(0), byte(1), false)
	f.Add([]byte{10, 1, 4}, []byte{}, uint32(200), byte(0x80), true)
	f.Add([]byte{}, []byte{1, 0}, uint32(40), byte(0xff), false)
	f.Fuzz(func(t *testing.T, ins, outs []byte, at uint32, flip byte, skewed bool) {
		inputs := fuzzMetas(ins, 4)
		var outputs []OutputSpec
		for i, m := range fuzzMetas(outs, 4) {
			alias := -1
			if len(inputs) > 0 && m.Shape.Equal(Shape{0}) && i%2 == 0 {
				alias = i % len(inputs)
				m = inputs[alias]
			}
			outputs = append(outputs, OutputSpec{DType: m.DType, Shape: m.Shape, Alias: alias})
		}
		l, err := Plan(inputs, outputs, PlanOptions{Skewed: skewed})
		if err != nil {
			t.Fatalf("plan: %v", err)
		}
		const base = 4096
		mem := make([]byte, base+int(l.Size)+64)
		frame := mem[base : base+int(l.Size)]
		if err := l.WriteMeta(frame, base, 1); err != nil {
			t.Fatal(err)
		}
		meta := bytes.Clone(frame[:l.MetaLen])
		if err := l.Verify(frame, base, meta); err != nil {
			t.Fatalf("untouched frame: %v", err)
		}
		fr, err := DecodeFrame(mem, base)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if len(fr.Inputs) != len(inputs) || len(fr.Outputs) != len(outputs) {
			t.Fatalf("decoded %d/%d tensors, planned %d/%d", len(fr.Inputs), len(fr.Outputs), len(inputs), len(outputs))
		}
		for i, in := range inputs {
			if fr.Inputs[i].DType != in.DType || !fr.Inputs[i].Shape.Equal(in.Shape) {
				t.Fatalf("input %d decoded as %s%s", i, fr.Inputs[i].DType, fr.Inputs[i].Shape)
			}
		}
		if flip == 0 || l.Size == 0 {
			return
		}
		off := at % l.Size
		frame[off] ^= flip
		guarded := off < l.MetaLen
		for _, g := range l.Guards {
			if g.Len > 0 && uint64(off) >= uint64(g.Off) && uint64(off) < g.End() {
				guarded = true
			}
		}
		err = l.Verify(frame, base, meta)
		if !guarded {
			if err != nil {
				t.Fatalf("byte %d is data or padding, yet: %v", off, err)
			}
			return
		}
		var v *Violation
		if !errors.As(err, &v) {
			t.Fatalf("byte %d (meta %d) changed unnoticed: %v", off, l.MetaLen, err)
		}
		if v.Offset != base+uint64(off) {
			t.Fatalf("violation at %d, the byte changed is at %d", v.Offset, base+uint64(off))
		}
	})
}

// FuzzParseSignature parses arbitrary text as a signature. It must not
// panic; a signature it accepts must print canonically and parse back to
// itself, and binding it to inputs made from the fuzz bytes must either
// fail with an *ArgumentError or derive sane outputs.
func FuzzParseSignature(f *testing.F) {
	for _, s := range []string{
		"(x: f32[n,m], v: f32[m]) -> f32[n]",
		"(f32[b,n]) -> f32[b,n]",
		"(values: f32[n], edges: f32[k]) -> s64[k]",
		"(x: f32[n]) -> $x",
		"(x: f32[n], y: u8[]) -> ($1, $0, z: c128[n,n,2])",
		"() -> (a: f32[], b: u8[16])",
		"(a: bf16[9223372036854775807]) -> f16[9223372036854775807,2]",
		"(x: f32[n]) -> $9",
		"((",
	} {
		f.Add(s, []byte{2, 3, 1})
	}
	f.Fuzz(func(t *testing.T, text string, dims []byte) {
		sig, err := ParseSignature(text)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		again, err := ParseSignature(sig.String())
		if err != nil || !again.Equal(sig) {
			t.Fatalf("%q printed as %q, which parses to %v (%v)", text, sig.String(), again, err)
		}
		// Bind inputs whose symbols take values from dims.
		metas := make([]TensorMeta, len(sig.Params))
		for i, p := range sig.Params {
			metas[i] = TensorMeta{DType: p.DType, Shape: make(Shape, len(p.Dims))}
			for j, d := range p.Dims {
				v := d.Size
				if d.Sym != "" || len(dims) > 0 && dims[0]&1 == 1 {
					v = 0
					if len(dims) > 0 {
						v = int64(dims[0] >> 1)
						dims = dims[1:]
					}
				}
				metas[i].Shape[j] = v
			}
		}
		outs, err := sig.Bind(metas)
		if err != nil {
			return
		}
		if len(outs) != len(sig.Results) {
			t.Fatalf("%d outputs for %d results", len(outs), len(sig.Results))
		}
		for i, o := range outs {
			n, err := o.Shape.ByteLen(o.DType)
			if err != nil || n > MaxTensorBytes {
				t.Fatalf("output %d: %s%s accepted (%v)", i, o.DType, o.Shape, err)
			}
			if o.Alias >= len(metas) {
				t.Fatalf("output %d aliases input %d of %d", i, o.Alias, len(metas))
			}
		}
	})
}

// FuzzSignatureTable parses arbitrary bytes as a signature table (the
// callbox.signatures section or the callbox_signatures export's text). It
// must not panic, and a table it accepts must format and parse back to
// itself.
func FuzzSignatureTable(f *testing.F) {
	f.Add([]byte("scale = (x: f32[n], k: f32[]) -> f32[n]\n# comment\n\nsoftmax=(f32[b,n])->f32[b,n]\x00\x00"))
	f.Add([]byte("a = () -> u8[]\na = () -> u8[]\n"))
	f.Add([]byte("=\n"))
	f.Add([]byte("\xff\xfe = (x: f32[n]) -> $x\r\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		table, err := ParseSignatureTable(text)
		if err != nil {
			return
		}
		again, err := ParseSignatureTable(formatSignatureTable(table))
		if err != nil {
			t.Fatalf("formatted table does not parse: %v\n%s", err, formatSignatureTable(table))
		}
		if len(again) != len(table) {
			t.Fatalf("%d entries became %d", len(table), len(again))
		}
		for name, sig := range table {
			if other, ok := again[name]; !ok || !other.Equal(sig) {
				t.Fatalf("entry %q: %v became %v", name, sig, other)
			}
		}
	})
}

package bench

import "bytes"

// A minimal WebAssembly encoder for the modules the targets generate: an
// ABI v1 guest with a given initial memory (the fresh-instance floor) and
// one padded with code to a given size (the module cache).

func uleb(v uint64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			c |= 0x80
		}
		b = append(b, c)
		if v == 0 {
			return b
		}
	}
}

func sleb(v int64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		done := (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0)
		if !done {
			c |= 0x80
		}
		b = append(b, c)
		if done {
			return b
		}
	}
}

func section(id byte, payload []byte) []byte {
	return append(append([]byte{id}, uleb(uint64(len(payload)))...), payload...)
}

func vec(items ...[]byte) []byte {
	out := uleb(uint64(len(items)))
	for _, it := range items {
		out = append(out, it...)
	}
	return out
}

func name(s string) []byte { return append(uleb(uint64(len(s))), s...) }

const (
	i32   = 0x7f
	opEnd = 0x0b
)

// body is a function body with no locals.
func body(code ...byte) []byte {
	b := append([]byte{0}, code...) // no local declarations
	b = append(b, opEnd)
	return append(uleb(uint64(len(b))), b...)
}

// genModule builds an ABI v1 module: memory of pages initial pages (and a
// 1 KiB data segment), callbox_abi_version, a bump callbox_alloc, and a
// callback "noop" = (frame) -> 0; then fillers functions of about
// fillerBytes of straight-line code each, which nothing calls but every
// compiler compiles.
func genModule(pages uint32, fillers, fillerBytes int) []byte {
	var m bytes.Buffer
	m.Write([]byte{0, 'a', 's', 'm', 1, 0, 0, 0})
	types := vec(
		[]byte{0x60, 0, 1, i32},           // 0: () -> i32
		[]byte{0x60, 2, i32, i32, 1, i32}, // 1: (i32, i32) -> i32
		[]byte{0x60, 1, i32, 1, i32},      // 2: (i32) -> i32
	)
	m.Write(section(1, types))
	funcs := [][]byte{{0}, {1}, {2}}
	for i := 0; i < fillers; i++ {
		funcs = append(funcs, []byte{2})
	}
	m.Write(section(3, vec(funcs...)))
	m.Write(section(5, vec(append([]byte{0}, uleb(uint64(pages))...)))) // memory, no maximum
	// global 0: the heap top, mutable i32, starting at 4096.
	m.Write(section(6, vec(append([]byte{i32, 1, 0x41}, append(sleb(4096), opEnd)...))))
	m.Write(section(7, vec(
		append(name("memory"), 2, 0),
		append(name("callbox_abi_version"), 0, 0),
		append(name("callbox_alloc"), 0, 1),
		append(name("noop"), 0, 2),
	)))
	var code [][]byte
	code = append(code, body(0x41, 1)) // i32.const 1
	// alloc(size, align): p = (heap + align-1) & -align; heap = p + size;
	// grow memory when needed; return p.
	alloc := []byte{
		0x23, 0, 0x20, 1, 0x41, 1, 0x6b, 0x6a, // heap + (align - 1)
		0x41, 0, 0x20, 1, 0x6b, 0x71, // & -align
		0x21, 1, // align := p (reuse the local)
		0x20, 1, 0x20, 0, 0x6a, 0x24, 0, // heap = p + size
		0x23, 0, 0x41, 0xff, 0xff, 0x03, 0x6a, 0x41, 16, 0x76, // (heap + 65535) >> 16
		0x3f, 0, 0x6b, // - memory.size
		0x21, 0, // size := pages to grow
		0x20, 0, 0x41, 0, 0x4a, // > 0 ?
		0x04, 0x40, // if
		0x20, 0, 0x40, 0, 0x1a, // memory.grow; drop
		0x0b,
		0x20, 1,
	}
	code = append(code, body(alloc...))
	code = append(code, body(0x41, 0)) // noop: status 0
	var filler []byte
	for k := 0; len(filler) < fillerBytes; k++ {
		// local0 = (local0 + c1) ^ c2
		filler = append(filler, 0x20, 0, 0x41)
		filler = append(filler, sleb(int64(1000+k%7000))...)
		filler = append(filler, 0x6a, 0x41)
		filler = append(filler, sleb(int64(2000+k%5000))...)
		filler = append(filler, 0x73, 0x21, 0)
	}
	filler = append(filler, 0x20, 0)
	fb := body(filler...)
	for i := 0; i < fillers; i++ {
		code = append(code, fb)
	}
	m.Write(section(10, vec(code...)))
	// data: 1 KiB at address 1024.
	seg := append([]byte{0, 0x41}, sleb(1024)...)
	seg = append(seg, opEnd)
	seg = append(seg, uleb(1024)...)
	seg = append(seg, bytes.Repeat([]byte{0xcb}, 1024)...)
	m.Write(section(11, vec(seg)))
	return m.Bytes()
}

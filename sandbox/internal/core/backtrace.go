package core

import (
	"strings"
	"sync"

	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/meter"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/symbols"
)

// RawFrame is what an engine reports of one frame, in the module it ran
// (the rewritten one, where the meter rewrote it).
type RawFrame struct {
	// Name is the engine's name for the function ("mod.f", "$12"); used
	// only for a frame in an imported function, or when nothing else is
	// known.
	Name string
	// Func is the function index, when FuncKnown.
	Func      uint32
	FuncKnown bool
	// CodeOffset is the instruction's offset relative to the code
	// section's contents (as DWARF and wazero count), when OffsetKnown.
	CodeOffset  uint64
	OffsetKnown bool
	// Import marks a frame in an imported (host) function: Name is its
	// "module.name".
	Import bool
}

// MaxFrames is the most frames a trap keeps, innermost first.
const MaxFrames = 64

// Backtrace explains an engine's frames in the terms of the module its
// author built: it maps function indices and offsets back through the
// meter's rewrite and names them from the module's name section and DWARF.
// It reads the module (and redoes the rewrite, to map it) the first time
// a trap needs it, never on the call path. Safe for concurrent use.
type Backtrace struct {
	wasm  []byte
	opts  *meter.Options
	once  sync.Once
	table *symbols.Table
	smap  *meter.SourceMap
}

// NewBacktrace is the backtrace of a module: wasm as its author built it,
// and the meter's options when the engine ran it rewritten (nil: as is).
// wasm is kept, not copied: the caller must not change it.
func NewBacktrace(wasm []byte, opts *meter.Options) *Backtrace {
	return &Backtrace{wasm: wasm, opts: opts}
}

func (b *Backtrace) load() {
	b.once.Do(func() {
		b.table = symbols.Read(b.wasm)
		if b.opts != nil {
			// The same rewrite, mapped; where it fails, the engine ran
			// the module as is (wasmtime without fuel does so).
			if _, smap, err := meter.InstrumentMapped(b.wasm, *b.opts); err == nil {
				b.smap = smap
			}
		}
	})
}

// ModuleOffset turns an offset in the bytes the engine ran (wasmtime's
// module offsets) into a code-relative one.
func (b *Backtrace) ModuleOffset(off uint64) (uint64, bool) {
	b.load()
	start := b.table.CodeStart()
	if b.smap != nil {
		start = b.smap.CodeStart(true)
	}
	if off < start {
		return 0, false
	}
	return off - start, true
}

// Frames resolves raw frames, innermost first. Frames in functions the
// rewrite added (the meter's imports and its memory.grow wrapper) are
// left out: they are the sandbox's, not the author's.
func (b *Backtrace) Frames(raw []RawFrame) []sandbox.Frame {
	if len(raw) == 0 {
		return nil
	}
	b.load()
	out := make([]sandbox.Frame, 0, min(len(raw), MaxFrames))
	for _, r := range raw {
		if len(out) == MaxFrames {
			break
		}
		if f, ok := b.frame(r); ok {
			out = append(out, f)
		}
	}
	return out
}

func (b *Backtrace) frame(r RawFrame) (sandbox.Frame, bool) {
	if r.Import {
		mod, _, _ := strings.Cut(r.Name, ".")
		if mod == meter.RefillModule {
			return sandbox.Frame{}, false
		}
		return sandbox.Frame{Module: symbols.Demangle(mod), Func: symbols.Demangle(r.Name)}, true
	}
	var f sandbox.Frame
	idx, known := r.Func, r.FuncKnown
	if known && b.smap != nil {
		if idx, known = b.smap.Function(r.Func); !known {
			return f, false // a function the rewrite added
		}
	}
	if r.OffsetKnown {
		off, ok := r.CodeOffset, true
		if b.smap != nil {
			off, ok = b.smap.CodeOffset(r.CodeOffset)
		}
		if !ok {
			return f, false // in the rewrite's memory.grow wrapper
		}
		if i, ok := b.table.FuncAt(off); ok {
			idx, known = i, true
		}
		f.Offset = off + b.table.CodeStart()
		if src, ok := b.table.Source(off); ok {
			f.File, f.Line, f.Column = src.File, src.Line, src.Column
		}
	}
	if known {
		f.FuncIndex = idx
		f.Func = b.table.Name(idx)
	} else {
		f.Func = symbols.Demangle(r.Name)
	}
	if f.Func == "" && f.Offset != 0 {
		f.Func = b.table.NameAt(f.Offset - b.table.CodeStart())
	}
	return f, true
}

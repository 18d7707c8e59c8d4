//go:build linux

package procwall

import (
	"errors"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/core"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/symbols"
)

// remoteError is an error that crossed from the worker: its text, and the
// trap it wraps when there was one (errors.As finds it, as it would have in
// process).
type remoteError struct {
	text string
	trap *sandbox.Trap
}

func (e *remoteError) Error() string { return e.text }
func (e *remoteError) Unwrap() error {
	if e.trap == nil {
		return nil
	}
	return e.trap
}

// Error encodings: the first byte.
const (
	errNone    = 0 // nil
	errText    = 1 // text, then whether a trap follows, and the trap
	errInvalid = 2 // an *core.InvalidModuleError: validator, reason
)

// err writes err (nil included).
func (e *enc) err(err error) {
	if err == nil {
		e.u8(errNone)
		return
	}
	var inv *sandbox.InvalidModuleError
	if errors.As(err, &inv) {
		e.u8(errInvalid)
		e.str(inv.Validator)
		e.str(inv.Err.Error())
		return
	}
	e.u8(errText)
	e.str(err.Error())
	t, ok := sandbox.AsTrap(err)
	e.bool(ok)
	if ok {
		e.trap(t)
	}
}

func (e *enc) trap(t *sandbox.Trap) {
	e.u8(byte(t.Class))
	e.str(t.Message)
	e.u32(uint32(len(t.Frames)))
	for _, f := range t.Frames {
		e.str(f.Module)
		e.str(f.Func)
		e.u32(f.FuncIndex)
		e.u64(f.Offset)
		e.str(f.File)
		e.u32(f.Line)
		e.u32(f.Column)
	}
}

// error reads an error written by enc.err: nil, an invalid module, the
// trap itself when the text is the trap's, or a remoteError wrapping it.
func (d *dec) error() error {
	switch d.u8() {
	case errNone:
		return nil
	case errInvalid:
		return &sandbox.InvalidModuleError{Validator: d.str(), Err: errors.New(d.str())}
	}
	text := d.str()
	if !d.bool() {
		return &remoteError{text: text}
	}
	t := d.trap()
	if t.Error() == text {
		return t
	}
	return &remoteError{text: text, trap: t}
}

func (d *dec) trap() *sandbox.Trap {
	class := abi.Kind(d.u8())
	if !class.Valid() {
		class = abi.OtherTrap // a kind this host does not know is a trap
	}
	t := &sandbox.Trap{Class: class, Message: d.str()}
	n := d.count(32, "frames")
	if n > 0 {
		t.Frames = make([]sandbox.Frame, 0, min(n, core.MaxFrames))
	}
	for k := range n {
		// The worker's frames are as untrusted as the guest's names in
		// them: kept to core.MaxFrames, their text cut and made printable.
		f := sandbox.Frame{Module: symbols.Clip(d.str()), Func: symbols.Clip(d.str()), FuncIndex: d.u32(), Offset: d.u64(),
			File: symbols.Clip(d.str()), Line: d.u32(), Column: d.u32()}
		if k < core.MaxFrames {
			t.Frames = append(t.Frames, f)
		}
	}
	return t
}

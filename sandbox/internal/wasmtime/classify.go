//go:build cgo

package wasmtime

/*
#include <stdlib.h>
#include "glue.h"
*/
import "C"

import (
	"errors"
	"strings"
	"unsafe"

	wt "github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/seed4b3e0ccb/callbox/abi"
	"github.com/seed4b3e0ccb/callbox/config"
	"github.com/seed4b3e0ccb/callbox/sandbox"
	"github.com/seed4b3e0ccb/callbox/sandbox/internal/core"
)

// Raw trap codes of the wasmtime C API (enum wasmtime_trap_code_enum in
// wasmtime/trap.h, v39). wasmtime-go's Go constants disagree from code 11 on:
// its OutOfFuel is 11, but the C enum has ALWAYS_TRAP_ADAPTER at 11 and
// OUT_OF_FUEL at 12. We classify from these raw values only.
const (
	codeStackOverflow         = 0
	codeMemoryOutOfBounds     = 1
	codeHeapMisaligned        = 2
	codeTableOutOfBounds      = 3
	codeIndirectCallToNull    = 4
	codeBadSignature          = 5
	codeIntegerOverflow       = 6
	codeIntegerDivisionByZero = 7
	codeBadConversionToInt    = 8
	codeUnreachable           = 9
	codeInterrupt             = 10
	codeAlwaysTrapAdapter     = 11
	codeOutOfFuel             = 12
	codeNullReference         = 14
)

// KindOfTrapCode maps a raw wasmtime trap code onto the taxonomy.
func KindOfTrapCode(code uint8) abi.Kind {
	switch code {
	case codeStackOverflow:
		return abi.StackOverflow
	case codeMemoryOutOfBounds:
		return abi.MemoryOutOfBounds
	case codeTableOutOfBounds, codeIndirectCallToNull:
		// A call through a null entry is reported as TableOutOfBounds, as
		// wazero does (it cannot tell the two apart).
		return abi.TableOutOfBounds
	case codeBadSignature, codeNullReference:
		return abi.IndirectCallMismatch
	case codeIntegerOverflow:
		return abi.IntegerOverflow
	case codeIntegerDivisionByZero:
		return abi.DivideByZero
	case codeBadConversionToInt:
		return abi.InvalidConversion
	case codeUnreachable:
		return abi.Unreachable
	case codeInterrupt:
		return abi.Timeout
	case codeOutOfFuel:
		return abi.FuelExhausted
	}
	return abi.OtherTrap
}

// classifyRawTrap reads a trap returned by the direct call path; its
// frames are resolved by bt (the module as its author built it).
func classifyRawTrap(trap *C.wasm_trap_t, lim *config.Limits, bt *core.Backtrace) *sandbox.Trap {
	kind := abi.OtherTrap
	var code C.uint8_t
	if C.cb_trap_code(trap, &code) != 0 {
		kind = KindOfTrapCode(uint8(code))
	}
	var buf [1024]C.char
	n := C.cb_trap_message(trap, &buf[0], C.size_t(len(buf)))
	detail := trapMessage(C.GoStringN(&buf[0], C.int(min(int(n), len(buf)))), kind)
	return core.EngineTrap(kind, detail, rawTrapFrames(trap, bt), nil, lim)
}

// rawTrapFrames reads a trap's frames (wasmtime's function indices and
// module offsets, of the module it ran) and resolves them.
func rawTrapFrames(trap *C.wasm_trap_t, bt *core.Backtrace) []sandbox.Frame {
	var raw [core.MaxFrames]C.cb_frame_t
	var trace unsafe.Pointer
	count := C.cb_trap_frames(trap, &raw[0], core.MaxFrames, &trace)
	return resolveFrames(raw[:], count, trace, bt)
}

// rawErrorFrames reads the frames of an error that ended a call (the
// epoch callback's interruption).
func rawErrorFrames(err *C.wasmtime_error_t, bt *core.Backtrace) []sandbox.Frame {
	var raw [core.MaxFrames]C.cb_frame_t
	var trace unsafe.Pointer
	count := C.cb_error_frames(err, &raw[0], core.MaxFrames, &trace)
	return resolveFrames(raw[:], count, trace, bt)
}

func resolveFrames(raw []C.cb_frame_t, count C.size_t, trace unsafe.Pointer, bt *core.Backtrace) []sandbox.Frame {
	frames := make([]core.RawFrame, 0, min(int(count), core.MaxFrames))
	for k := 0; k < int(count) && k < core.MaxFrames; k++ {
		frames = append(frames, rawFrame(bt, uint32(raw[k].func_index), uint64(raw[k].module_offset)))
	}
	C.cb_trace_delete(trace)
	return bt.Frames(frames)
}

// rawFrame is one wasmtime frame: its function index and module offset.
func rawFrame(bt *core.Backtrace, funcIndex uint32, moduleOffset uint64) core.RawFrame {
	f := core.RawFrame{Func: funcIndex, FuncKnown: true}
	if moduleOffset != 0 {
		f.CodeOffset, f.OffsetKnown = bt.ModuleOffset(moduleOffset)
	}
	return f
}

func rawErrorMessage(err *C.wasmtime_error_t) string {
	var buf [1024]C.char
	n := C.cb_error_message(err, &buf[0], C.size_t(len(buf)))
	return C.GoStringN(&buf[0], C.int(min(int(n), len(buf))))
}

// classifyGoError classifies an error from wasmtime-go's own call paths
// (instantiation).
func classifyGoError(err error, lim *config.Limits, bt *core.Backtrace) *sandbox.Trap {
	var trap *wt.Trap
	if errors.As(err, &trap) {
		kind := abi.OtherTrap
		if code := trap.Code(); code != nil {
			kind = KindOfTrapCode(uint8(*code))
		}
		var raw []core.RawFrame
		for _, f := range trap.Frames() {
			if len(raw) == core.MaxFrames {
				break
			}
			raw = append(raw, rawFrame(bt, f.FuncIndex(), uint64(f.ModuleOffset())))
		}
		return core.EngineTrap(kind, trapMessage(trap.Message(), kind), bt.Frames(raw), err, lim)
	}
	return core.EngineTrap(abi.OtherTrap, err.Error(), nil, err, lim)
}

// trapMessage keeps wasmtime's first line ("wasm trap: integer divide by
// zero"), without the backtrace it appends. Some traps come wrapped as
// "error while executing at wasm backtrace: <frames> Caused by: <trap>";
// their message is the cause's first line.
func trapMessage(msg string, k abi.Kind) string {
	if _, cause, ok := strings.Cut(msg, "Caused by:"); ok && strings.HasPrefix(msg, "error while executing") {
		msg = strings.TrimSpace(cause)
	}
	for i := 0; i < len(msg); i++ {
		if msg[i] == '\n' {
			msg = msg[:i]
			break
		}
	}
	if msg == "" {
		return k.String()
	}
	return msg
}

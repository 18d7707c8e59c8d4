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

const maxFrames = 64

// classifyRawTrap reads a trap returned by the direct call path.
func classifyRawTrap(trap *C.wasm_trap_t, lim *config.Limits) *sandbox.Trap {
	kind := abi.OtherTrap
	var code C.uint8_t
	if C.cb_trap_code(trap, &code) != 0 {
		kind = KindOfTrapCode(uint8(code))
	}
	var buf [1024]C.char
	n := C.cb_trap_message(trap, &buf[0], C.size_t(len(buf)))
	detail := trapMessage(C.GoStringN(&buf[0], C.int(min(int(n), len(buf)))), kind)
	var frames []sandbox.Frame
	var raw [maxFrames]C.cb_frame_t
	var trace unsafe.Pointer
	count := C.cb_trap_frames(trap, &raw[0], maxFrames, &trace)
	for k := 0; k < int(count) && k < maxFrames; k++ {
		f := sandbox.Frame{FuncIndex: uint32(raw[k].func_index), Offset: uint64(raw[k].module_offset)}
		if raw[k].func_name != nil {
			f.Func = C.GoStringN(raw[k].func_name, C.int(raw[k].func_name_len))
		}
		frames = append(frames, f)
	}
	C.cb_trace_delete(trace)
	return core.EngineTrap(kind, detail, frames, nil, lim)
}

func rawErrorMessage(err *C.wasmtime_error_t) string {
	var buf [1024]C.char
	n := C.cb_error_message(err, &buf[0], C.size_t(len(buf)))
	return C.GoStringN(&buf[0], C.int(min(int(n), len(buf))))
}

// classifyGoError classifies an error from wasmtime-go's own call paths
// (instantiation).
func classifyGoError(err error, lim *config.Limits) *sandbox.Trap {
	var trap *wt.Trap
	if errors.As(err, &trap) {
		kind := abi.OtherTrap
		if code := trap.Code(); code != nil {
			kind = KindOfTrapCode(uint8(*code))
		}
		var frames []sandbox.Frame
		for _, f := range trap.Frames() {
			fr := sandbox.Frame{FuncIndex: f.FuncIndex(), Offset: uint64(f.ModuleOffset())}
			if name := f.FuncName(); name != nil {
				fr.Func = *name
			}
			frames = append(frames, fr)
		}
		return core.EngineTrap(kind, trapMessage(trap.Message(), kind), frames, err, lim)
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

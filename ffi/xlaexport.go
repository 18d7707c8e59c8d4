//go:build cgo

package main

/*
#include <stdlib.h>
#include "xla_ffi.h"
*/
import "C"

import (
	"context"
	"unsafe"
)

// Compile-time checks that xlaCall and xlaBuf mirror cbx_call and cbx_buf.
var (
	_ [unsafe.Sizeof(C.cbx_call{}) - unsafe.Sizeof(xlaCall{})]byte
	_ [unsafe.Sizeof(xlaCall{}) - unsafe.Sizeof(C.cbx_call{})]byte
	_ [unsafe.Sizeof(C.cbx_buf{}) - unsafe.Sizeof(xlaBuf{})]byte
	_ [unsafe.Sizeof(xlaBuf{}) - unsafe.Sizeof(C.cbx_buf{})]byte
	_ [unsafe.Offsetof(C.cbx_call{}.message) - unsafe.Offsetof(xlaCall{}.Message)]byte
	_ [unsafe.Offsetof(xlaCall{}.Message) - unsafe.Offsetof(C.cbx_call{}.message)]byte
	_ [unsafe.Offsetof(C.cbx_call{}.rets) - unsafe.Offsetof(xlaCall{}.Rets)]byte
	_ [unsafe.Offsetof(xlaCall{}.Rets) - unsafe.Offsetof(C.cbx_call{}.rets)]byte
	_ [unsafe.Offsetof(C.cbx_buf{}.dtype) - unsafe.Offsetof(xlaBuf{}.DType)]byte
	_ [unsafe.Offsetof(xlaBuf{}.DType) - unsafe.Offsetof(C.cbx_buf{}.dtype)]byte
	_ [C.CBX_MAX_BUFFERS - xlaMaxBuffers]byte
	_ [xlaMaxBuffers - C.CBX_MAX_BUFFERS]byte
)

// cbxXlaExecute is called by callbox_xla_ffi (xla.c) once per EXECUTE
// call. It returns 0, or an absl code with call.message set (malloc'd).
//
//export cbxXlaExecute
func cbxXlaExecute(call unsafe.Pointer) (code int32) {
	c := (*xlaCall)(call)
	defer func() {
		if p := recover(); p != nil {
			cd, msg := xlaMessage(panicError("callbox_xla_ffi", p))
			code = int32(cd)
			c.Message = unsafe.Pointer(C.CString(msg))
		}
	}()
	_, err := xlaExecute(context.Background(), c)
	if err == nil {
		return 0
	}
	cd, msg := xlaMessage(err)
	c.Message = unsafe.Pointer(C.CString(msg))
	return int32(cd)
}

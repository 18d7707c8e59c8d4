//go:build cgo

package main

/*
#include <stdlib.h>
extern char **environ;
static char *cbx_environ_at(size_t i) { return environ[i]; }
*/
import "C"

import "unsafe"

// The library reads its environment variables (CALLBOX_CONFIG,
// CALLBOX_LOG_LEVEL, CALLBOX_CUDA_COPY and the CALLBOX_ config overrides)
// from the C environment when it uses them: the Go runtime of a shared
// library copies the environment once, when the library loads, so a
// variable a program sets afterwards (Python's os.environ, C's setenv)
// would be invisible to os.Getenv.

// getenv is C's getenv.
func getenv(name string) string {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	v := C.getenv(cn)
	if v == nil {
		return ""
	}
	return C.GoString(v)
}

// environ is C's environment as "NAME=value" strings.
func environ() []string {
	var out []string
	for i := C.size_t(0); ; i++ {
		p := C.cbx_environ_at(i)
		if p == nil {
			return out
		}
		out = append(out, C.GoString(p))
	}
}

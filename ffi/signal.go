//go:build cgo

package main

/*
#include "signals.h"
*/
import "C"

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// signalWatch reads the tokens signals.c's handler writes and fires them:
// the handler cannot call Go, so a signal reaches the calls it cancels
// through this pipe and goroutine (started once).
var signalWatch = sync.OnceValue(func() error {
	fd := int(C.cbx_signal_pipe())
	if fd < 0 {
		return fmt.Errorf("creating the signal pipe failed")
	}
	f := os.NewFile(uintptr(fd), "callbox-signals")
	go func() {
		var buf [8]byte
		for {
			n, err := f.Read(buf[:])
			if err != nil {
				return
			}
			if n == len(buf) {
				if t, _ := lookupCancel(*(*uint64)(unsafe.Pointer(&buf[0]))); t != nil {
					t.fire()
				}
			}
		}
	}()
	return nil
})

// cancelOnSignal makes signum fire the token (callbox_cancel_on_signal).
func cancelOnSignal(id uint64, signum int) error {
	t, err := lookupCancel(id)
	if err != nil {
		return err
	}
	if t == nil {
		return badArg(arg("cancel"), "token 0 is no token")
	}
	if err := signalWatch(); err != nil {
		return err
	}
	if errno := C.cbx_signal_install(C.int(signum), C.uint64_t(id)); errno != 0 {
		return badArg(arg("signum"), "%d: %v", signum, syscall.Errno(errno))
	}
	return nil
}

//go:build cgo

// The C harness from threads the Go runtime did not create: many at once,
// and on small stacks.

package main

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/abi"
)

// TestHarnessThreads runs 8 C threads at once, half through the C API and
// half through the XLA handler, each checking every output.
func TestHarnessThreads(t *testing.T) {
	r := harnessGroups(t, false, nil, "threads")
	assert.Equal(t, "8 threads x 200 calls", r.vals["threads"])
}

// TestHarnessSmallStack calls wasmtime guests from a C thread whose
// 256 KiB stack is smaller than wasmtime's wasm stack: the calls succeed,
// a guest recursing without end fails with StackOverflow, traps (signals
// on the switched stack), a timeout and a guest calling the host fail with
// their kinds, and the process serves on; a host is opened, called,
// reloaded and closed from a 32 KiB thread. The library runs such entries
// on a stack of its own on Linux, on x86-64 or with glibc. Each switch
// runs: the x86-64 assembly, makecontext/swapcontext (the other glibc
// targets'), and none (musl off x86-64, other systems), where every
// wasmtime call from the small thread is refused as a StackOverflow that
// names the thread's room, and the process lives on.
func TestHarnessSmallStack(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the library switches stacks for wasmtime guests on Linux only")
	}
	for _, mode := range []struct {
		name string
		env  []string
	}{{"default", nil}, {"ucontext", []string{"CBX_HARNESS_SWITCH=1"}}, {"none", []string{"CBX_HARNESS_SWITCH=2"}}} {
		t.Run(mode.name, func(t *testing.T) {
			if mode.name == "ucontext" && runtime.GOARCH != "amd64" {
				t.Skip("off x86-64 the ucontext switch is the default: the default run covers it")
			}
			r := harnessGroups(t, true, mode.env, "smallstack")
			if mode.env != nil {
				require.Equal(t, "chosen", r.vals["smallstack_switch"], "the harness could not choose the switch")
			}
			r.ok(t, "smallstack_open", "smallstack_reload", "smallstack_close")
			if mode.name == "none" {
				for _, l := range []string{"smallstack_first", "smallstack_again", "smallstack_recurse", "smallstack_spin", "smallstack_after", "smallstack_open_call"} {
					r.fails(t, l, abi.StackOverflow, "the calling thread has ", "call from a thread with a bigger stack")
				}
				return
			}
			r.ok(t, "smallstack_first", "smallstack_again", "smallstack_after", "smallstack_open_call")
			r.fails(t, "smallstack_recurse", abi.StackOverflow, "hostile_recurse_wasmtime")
			r.fails(t, "smallstack_load_oob", abi.MemoryOutOfBounds, "hostile_load_oob_wasmtime")
			r.fails(t, "smallstack_div_by_zero", abi.DivideByZero, "hostile_div_by_zero_wasmtime")
			r.fails(t, "smallstack_unreachable", abi.Unreachable, "hostile_unreachable_wasmtime")
			r.fails(t, "smallstack_spin", abi.Timeout, "hostile_spin_wasmtime")
			r.fails(t, "smallstack_error_megabytes", abi.GuestError, "hostile_error_megabytes_wasmtime")
		})
	}
}

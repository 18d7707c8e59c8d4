package wazero

import (
	"github.com/tetratelabs/wazero/experimental"

	"github.com/seed4b3e0ccb/callbox/sandbox/internal/core"
)

// allocator backs one instance's linear memory. It enforces the callback's
// memory limit whatever maximum the module declares: a grow past the limit
// fails (memory.grow returns -1) and is recorded in the guest state, so the
// call's failure is classified as MemoryLimit precisely.
//
// The backing store is one reservation of the limit's size that never moves
// (reserve.go), committed lazily by the OS: instantiating a module with a
// large memory costs no up-front zeroing, and views of guest memory stay
// valid across memory.grow.
type allocator struct {
	limit  uint64
	shared bool // back the memory with a memfd (Options.SharedMemory)
	state  *core.GuestState
	size   uint64
	mem    reservation
}

var _ experimental.MemoryAllocator = (*allocator)(nil)

// Allocate implements experimental.MemoryAllocator.
func (a *allocator) Allocate(_, max uint64) experimental.LinearMemory {
	reserve := max
	if a.limit != 0 && a.limit < reserve {
		reserve = a.limit
	}
	if a.shared {
		a.mem = reserveShared(reserve)
	} else {
		a.mem = reserveMemory(reserve)
	}
	return a
}

// Reallocate implements experimental.LinearMemory. It never moves memory.
func (a *allocator) Reallocate(size uint64) []byte {
	if a.limit != 0 && size > a.limit {
		a.state.MemoryDenied = true
		return nil
	}
	buf := a.mem.grow(size)
	if buf == nil {
		return nil
	}
	a.size = size
	return buf
}

// Free implements experimental.LinearMemory.
func (a *allocator) Free() {
	a.mem.release()
	a.size = 0
}

package cachefile

import "syscall"

// mmapFlags maps a cache file shared and pre-faulted: one populate pass in
// the kernel is cheaper than a fault per 64 KiB while checksumming.
const mmapFlags = syscall.MAP_SHARED | syscall.MAP_POPULATE

//go:build unix && !linux

package cachefile

import "syscall"

// mmapFlags maps a cache file shared.
const mmapFlags = syscall.MAP_SHARED

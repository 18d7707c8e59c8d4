//go:build unix

package cachefile

import (
	"io/fs"
	"os"
	"syscall"
)

// ownersKnown: on Unix, files have owners and modes to check.
const ownersKnown = true

func owner(fi fs.FileInfo) uint32 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Uid
	}
	return ^uint32(0)
}

func euid() uint32 { return uint32(os.Geteuid()) }

// Package lockdown is what a callbox worker process does to itself before
// it reads a byte of a guest: close every inherited descriptor, lower its
// resource limits, give up file system and network access (Landlock), set
// no_new_privs and install a seccomp-bpf allowlist whose default action
// kills the process. It is imported only by the worker (sandbox/worker),
// never by a library a foreign process loads: its Landlock dependency
// links libpsx into cgo builds.
package lockdown

import "github.com/seed4b3e0ccb/callbox/sandbox/internal/procwall/hardening"

// Limits are the resource limits the worker sets on itself.
type Limits struct {
	// AddressSpace bounds the worker's virtual memory (RLIMIT_AS): the
	// engine's reservations for every instance plus the runtime's own.
	AddressSpace uint64
	// Files bounds its open descriptors (RLIMIT_NOFILE).
	Files uint64
	// FileSize bounds any file it grows (RLIMIT_FSIZE): its only files
	// are guest memories, each within one instance's reservation, so a
	// worker cannot fill the machine's memory with memfds.
	FileSize uint64
}

// Report is the lockdown's account of itself (package hardening).
type Report = hardening.Report

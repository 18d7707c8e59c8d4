// Package lockdown is what a callbox worker process does to itself before
// it reads a byte of a guest: close every inherited descriptor, lower its
// resource limits, give up file system and network access (Landlock), set
// no_new_privs and install a seccomp-bpf allowlist whose default action
// kills the process. It is imported only by the worker (sandbox/worker),
// never by a library a foreign process loads: its Landlock dependency
// links libpsx into cgo builds.
package lockdown

// Limits are the resource limits the worker sets on itself.
type Limits struct {
	// AddressSpace bounds the worker's virtual memory (RLIMIT_AS): the
	// engine's reservations for every instance plus the runtime's own.
	AddressSpace uint64
	// Files bounds its open descriptors (RLIMIT_NOFILE).
	Files uint64
}

// Step is one hardening measure and whether it took.
type Step struct {
	Name    string `json:"name"`
	Applied bool   `json:"applied"`
	Detail  string `json:"detail"`
}

// Report lists every step, applied or not (never silently skipped).
type Report struct {
	Steps []Step `json:"steps"`
}

func (r *Report) add(name string, err error, detail string) {
	if err != nil {
		r.Steps = append(r.Steps, Step{Name: name, Detail: err.Error()})
		return
	}
	r.Steps = append(r.Steps, Step{Name: name, Applied: true, Detail: detail})
}

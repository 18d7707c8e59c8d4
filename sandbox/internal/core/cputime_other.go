//go:build !unix

package core

// ThreadCPUAvailable reports whether ThreadCPU works on this platform:
// config.Limits.MaxCPU needs it.
const ThreadCPUAvailable = false

// ThreadCPU is not available here: 0.
func ThreadCPU() int64 { return 0 }

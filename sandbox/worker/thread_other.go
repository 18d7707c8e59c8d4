//go:build !linux

package worker

// onFirstThread reports true: process isolation runs on Linux only, and
// elsewhere the worker refuses to start before any guest could run.
func onFirstThread() bool { return true }

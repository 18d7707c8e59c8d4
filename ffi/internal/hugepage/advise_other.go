//go:build !linux

package hugepage

// Advise does nothing where the platform has no transparent huge pages.
func Advise(b []byte) bool { return false }

//go:build !linux

package wazero

// reserveShared falls back to anonymous memory where there is no memfd.
func reserveShared(max uint64) reservation { return reserveMemory(max) }

// growFile is never called without a file.
func growFile(int, uint64) error { return nil }

// releaseShared is never called without a file.
func releaseShared([]byte, int) {}

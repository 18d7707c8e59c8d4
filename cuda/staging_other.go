//go:build !unix

package cuda

// mapStaging allocates a staging buffer from the Go heap, which does not
// move objects.
func mapStaging(n uint64) ([]byte, error) { return make([]byte, n), nil }

func unmapStaging([]byte) error { return nil }

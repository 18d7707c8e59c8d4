//go:build !unix

package cachefile

import "os"

// fileChecksum is the checksum of a file.
func fileChecksum(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return streamChecksum(f)
}

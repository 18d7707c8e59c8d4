//go:build !unix

package cachefile

import "os"

// fileChecksum is the CRC-32C of a file.
func fileChecksum(path string) (uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return streamChecksum(f)
}

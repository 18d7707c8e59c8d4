//go:build !unix

package cachefile

import "io/fs"

// ownersKnown: elsewhere the checks are not made (the cache directory's
// ACLs are the operator's to set).
const ownersKnown = false

func owner(fs.FileInfo) uint32 { return 0 }

func euid() uint32 { return 0 }

//go:build !callbox_probe

package worker

import "github.com/seed4b3e0ccb/callbox/sandbox/internal/procwall"

// serveOptions: a release worker has no test hooks.
func serveOptions() procwall.ServeOptions { return procwall.ServeOptions{} }

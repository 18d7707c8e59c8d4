//go:build cgo && !callbox_cover

package main

// coverFlush writes coverage counters only in a callbox_cover build
// (coverflush.go).
func coverFlush() {}

package worker

import "golang.org/x/sys/unix"

// onFirstThread reports whether the calling goroutine runs on the
// process's first thread (whose thread id is the process id).
func onFirstThread() bool { return unix.Gettid() == unix.Getpid() }

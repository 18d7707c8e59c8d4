// Command callbox-worker is the worker process of isolation: process. A
// callbox host starts it; it is not meant to be run by hand.
//
// The Go runtime's periodic GOMAXPROCS update reads /proc/self/cgroup,
// which the worker's seccomp allowlist forbids (no open): it is off, and
// the worker keeps the core count it started with.
//
//go:debug updatemaxprocs=0
package main

import (
	"os"

	"github.com/seed4b3e0ccb/callbox/sandbox/worker"
)

func main() { os.Exit(worker.Main(os.Args)) }

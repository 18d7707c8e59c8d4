// Package workerbin builds the callbox-worker executable for tests that
// run callbacks under isolation: process: once per test binary, into a
// temporary directory, with the go command that runs the tests. The test
// build (Probe) adds the forbidden-system-call hooks release workers lack.
package workerbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
)

var (
	mu    sync.Mutex
	built = map[bool]string{}
)

// Path returns the path of a freshly built worker (probe: the test build,
// -tags callbox_probe), building it on first use.
func Path(probe bool) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if p, ok := built[probe]; ok {
		return p, nil
	}
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(self), "..", "..", "..")
	dir, err := os.MkdirTemp("", "callbox-worker-")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "callbox-worker")
	args := []string{"build", "-o", out}
	if probe {
		args = append(args, "-tags", "callbox_probe")
	}
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), append(args, "./cmd/callbox-worker")...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building callbox-worker: %w\n%s", err, b)
	}
	built[probe] = out
	return out, nil
}

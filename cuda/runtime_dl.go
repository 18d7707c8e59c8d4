//go:build linux

package cuda

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/ebitengine/purego"
)

// OpenRuntime loads the CUDA runtime (RuntimeLibraries, in order) and binds
// the functions Device needs. Without one it fails with a single error
// naming every library it tried (matching ErrNoRuntime).
func OpenRuntime() (*Runtime, error) { return OpenRuntimeFrom(RuntimeLibraries...) }

// OpenRuntimeFrom is OpenRuntime trying the given library names or paths.
func OpenRuntimeFrom(libraries ...string) (*Runtime, error) {
	var tried []string
	// dlerror is per OS thread: stay on one between dlopen and the message
	// purego reads, or a failed open can come back with an empty reason.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, name := range libraries {
		lib, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			msg := err.Error()
			if !strings.Contains(msg, name) {
				msg = name + ": " + msg
			}
			tried = append(tried, msg)
			continue
		}
		r := &Runtime{Library: name}
		for _, s := range r.symbols() {
			addr, err := purego.Dlsym(lib, s.name)
			if err != nil {
				_ = purego.Dlclose(lib)
				return nil, fmt.Errorf("%s has no %s (too old a CUDA runtime?): %w: %w", name, s.name, err, ErrNoRuntime)
			}
			purego.RegisterFunc(s.fn, addr)
		}
		return r, nil
	}
	return nil, fmt.Errorf("loading the CUDA runtime (%s): %w", strings.Join(tried, "; "), ErrNoRuntime)
}

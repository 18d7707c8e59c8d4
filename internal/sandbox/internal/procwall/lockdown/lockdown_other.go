//go:build !linux

package lockdown

import "errors"

// Apply is Linux-only: elsewhere a worker cannot lock itself down, and
// must not serve.
func Apply(Limits, int, func()) (Report, error) {
	return Report{}, errors.New("process isolation needs Linux (seccomp, Landlock)")
}

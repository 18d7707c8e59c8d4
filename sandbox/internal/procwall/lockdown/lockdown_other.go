//go:build !linux

package lockdown

import "errors"

// User is the identity a worker takes (Linux only).
type User struct {
	UID, GID int
}

// Apply is Linux-only: elsewhere a worker cannot lock itself down, and
// must not serve.
func Apply(Limits, User, int, func()) (Report, error) {
	return Report{}, errors.New("process isolation needs Linux (seccomp, Landlock)")
}

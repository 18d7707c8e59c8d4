package lockdown

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/cap"
)

// User is the identity a worker takes: a root host's workers switch to it
// (the host resolves it: config's worker_user, nobody by default). UID < 0
// means no switch (the host is not root, so the worker is already
// unprivileged).
type User struct {
	UID, GID int
}

// dropPrivileges gives up everything a root worker could use to reach
// beyond itself, on every thread (libcap's cap package, over psx): the
// process stops being dumpable (no ptrace attach or /proc/<pid>/mem from
// another process of the same user); the supplementary groups go and the
// group and user ids become u's; the ambient and bounding sets are
// emptied and the secure bits locked, so no capability can come back; and
// every capability goes from the effective, permitted and inheritable
// sets.
//
// All of it happens before the engine starts its threads. libcap changes
// every thread with one signal broadcast per system call (dropping the
// bounding set is one per capability), and psx's broadcast waits on a
// spin lock that yields with sched_yield: once wasmtime's epoch ticker
// runs at SCHED_FIFO, a broadcast it must answer can spin it on a core
// whose lock holder, a normal thread, never gets to run until the kernel
// moves one of them (70-150 ms per worker start, measured). The ticker's
// real-time priority, which it may no longer take itself, is asked of the
// host instead (Report.RealtimeThread).
//
// Each step is reported, applied or not; what the process cannot do as a
// non-root user (switch ids, empty its bounding set) is reported with why
// it does not matter there.
func dropPrivileges(r *Report, u User) {
	r.Add("dumpable", unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0), "0: no other process may trace it or read its memory")
	root := os.Geteuid() == 0
	switch {
	case u.UID >= 0 && root:
		if err := cap.SetGroups(u.GID); err != nil {
			r.Add("user", fmt.Errorf("setting group %d: %w", u.GID, err), "")
		} else if err := cap.SetUID(u.UID); err != nil {
			r.Add("user", fmt.Errorf("setting user %d: %w", u.UID, err), "")
		} else {
			r.Add("user", nil, fmt.Sprintf("uid %d, gid %d, no supplementary groups (the host runs as root)", os.Getuid(), os.Getgid()))
		}
	case root:
		r.Add("user", errors.New("not switched: no user given"), "")
	default:
		r.Add("user", fmt.Errorf("not switched: the host is not root, so the worker runs as its unprivileged user (uid %d)", os.Getuid()), "")
	}
	// Raise what is permitted into the effective set, for the drops
	// below (the bounding set and the secure bits need CAP_SETPCAP).
	now := cap.GetProc()
	if err := now.Fill(cap.Effective, cap.Permitted); err == nil {
		_ = now.SetProc()
	}
	var bound []cap.Value
	for v := cap.Value(0); v < cap.MaxBits(); v++ {
		bound = append(bound, v)
	}
	lockErr := errors.Join(cap.ResetAmbient(), cap.DropBound(bound...),
		(cap.SecbitNoRoot | cap.SecbitNoRootLocked | cap.SecbitNoSetUIDFixup | cap.SecbitNoSetUIDFixupLocked |
			cap.SecbitKeepCapsLocked | cap.SecbitNoCapAmbientRaise | cap.SecbitNoCapAmbientRaiseLocked).Set())
	r.Add("capabilities", capsCleared(errors.Join(lockErr, cap.NewSet().SetProc())),
		"none: effective, permitted, inheritable, ambient and bounding sets empty, secure bits locked")
}

// capsCleared reports whether the process now holds no capability in any
// set; err is what setting them said.
func capsCleared(err error) error {
	now := cap.GetProc()
	if cf, cerr := now.Cf(cap.NewSet()); cerr != nil || cf != 0 {
		return fmt.Errorf("capabilities left: %q (%v)", now.String(), errors.Join(err, cerr))
	}
	var left []string
	for v := cap.Value(0); v < cap.MaxBits(); v++ {
		if on, _ := cap.GetAmbient(v); on {
			left = append(left, "ambient "+v.String())
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("capabilities left: %s", strings.Join(left, ", "))
	}
	bounded := 0
	for v := cap.Value(0); v < cap.MaxBits(); v++ {
		if on, _ := cap.GetBound(v); on {
			bounded++
		}
	}
	if bounded > 0 {
		return fmt.Errorf("effective, permitted, inheritable and ambient sets empty; %d capabilities stay in the bounding set (dropping them needs CAP_SETPCAP, which this non-root process lacks; the bounding set matters only to execve, which seccomp forbids)", bounded)
	}
	return nil
}

package procwall

import (
	"fmt"
	"os/user"
	"strconv"
	"strings"
)

// User is a worker's user and group ids.
type User struct {
	UID, GID int
}

// DefaultUser is who a root host's workers run as unless configured
// otherwise.
const DefaultUser = "nobody"

// nobodyID is nobody's conventional uid and gid, used where the system
// has no passwd entry for it (a minimal container).
const nobodyID = 65534

// ResolveUser turns config's worker_user (a user name, "UID" or
// "UID:GID"; "" for DefaultUser) into ids. A name takes its primary
// group. The result is used only when the host runs as root.
func ResolveUser(spec string) (User, error) {
	if spec == "" {
		spec = DefaultUser
	}
	if uidText, gidText, ok := strings.Cut(spec, ":"); ok || isNumber(spec) {
		uid, err1 := strconv.Atoi(uidText)
		gid, err2 := uid, error(nil)
		if ok {
			gid, err2 = strconv.Atoi(gidText)
		}
		if err1 != nil || err2 != nil || uid < 0 || gid < 0 {
			return User{}, fmt.Errorf("worker_user %q: want a user name, UID or UID:GID", spec)
		}
		if uid == 0 {
			return User{}, fmt.Errorf("worker_user %q is root: a worker must run as an unprivileged user", spec)
		}
		return User{UID: uid, GID: gid}, nil
	}
	u, err := user.Lookup(spec)
	if err != nil {
		if spec == DefaultUser {
			return User{UID: nobodyID, GID: nobodyID}, nil
		}
		return User{}, fmt.Errorf("worker_user %q: %w", spec, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return User{}, fmt.Errorf("worker_user %q: ids %q:%q are not numbers", spec, u.Uid, u.Gid)
	}
	if uid == 0 {
		return User{}, fmt.Errorf("worker_user %q is root: a worker must run as an unprivileged user", spec)
	}
	return User{UID: uid, GID: gid}, nil
}

func isNumber(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}

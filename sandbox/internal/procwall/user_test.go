package procwall_test

import (
	"os/user"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed4b3e0ccb/callbox/sandbox/internal/procwall"
)

// ResolveUser: nobody by default (its passwd entry, or 65534 where there
// is none), names by their passwd entry and primary group, UID and
// UID:GID as given; root, an unknown name and garbage are refused.
func TestResolveUser(t *testing.T) {
	u, err := procwall.ResolveUser("")
	require.NoError(t, err)
	want := procwall.User{UID: 65534, GID: 65534}
	if n, err := user.Lookup("nobody"); err == nil {
		uid, _ := strconv.Atoi(n.Uid)
		gid, _ := strconv.Atoi(n.Gid)
		want = procwall.User{UID: uid, GID: gid}
	}
	assert.Equal(t, want, u)

	u, err = procwall.ResolveUser("1234")
	require.NoError(t, err)
	assert.Equal(t, procwall.User{UID: 1234, GID: 1234}, u)
	u, err = procwall.ResolveUser("1234:99")
	require.NoError(t, err)
	assert.Equal(t, procwall.User{UID: 1234, GID: 99}, u)

	for _, bad := range []string{"root", "0", "0:5", "no-such-user-here", "12:ab", "-3"} {
		_, err := procwall.ResolveUser(bad)
		assert.Error(t, err, bad)
	}
}

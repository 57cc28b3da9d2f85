package child

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
)

// names reports whether the configured environment entries name the
// variable (as NAME or NAME=VALUE).
func names(configured []string, name string) bool {
	for _, e := range configured {
		if k, _, _ := strings.Cut(e, "="); k == name {
			return true
		}
	}
	return false
}

// setEnv sets name to value in env, replacing an entry it had.
func setEnv(env []string, name, value string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != name {
			out = append(out, kv)
		}
	}
	return append(out, name+"="+value)
}

// privateHome makes a child's HOME: an empty directory only its user may
// enter (0700, owned by u when the child runs as u).
func privateHome(u *User) (string, error) {
	dir, err := os.MkdirTemp("", "spillway-child-home-")
	if err != nil {
		return "", fmt.Errorf("making the upstream's home: %w", err)
	}
	if u != nil {
		if err := os.Chown(dir, int(u.UID), int(u.GID)); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("making the upstream's home for uid %d: %w", u.UID, err)
		}
	}
	return dir, nil
}

// LookupUser finds the user to run a child as, by name or numeric id, with
// the user's primary group. It fails for a user the system does not know.
func LookupUser(name string) (*User, error) {
	var u *user.User
	var err error
	if _, nerr := strconv.ParseUint(name, 10, 32); nerr == nil {
		u, err = user.LookupId(name)
	} else {
		u, err = user.Lookup(name)
	}
	if err != nil {
		return nil, fmt.Errorf("upstream user: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("upstream user %q: uid %q is not numeric", name, u.Uid)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("upstream user %q: gid %q is not numeric", name, u.Gid)
	}
	return &User{UID: uint32(uid), GID: uint32(gid)}, nil
}

//go:build unix

package token

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// checkSecretMode is the one rule for every file that holds secrets
// (ReadSecretFile): signing keys, inbound tokens, storage credentials. It
// refuses a file that another user could change (group or other write) or
// read: other read, and group read unless the file's group is one of this
// process's groups (a Kubernetes secret volume under an fsGroup: 0440 with
// the pod's supplementary group). The exception is a Kubernetes-style
// projected volume (secret, configMap, projected): the kubelet writes each
// file into a timestamped directory, points DIR/..data at it, and makes
// DIR/NAME a symlink to ..data/NAME, modes 0644 by default, on a volume
// only the pod's containers mount. There read bits say nothing about other
// users of the node, so only write bits are refused.
func checkSecretMode(path string, fi fs.FileInfo) error {
	perm := fi.Mode().Perm()
	if perm&0o022 != 0 {
		return fmt.Errorf("mode %04o lets other users change it; chmod 600 it", perm)
	}
	if perm&0o044 == 0 || projected(path) {
		return nil
	}
	if perm&0o004 == 0 && inOurGroups(fi) {
		return nil
	}
	return fmt.Errorf("mode %04o lets other users read it; chmod 600 it (or 640 with a group of this process's)", perm)
}

// projected reports whether path is a file of a Kubernetes-style projected
// volume: a symlink to ..data/NAME beside a ..data symlink.
func projected(path string) bool {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return false
	}
	target, err := os.Readlink(path)
	if err != nil || !strings.HasPrefix(target, "..data/") {
		return false
	}
	data, err := os.Lstat(filepath.Join(filepath.Dir(path), "..data"))
	return err == nil && data.Mode()&fs.ModeSymlink != 0
}

// inOurGroups reports whether fi's group is this process's effective group
// or one of its supplementary groups.
func inOurGroups(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	gid := int(st.Gid)
	if gid == os.Getegid() {
		return true
	}
	groups, err := os.Getgroups()
	return err == nil && slices.Contains(groups, gid)
}

//go:build unix

package token

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// checkSecretMode refuses a secret file that others could read or change:
// any permission for others, group write, or group read unless the file's
// group is this process's own group. That exception is the Kubernetes
// secret volume under an fsGroup, which the kubelet makes group-readable
// (0440) and hands to the pod's own group; no other user can read it.
func checkSecretMode(fi fs.FileInfo) error {
	perm := fi.Mode().Perm()
	ownGroup := false
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ownGroup = int(st.Gid) == os.Getegid()
	}
	if perm&0o007 != 0 || perm&0o020 != 0 || (perm&0o040 != 0 && !ownGroup) {
		return fmt.Errorf("mode %04o lets other users read or change it; chmod 600 it", perm)
	}
	return nil
}

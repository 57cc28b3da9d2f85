//go:build unix

package child

import (
	"os"
	"os/exec"
	"syscall"
)

var (
	termSignal = syscall.SIGTERM
	killSignal = syscall.SIGKILL
)

// ownGroup starts the child in a process group of its own (its id is the
// child's pid), so that signals reach everything it started and none of
// what Spillway's terminal sends (Ctrl-C) reaches it directly.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// runAs makes the child run as u (no supplementary groups); nil keeps
// Spillway's user.
func runAs(cmd *exec.Cmd, u *User) error {
	if u != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: []uint32{}}
	}
	return nil
}

// signalGroup signals the child's process group. Errors (the group is
// gone) mean there is nothing left to signal.
func signalGroup(p *os.Process, sig syscall.Signal) {
	_ = syscall.Kill(-p.Pid, sig)
}

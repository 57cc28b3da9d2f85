package main

import "syscall"

// notDumpable makes this process non-dumpable (prctl PR_SET_DUMPABLE 0):
// /proc/PID/environ, mem, fd and maps become root's, and ptrace is refused,
// so a child that runs under the same uid (an --upstream-cmd tool server)
// cannot read the inbound tokens, store credentials or signing keys this
// process holds in its environment or memory. /proc/PID/cmdline stays
// world-readable: secrets belong in files or the environment, never on
// argv. Core dumps are off as a consequence.
func notDumpable() error {
	const prSetDumpable = 4
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0); errno != 0 {
		return errno
	}
	return nil
}

package child

import (
	"syscall"
	"unsafe"
)

// waitExited blocks until the child pid has exited, without reaping it
// (waitid with WNOWAIT): until it is reaped, its pid, the id of its
// process group, cannot be reused.
func waitExited(pid int) error {
	const (
		pPID    = 1
		wExited = 4
		wNoWait = 0x1000000
	)
	var info [128]byte // siginfo_t
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info)), wExited|wNoWait, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		return nil
	}
}

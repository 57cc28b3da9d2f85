package miniotest

import "syscall"

// sysProcAttr makes the kernel kill MinIO when the test binary dies, so a
// crashed or interrupted test run leaves no server behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

//go:build !linux

package miniotest

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }

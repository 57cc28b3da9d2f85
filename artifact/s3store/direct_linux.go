package s3store

import (
	"net"
	"syscall"
	"time"
	"unsafe"
)

// canWatch reports whether silence works on this system. It does on
// Linux, which reports TCP_INFO.
const canWatch = true

// silence returns how long c's peer has sent nothing (the kernel's
// tcpi_last_data_recv), or 0 when some of what it sent waits to be read or
// it has closed its side: then the peer is not the one holding things up.
func silence(c *net.TCPConn) (time.Duration, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var quiet time.Duration
	cerr := rc.Control(func(fd uintptr) {
		var b [1]byte
		// A peek consumes nothing: a splice or Read in progress is
		// unaffected.
		_, _, perr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		if perr != syscall.EAGAIN {
			err = perr // nil: a byte waits, or the peer closed
			return
		}
		var info syscall.TCPInfo
		n := uint32(syscall.SizeofTCPInfo)
		_, _, e := syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, syscall.IPPROTO_TCP, syscall.TCP_INFO,
			uintptr(unsafe.Pointer(&info)), uintptr(unsafe.Pointer(&n)), 0)
		if e != 0 {
			err = e
			return
		}
		quiet = time.Duration(info.Last_data_recv) * time.Millisecond
	})
	if cerr != nil {
		return 0, cerr
	}
	return quiet, err
}

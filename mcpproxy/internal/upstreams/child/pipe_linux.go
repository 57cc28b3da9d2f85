package child

import (
	"os"
	"sync/atomic"
	"syscall"
)

// stdoutPipe is the capacity a child's stdout pipe is given (the kernel's
// default is 64 KiB): a child writing a big message runs that far ahead of
// a reader busy with the last chunk, instead of blocking on every hiccup of
// it. Measured on a 200 MiB output offloaded from a stdio child: 11% less
// wall time at 256 KiB, no more at 1 MiB.
const stdoutPipe = 256 << 10

// maxGrownPipes bounds the pipes grown at once (16 MiB in all): past the
// kernel's per-user soft limit (fs.pipe-user-pages-soft, 64 MiB by
// default) every new pipe of the user gets two pages.
var maxGrownPipes int64 = 64 // a var for tests

var grownPipes atomic.Int64

// growPipe gives the read end f of a pipe stdoutPipe of capacity, if
// fewer than maxGrownPipes are grown; it reports whether it did (the
// caller then calls shrunk once the pipe is closed). Failure leaves the
// pipe as it was: it is only slower.
func growPipe(f *os.File) bool {
	if grownPipes.Add(1) > maxGrownPipes {
		grownPipes.Add(-1)
		return false
	}
	const fSetPipeSz = 1031 // F_SETPIPE_SZ
	rc, err := f.SyscallConn()
	if err == nil {
		rc.Control(func(fd uintptr) {
			_, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, fSetPipeSz, stdoutPipe)
			if e != 0 {
				err = e
			}
		})
	}
	if err != nil {
		grownPipes.Add(-1)
		return false
	}
	return true
}

// shrunk counts a grown pipe closed.
func shrunk() { grownPipes.Add(-1) }

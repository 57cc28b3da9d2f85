package child

import (
	"syscall"
	"testing"
)

// pipeSize is the capacity of the child's stdout pipe.
func pipeSize(t *testing.T, c *Conn) int {
	t.Helper()
	const fGetPipeSz = 1032 // F_GETPIPE_SZ
	rc, err := c.stdout.f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n uintptr
	var e syscall.Errno
	rc.Control(func(fd uintptr) { n, _, e = syscall.Syscall(syscall.SYS_FCNTL, fd, fGetPipeSz, 0) })
	if e != 0 {
		t.Fatal(e)
	}
	return int(n)
}

// A child's stdout pipe holds stdoutPipe, up to maxGrownPipes at once;
// past them pipes keep the kernel's size, and a pipe closed gives its
// place back.
func TestStdoutPipeGrown(t *testing.T) {
	defer func(n int64) { maxGrownPipes = n }(maxGrownPipes)
	maxGrownPipes = 2
	before := grownPipes.Load()
	maxGrownPipes += before // pipes still open from earlier tests
	a, _ := startSh(t, "read x")
	b, _ := startSh(t, "read x")
	c, _ := startSh(t, "read x")
	if pa, pb, pc := pipeSize(t, a), pipeSize(t, b), pipeSize(t, c); pa != stdoutPipe || pb != stdoutPipe || pc == stdoutPipe {
		t.Fatalf("pipe capacities %d, %d, %d; want %d, %d and the kernel's", pa, pb, pc, stdoutPipe, stdoutPipe)
	}
	closeWithin(t, a)
	closeWithin(t, a) // twice: the place is given back once
	d, _ := startSh(t, "read x")
	if pd := pipeSize(t, d); pd != stdoutPipe {
		t.Fatalf("a pipe started after one closed holds %d; want %d", pd, stdoutPipe)
	}
	for _, x := range []*Conn{b, c, d} {
		closeWithin(t, x)
	}
	if n := grownPipes.Load(); n != before {
		t.Fatalf("%d pipes counted grown after all closed; want %d", n, before)
	}
}

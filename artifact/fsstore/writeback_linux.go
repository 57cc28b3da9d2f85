package fsstore

import (
	"os"
	"syscall"
)

// startWriteback asks the kernel to start writing n bytes of f from off
// to disk, without waiting: the fsync that makes a staging durable then
// has little left to wait for.
func startWriteback(f *os.File, off, n int64) {
	syscall.SyncFileRange(int(f.Fd()), off, n, 2) // SYNC_FILE_RANGE_WRITE
}

//go:build unix

package fsstore

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// unlockedGrace is how old an unlocked temporary file must be before New
// removes it. A writer locks its file right after creating it, so an
// unlocked file older than this has no writer.
const unlockedGrace = 2 * time.Second

// tryLock takes an exclusive flock on f without waiting. The kernel drops it
// when the holder closes f or dies, which is what marks a file abandoned.
func tryLock(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

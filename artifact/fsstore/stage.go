package fsstore

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/spillway-dev/spillway/artifact"
)

// Stage returns a Staging in DIR/tmp laid out as an artifact file (room
// for the header, then the bytes), hashed as it is written. Put takes it by
// writing the header and linking it, so the bytes are never copied. See
// artifact.Stager. Stage, and the Staging's Write, return ErrNoSpace when
// the disk or quota is full and ErrUnavailable when the file system fails
// otherwise.
func (s *Store) Stage() (artifact.Staging, error) {
	f, err := s.tempFile("stage-*")
	if err != nil {
		return nil, stageError(err)
	}
	if _, err := f.Seek(headerSize, io.SeekStart); err != nil {
		os.Remove(f.Name())
		f.Close()
		return nil, stageError(err)
	}
	return &staging{s: s, f: f, h: sha256.New()}, nil
}

// writebackEvery is how many bytes a staging takes before their writeback
// to disk is started: a large staging is mostly on disk when Put makes it
// durable.
const writebackEvery = 8 << 20

// errTaken is Write's error once a Put has taken the staging: its bytes
// are an artifact's, immutable.
var errTaken = errors.New("fsstore: staging already stored")

// staging is the artifact.Staging of Stage: a locked temporary file whose
// bytes start after headerSize, with their running SHA-256. As
// artifact.Staging says: one writer at a time, and concurrent ReadAt calls
// only once writing is done. Write fails once a Put has taken it.
type staging struct {
	s *Store
	f *os.File
	h hash.Hash
	n int64
	// synced is how far writeback was started (startWriteback).
	synced int64
	taken  atomic.Bool
	once   sync.Once
}

func (st *staging) Write(p []byte) (int, error) {
	if st.taken.Load() {
		return 0, errTaken
	}
	n, err := st.f.Write(p)
	st.h.Write(p[:n])
	st.n += int64(n)
	if st.n-st.synced >= writebackEvery {
		startWriteback(st.f, headerSize+st.synced, st.n-st.synced)
		st.synced = st.n
	}
	if err != nil {
		return n, stageError(err)
	}
	return n, nil
}

func stageError(err error) error { return fmt.Errorf("stage: %w: %w", sentinel(err), err) }

func (st *staging) ReadAt(p []byte, off int64) (int, error) {
	if off >= st.n {
		return 0, io.EOF
	}
	n, err := st.f.ReadAt(p[:min(int64(len(p)), st.n-off)], headerSize+off)
	if err == nil && n < len(p) {
		err = io.EOF
	}
	return n, err
}

func (st *staging) Size() int64 { return st.n }

// take marks the staging as the one Put stores, once.
func (st *staging) take() bool { return st.taken.CompareAndSwap(false, true) }

// Close removes the staging's temporary name: a Put that took it has
// linked it under its own.
func (st *staging) Close() error {
	st.once.Do(func() {
		os.Remove(st.f.Name())
		st.f.Close()
	})
	return nil
}

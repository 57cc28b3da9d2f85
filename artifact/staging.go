package artifact

import (
	"io"
	"os"
	"sync"

	"github.com/spillway-dev/spillway/artifact/scratch"
)

// Staging holds bytes written before it is known whether, and as what,
// they become an artifact: the proxy stages a large value while it
// arrives, and stores it once its message is in. Write appends (one
// writer at a time); ReadAt reads back what was written and may be called
// concurrently with other ReadAt calls once writing is done. Close frees
// the bytes (a Put that took them keeps its artifact); it may be called
// more than once.
type Staging interface {
	io.Writer
	io.ReaderAt
	Size() int64
	Close() error
}

// Stager is implemented by a Store with a staging of its own (the
// local-directory store): given to its Put through StagedReader, a
// Staging it made becomes the artifact without its bytes being copied.
type Stager interface {
	Stage() (Staging, error)
}

// Stage returns a Staging: the Store's own when it is a Stager, else a
// file in dir ("": os.TempDir()), unlinked at once (scratch.CreateBestEffort:
// a file whose name cannot be removed serves all the same).
func (s *Service) Stage(dir string) (Staging, error) {
	if st, ok := s.Store.(Stager); ok {
		return st.Stage()
	}
	f, err := scratch.CreateBestEffort(dir, "stage-*")
	if err != nil {
		return nil, err
	}
	return &fileStaging{f: f}, nil
}

// StagedReader returns a reader of st's bytes, from the first, for
// Service.Put: a Store that made st takes its bytes as they are, any other
// reads them.
func StagedReader(st Staging) io.Reader {
	return &stagedReader{SectionReader: io.NewSectionReader(st, 0, st.Size()), st: st}
}

type stagedReader struct {
	*io.SectionReader
	st Staging
}

// Staging returns the Staging r reads. A Stager's Put looks for it, to
// take the staged bytes as they are instead of copying them.
func (r *stagedReader) Staging() Staging { return r.st }

// StagingOf returns the Staging r reads (StagedReader), if it is one.
func StagingOf(r io.Reader) (Staging, bool) {
	sr, ok := r.(interface{ Staging() Staging })
	if !ok {
		return nil, false
	}
	st := sr.Staging()
	return st, st != nil
}

// fileStaging is a Staging in an unlinked file.
type fileStaging struct {
	f    *os.File
	n    int64
	once sync.Once
}

func (s *fileStaging) Write(p []byte) (int, error) {
	n, err := s.f.Write(p)
	s.n += int64(n)
	return n, err
}

func (s *fileStaging) ReadAt(p []byte, off int64) (int, error) { return s.f.ReadAt(p, off) }

func (s *fileStaging) Size() int64 { return s.n }

func (s *fileStaging) Close() error {
	s.once.Do(func() { s.f.Close() })
	return nil
}

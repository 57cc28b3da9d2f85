// Package fsstore provides an artifact.Store that keeps artifacts in a local
// directory: Spillway's embedded default.
//
// # Layout
//
// Each artifact is one file, DIR/<first two characters of the id>/<id>: a
// fixed 4 KiB header (a magic line, then the metadata as JSON, padded with
// spaces) followed by the bytes. One file per artifact, rather than data plus
// a metadata sidecar, because a single link(2) then commits bytes and metadata
// together: there is no state in which one exists without the other, a delete
// is one unlink, and nothing needs repair after a crash. The header has a
// fixed size so that it can be written last, once size and SHA-256 are known,
// without moving the bytes, and so that the bytes start at a known offset.
// The two-character shard directories keep directories small.
//
// Link revocations (artifact.Store.Revoke) are empty files in
// DIR/revoked/<artifact.RevocationPath>, each named by
// artifact.RevocationKey: the path is the whole record.
//
// # Writes
//
// Put streams into a temporary file under DIR/tmp, writes the header, fsyncs
// the file, hard-links it to its final name and fsyncs the directory. link(2)
// fails when the name exists, which makes "first writer wins, artifacts are
// immutable" atomic without a lock (rename(2) would silently replace). The
// artifact becomes visible only once complete and durable. While writing, Put
// holds an flock on its temporary file, so New removes temporary files left
// by a crashed writer but not those of another live process using the same
// directory (spillway put beside spillway serve). A staging (Stage) is such
// a temporary file, written before its artifact's metadata is known; Put
// takes it as it is: the header written, the same steps, no copy.
package fsstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/spillway-dev/spillway/artifact"
)

const (
	headerSize = 4096
	magic      = "spillway-artifact 1\n"
	tmpName    = "tmp"
)

// Store is an artifact.Store on a local directory. Create it with New; the
// zero value is not usable. Its methods are safe for concurrent use, also by
// several processes sharing the directory. It does not implement
// artifact.Presigner.
type Store struct {
	dir string // absolute
}

var _ artifact.Store = (*Store)(nil)

// New returns a store on dir, creating the directory (mode 0700) if needed,
// and removes temporary files that a crashed writer left behind. It
// returns ErrInvalid for an empty dir, ErrUnavailable when the directory
// cannot be created, and an error when its temporary files cannot be read.
func New(dir string) (*Store, error) {
	if dir == "" {
		return nil, fmt.Errorf("fsstore: empty directory: %w", artifact.ErrInvalid)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("fsstore: %w", err)
	}
	s := &Store{dir: abs}
	if err := os.MkdirAll(s.tmp(), 0o700); err != nil {
		return nil, fmt.Errorf("fsstore: %w: %w", artifact.ErrUnavailable, err)
	}
	if err := s.cleanTemp(time.Now()); err != nil {
		return nil, fmt.Errorf("fsstore: clean %s: %w", s.tmp(), err)
	}
	return s, nil
}

// Dir returns the absolute path of the store's directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) tmp() string { return filepath.Join(s.dir, tmpName) }

// path returns the file of id, which the caller has checked with ValidID:
// that check is what keeps every path inside s.dir.
func (s *Store) path(id string) string { return filepath.Join(s.dir, id[:2], id) }

// cleanTemp removes temporary files whose writer is gone. A file younger than
// unlockedGrace is kept even when unlocked: its writer may be between
// creating and locking it.
func (s *Store) cleanTemp(now time.Time) error {
	entries, err := os.ReadDir(s.tmp())
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil || now.Sub(info.ModTime()) < unlockedGrace {
			continue
		}
		p := filepath.Join(s.tmp(), e.Name())
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			continue
		}
		if ok, _ := tryLock(f); ok {
			os.Remove(p)
		}
		f.Close()
	}
	return nil
}

// unavailable wraps a file-system error in ErrUnavailable, or in ErrNoSpace
// when the disk or the quota is full.
func unavailable(op, id string, err error) error {
	return fmt.Errorf("%s %s: %w: %w", op, id, sentinel(err), err)
}

// sentinel returns the artifact error a file-system error counts as:
// ErrNoSpace for a full disk or quota (ENOSPC, EDQUOT), else ErrUnavailable.
func sentinel(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return artifact.ErrNoSpace
	}
	return artifact.ErrUnavailable
}

// Put stores r under meta.ID; see artifact.Store. It returns ErrInvalid for
// a malformed id or metadata (name over 255 bytes, tenant or source over 128,
// MIME type that is not printable ASCII, invalid UTF-8), ErrExists when the
// id is taken, ErrIntegrity when the bytes disagree with a declared Size or
// SHA256, ctx's error when ctx ends first, the reader's error (wrapped) when
// r fails, ErrNoSpace when the disk or quota is full, and ErrUnavailable
// when the file system fails otherwise. On any error
// nothing is stored. An empty MimeType is stored as application/octet-stream.
// Cancellation is checked between reads of r.
func (s *Store) Put(ctx context.Context, meta artifact.Artifact, r io.Reader) (artifact.Artifact, error) {
	a, err := artifact.StartPut(ctx, meta)
	if err != nil {
		return artifact.Artifact{}, err
	}
	final := s.path(a.ID)
	// Fail fast, before streaming, when the id is taken; the link in
	// commit is what guarantees it.
	if _, err := os.Lstat(final); err == nil {
		return artifact.Artifact{}, fmt.Errorf("put %s: %w", a.ID, artifact.ErrExists)
	}
	if st, ok := artifact.StagingOf(r); ok {
		if own, ok := st.(*staging); ok && own.s == s && own.take() {
			// A staging of this store: its bytes become the artifact without
			// a copy.
			return s.commit(ctx, a, own.f, own.n, hex.EncodeToString(own.h.Sum(nil)))
		}
	}
	f, err := s.tempFile("put-*")
	if err != nil {
		return artifact.Artifact{}, unavailable("put", a.ID, err)
	}
	defer func() {
		os.Remove(f.Name())
		f.Close()
	}()
	src := r
	if a.Size > 0 {
		// One byte past the declared size is enough to know it is wrong.
		src = io.LimitReader(r, a.Size+1)
	}
	h := sha256.New()
	n, err := copyData(ctx, f, h, src)
	if err != nil {
		return artifact.Artifact{}, fmt.Errorf("put %s: %w", a.ID, err)
	}
	return s.commit(ctx, a, f, n, hex.EncodeToString(h.Sum(nil)))
}

// tempFile creates a file in DIR/tmp, locked: no one else removes it
// while it is open.
func (s *Store) tempFile(pattern string) (*os.File, error) {
	f, err := os.CreateTemp(s.tmp(), pattern)
	if err != nil {
		return nil, err
	}
	if _, err := tryLock(f); err != nil {
		os.Remove(f.Name())
		f.Close()
		return nil, err
	}
	return f, nil
}

// commit makes f, holding n bytes after its header room whose SHA-256 is
// sum, the artifact a: the header written, the file durable, then linked
// to its final name.
func (s *Store) commit(ctx context.Context, a artifact.Artifact, f *os.File, n int64, sum string) (artifact.Artifact, error) {
	final := s.path(a.ID)
	if (a.Size > 0 && n != a.Size) || (a.SHA256 != "" && sum != a.SHA256) {
		return artifact.Artifact{}, fmt.Errorf("put %s: got %d bytes with sha256 %s: %w", a.ID, n, sum, artifact.ErrIntegrity)
	}
	a.Size, a.SHA256 = n, sum
	hdr, err := encodeHeader(a)
	if err != nil {
		return artifact.Artifact{}, fmt.Errorf("put %s: %w", a.ID, err)
	}
	if _, err := f.WriteAt(hdr, 0); err != nil {
		return artifact.Artifact{}, unavailable("put", a.ID, err)
	}
	if err := f.Sync(); err != nil {
		return artifact.Artifact{}, unavailable("put", a.ID, err)
	}
	if err := s.mkShard(filepath.Dir(final)); err != nil {
		return artifact.Artifact{}, unavailable("put", a.ID, err)
	}
	if err := ctx.Err(); err != nil {
		return artifact.Artifact{}, fmt.Errorf("put %s: %w", a.ID, err)
	}
	if err := os.Link(f.Name(), final); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return artifact.Artifact{}, fmt.Errorf("put %s: %w", a.ID, artifact.ErrExists)
		}
		return artifact.Artifact{}, unavailable("put", a.ID, err)
	}
	if err := syncDir(filepath.Dir(final)); err != nil {
		// Not durable: take it back rather than return success.
		os.Remove(final)
		return artifact.Artifact{}, unavailable("put", a.ID, err)
	}
	return a, nil
}

// mkShard creates a shard directory, making its creation durable too.
func (s *Store) mkShard(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(s.dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

var bufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// readError marks an error of the caller's reader, as opposed to the
// disk's, so that Put returns it as the reader's and not as ErrUnavailable.
type readError struct{ err error }

func (e readError) Error() string { return "read: " + e.err.Error() }
func (e readError) Unwrap() error { return e.err }

// copyData writes src to f after the header and into h, checking ctx between
// reads. Disk errors are wrapped in ErrUnavailable (ErrNoSpace when full).
func copyData(ctx context.Context, f *os.File, h io.Writer, src io.Reader) (int64, error) {
	bp := bufs.Get().(*[]byte)
	defer bufs.Put(bp)
	buf := *bp
	off := int64(headerSize)
	for {
		if err := ctx.Err(); err != nil {
			return off - headerSize, err
		}
		n, rerr := src.Read(buf)
		if n > 0 {
			h.Write(buf[:n])
			if _, err := f.WriteAt(buf[:n], off); err != nil {
				return off - headerSize, fmt.Errorf("%w: %w", sentinel(err), err)
			}
			off += int64(n)
		}
		if rerr == io.EOF {
			return off - headerSize, nil
		}
		if rerr != nil {
			return off - headerSize, readError{rerr}
		}
	}
}

// encodeHeader returns the headerSize bytes that start a's file: the magic
// line, a's metadata as JSON, spaces, and a final newline.
func encodeHeader(a artifact.Artifact) ([]byte, error) {
	js, err := json.Marshal(a)
	if err != nil {
		return nil, fmt.Errorf("encode metadata: %w: %w", artifact.ErrInvalid, err)
	}
	if len(magic)+len(js)+1 > headerSize {
		// Normalize's limits make this unreachable; keep the format safe anyway.
		return nil, fmt.Errorf("metadata of %d bytes too large: %w", len(js), artifact.ErrInvalid)
	}
	hdr := bytes.Repeat([]byte{' '}, headerSize)
	copy(hdr, magic)
	copy(hdr[len(magic):], js)
	hdr[headerSize-1] = '\n'
	return hdr, nil
}

// readMeta reads and checks the header of f, the file of id.
func readMeta(f *os.File, id string) (artifact.Artifact, error) {
	var hdr [headerSize]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return artifact.Artifact{}, unavailable("read", id, fmt.Errorf("header: %w", err))
	}
	body, ok := bytes.CutPrefix(hdr[:], []byte(magic))
	var a artifact.Artifact
	if !ok || json.Unmarshal(body, &a) != nil || a.ID != id {
		return artifact.Artifact{}, unavailable("read", id, errors.New("damaged header"))
	}
	fi, err := f.Stat()
	if err != nil {
		return artifact.Artifact{}, unavailable("read", id, err)
	}
	if fi.Size() != headerSize+a.Size {
		return artifact.Artifact{}, unavailable("read", id, fmt.Errorf("file has %d bytes, header says %d", fi.Size()-headerSize, a.Size))
	}
	return a, nil
}

// open opens the file of a valid id, mapping a missing file to ErrNotFound.
func (s *Store) open(op, id string) (*os.File, error) {
	f, err := os.Open(s.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s %s: %w", op, id, artifact.ErrNotFound)
	}
	if err != nil {
		return nil, unavailable(op, id, err)
	}
	return f, nil
}

// Stat returns id's metadata: ErrNotFound when id is absent or malformed,
// ErrUnavailable when the file cannot be read or is damaged, ctx's error
// when ctx has ended.
func (s *Store) Stat(ctx context.Context, id string) (artifact.Artifact, error) {
	if !artifact.ValidID(id) {
		return artifact.Artifact{}, fmt.Errorf("stat %q: %w", id, artifact.ErrNotFound)
	}
	if err := ctx.Err(); err != nil {
		return artifact.Artifact{}, fmt.Errorf("stat %s: %w", id, err)
	}
	f, err := s.open("stat", id)
	if err != nil {
		return artifact.Artifact{}, err
	}
	defer f.Close()
	return readMeta(f, id)
}

// Open returns up to length bytes of id from offset (length < 0: to the end).
// A range reaching past the end is cut at the end; an offset at or past the
// end, or a zero length, yields an empty reader. A negative offset is
// ErrInvalid; an absent or malformed id is ErrNotFound; a file that cannot
// be read or is damaged is ErrUnavailable. The caller closes the reader.
func (s *Store) Open(ctx context.Context, id string, offset, length int64) (io.ReadCloser, error) {
	if err := artifact.StartOpen(ctx, id, offset); err != nil {
		return nil, err
	}
	f, err := s.open("open", id)
	if err != nil {
		return nil, err
	}
	a, err := readMeta(f, id)
	if err != nil {
		f.Close()
		return nil, err
	}
	n := a.Size - offset
	if length >= 0 && length < n {
		n = length
	}
	if n <= 0 {
		f.Close()
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	return &fileRange{SectionReader: io.NewSectionReader(f, headerSize+offset, n), f: f}, nil
}

type fileRange struct {
	*io.SectionReader
	f *os.File
}

func (r *fileRange) Close() error { return r.f.Close() }

// FileSection lets the fetch endpoint send the range with sendfile
// (artifact.FileSection).
func (r *fileRange) FileSection() (*os.File, int64, int64) {
	_, off, n := r.SectionReader.Outer()
	return r.f, off, n
}

// Delete removes id; an absent id is not an error, a malformed one is
// ErrInvalid, a failing file system is ErrUnavailable, and an ended ctx
// returns its error. Readers already open keep reading the old bytes.
func (s *Store) Delete(ctx context.Context, id string) error {
	if !artifact.ValidID(id) {
		return fmt.Errorf("delete %q: %w", id, artifact.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %s: %w", id, err)
	}
	if err := os.Remove(s.path(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return unavailable("delete", id, err)
	}
	return nil
}

// ListExpired calls fn with the id of every artifact expired at now (see
// artifact.Artifact.Expired), reading each header. fn may delete the id. It
// stops at the first error of fn or ctx and returns it. An artifact whose
// header cannot be read is skipped, and the first such error is returned
// after the walk, so one damaged file does not stop the sweeping of others.
func (s *Store) ListExpired(ctx context.Context, now time.Time, fn func(id string) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("list expired: %w", err)
	}
	shards, err := os.ReadDir(s.dir)
	if err != nil {
		return unavailable("list", s.dir, err)
	}
	var firstErr error
	for _, sh := range shards {
		name := sh.Name()
		if !sh.IsDir() || !validShard(name) {
			continue
		}
		files, err := os.ReadDir(filepath.Join(s.dir, name))
		if err != nil {
			if firstErr == nil && !errors.Is(err, fs.ErrNotExist) {
				firstErr = unavailable("list", name, err)
			}
			continue
		}
		for _, fe := range files {
			id := fe.Name()
			if !artifact.ValidID(id) || id[:2] != name {
				continue
			}
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("list expired: %w", err)
			}
			a, err := s.Stat(ctx, id)
			if errors.Is(err, artifact.ErrNotFound) {
				continue // deleted meanwhile
			}
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			if a.Expired(now) {
				if err := fn(id); err != nil {
					return err
				}
			}
		}
	}
	return firstErr
}

// validShard reports whether name can be a shard directory: the first two
// characters of some id. It excludes DIR/tmp and anything foreign.
func validShard(name string) bool {
	return len(name) == 2 && artifact.ValidID(name+"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
}

// Ping checks that the directory is writable by creating, writing and
// removing a file in it. It returns ErrNoSpace when the disk or quota is
// full, ErrUnavailable when the file system fails otherwise, and ctx's
// error when ctx has ended.
func (s *Store) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f, err := os.CreateTemp(s.tmp(), "ping-*")
	if err != nil {
		return unavailable("ping", s.dir, err)
	}
	_, werr := f.Write([]byte("ping"))
	cerr := f.Close()
	rerr := os.Remove(f.Name())
	if err := errors.Join(werr, cerr, rerr); err != nil {
		return unavailable("ping", s.dir, err)
	}
	return nil
}

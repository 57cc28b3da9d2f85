package s3store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"net/http"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/spillway-dev/spillway/artifact"
)

// readError marks an error of the caller's reader.
type readError struct{ err error }

func (e readError) Error() string { return "read: " + e.err.Error() }
func (e readError) Unwrap() error { return e.err }

// source reads the caller's stream, hashing and counting, checking ctx
// between reads, and failing as soon as it passes a declared size.
type source struct {
	ctx   context.Context
	r     io.Reader
	hash  hash.Hash
	n     int64
	limit int64 // declared size; 0: none
}

func (s *source) Read(p []byte) (int, error) {
	if err := s.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := s.r.Read(p)
	s.hash.Write(p[:n])
	s.n += int64(n)
	if s.limit > 0 && s.n > s.limit {
		return n, fmt.Errorf("more than the declared %d bytes: %w", s.limit, artifact.ErrIntegrity)
	}
	if err != nil && err != io.EOF {
		err = readError{err}
	}
	return n, err
}

// fill reads from src into buf until it holds limit bytes or src ends,
// growing buf (by doubling, so small artifacts stay small). eof reports
// that src ended.
func fill(src io.Reader, buf []byte, limit int) (_ []byte, eof bool, _ error) {
	for len(buf) < limit {
		if len(buf) == cap(buf) {
			nb := make([]byte, len(buf), min(limit, max(2*cap(buf), 64<<10)))
			copy(nb, buf)
			buf = nb
		}
		n, err := src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, true, nil
		}
		if err != nil {
			return buf, false, err
		}
	}
	return buf, false, nil
}

// Put stores r under meta.ID; see artifact.Store and the package doc. It
// returns ErrInvalid for a malformed id or metadata (the same limits as
// fsstore), ErrExists when the id is taken, ErrIntegrity when the bytes
// disagree with a declared Size or SHA256, ctx's error when ctx ends first,
// the reader's error (wrapped) when r fails, ErrTooLarge past 10,000 parts,
// ErrBusy when too many uploads are in flight (Options.MaxPuts), and
// ErrUnavailable when the service fails. On any error no artifact is
// visible. An empty MimeType is stored as application/octet-stream.
func (s *Store) Put(ctx context.Context, meta artifact.Artifact, r io.Reader) (artifact.Artifact, error) {
	a, err := artifact.StartPut(ctx, meta)
	if err != nil {
		return artifact.Artifact{}, err
	}
	leave, err := s.gate.enter(ctx, a.Tenant)
	if err != nil {
		return artifact.Artifact{}, fmt.Errorf("put %s: %w", a.ID, err)
	}
	defer leave()
	ctx, cancel := startOp(ctx) // uploads: per-request deadlines only (deadline.go)
	defer cancel(nil)
	src := &source{ctx: ctx, r: r, hash: sha256.New(), limit: a.Size}
	buf, eof, err := fill(src, nil, int(s.partSize))
	if err != nil {
		return artifact.Artifact{}, fmt.Errorf("put %s: %w", a.ID, err)
	}
	if eof {
		return s.putSmall(ctx, a, buf, hex.EncodeToString(src.hash.Sum(nil)))
	}
	return s.putMultipart(ctx, a, buf, src)
}

// verify checks the stream's size and sum against what a declares.
func verify(a artifact.Artifact, n int64, sum string) error {
	if (a.Size > 0 && n != a.Size) || (a.SHA256 != "" && sum != a.SHA256) {
		return fmt.Errorf("put %s: got %d bytes with sha256 %s: %w", a.ID, n, sum, artifact.ErrIntegrity)
	}
	return nil
}

func (s *Store) putSmall(ctx context.Context, a artifact.Artifact, b []byte, sum string) (artifact.Artifact, error) {
	if err := verify(a, int64(len(b)), sum); err != nil {
		return artifact.Artifact{}, err
	}
	a.Size, a.SHA256 = int64(len(b)), sum
	raw, _ := hex.DecodeString(sum)
	// The server verifies x-amz-checksum-sha256 and keeps it; signing the
	// payload too would only make it hash the bytes twice.
	opts := minio.PutObjectOptions{ContentType: a.MimeType, UserMetadata: encodeMeta(a, false), DisableContentSha256: true}
	opts.UserMetadata[minio.ChecksumSHA256.Key()] = base64.StdEncoding.EncodeToString(raw)
	opts.SetMatchETagExcept("*")
	if _, err := s.core.PutObject(ctx, s.bucket, s.key(a.ID), bytes.NewReader(b), a.Size, "", "", opts); err != nil {
		return artifact.Artifact{}, convert(ctx, "put", a.ID, err)
	}
	return a, nil
}

// partChecksum is a multipart upload's checksum, full-object
// CRC-64/NVME: each part and, at completion, the whole object are verified
// by the server. It also lets MinIO replace the metadata (finishPending)
// without copying the data (it recomputes a checksum, copying, for an
// object that has none).
const partChecksum = minio.ChecksumCRC64NVME

// putMultipart uploads a larger artifact, whose first part is buf and the
// rest src, as a multipart upload that is completed only once the whole
// stream's size and SHA-256 check out, and aborted otherwise.
func (s *Store) putMultipart(ctx context.Context, a artifact.Artifact, buf []byte, src *source) (artifact.Artifact, error) {
	key := s.key(a.ID)
	opts := minio.PutObjectOptions{ContentType: a.MimeType, UserMetadata: encodeMeta(a, true)}
	opts.UserMetadata[checksumAlgorithm] = partChecksum.String()
	opts.UserMetadata[checksumType] = fullObject
	opts.SetMatchETagExcept("*")
	uploadID, err := s.core.NewMultipartUpload(ctx, s.bucket, key, opts)
	if err != nil {
		return artifact.Artifact{}, convert(ctx, "put", a.ID, err)
	}
	completed := false
	defer func() {
		if !completed && hung(ctx) == nil { // a hung service would only hang again
			// Best effort, on a context of its own: ctx may be why we stop.
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			s.core.AbortMultipartUpload(actx, s.bucket, key, uploadID)
			cancel()
		}
	}()
	parts, whole, err := s.putParts(ctx, a.ID, uploadID, buf, src)
	if err != nil {
		return artifact.Artifact{}, err
	}
	sum := hex.EncodeToString(src.hash.Sum(nil))
	if err := verify(a, src.n, sum); err != nil {
		return artifact.Artifact{}, err
	}
	a.Size, a.SHA256 = src.n, sum

	copts := minio.PutObjectOptions{UserMetadata: map[string]string{
		partChecksum.Key(): base64.StdEncoding.EncodeToString(whole),
		checksumType:       fullObject,
	}}
	copts.SetMatchETagExcept("*")
	info, err := s.core.CompleteMultipartUpload(ctx, s.bucket, key, uploadID, parts, copts)
	if err != nil {
		return artifact.Artifact{}, convert(ctx, "put", a.ID, err)
	}
	completed = true
	if err := s.finishPending(ctx, a, info.ETag); err != nil {
		return artifact.Artifact{}, err
	}
	return a, nil
}

// putParts uploads buf and then the rest of src, a part of PartSize at a
// time, as the parts of uploadID. It returns the parts and the checksum of
// the whole stream.
func (s *Store) putParts(ctx context.Context, id, uploadID string, buf []byte, src *source) ([]minio.CompletePart, []byte, error) {
	key := s.key(id)
	whole, part := partChecksum.Hasher(), partChecksum.Hasher()
	var parts []minio.CompletePart
	for eof := false; len(buf) > 0; {
		if len(parts) == maxParts {
			return nil, nil, fmt.Errorf("put %s: more than %d parts of %d bytes: %w", id, maxParts, s.partSize, artifact.ErrTooLarge)
		}
		whole.Write(buf)
		part.Reset()
		part.Write(buf)
		hdr := http.Header{}
		hdr.Set(partChecksum.Key(), base64.StdEncoding.EncodeToString(part.Sum(nil)))
		hdr.Set(checksumAlgorithm, partChecksum.String())
		hdr.Set(checksumType, fullObject)
		p, err := s.core.PutObjectPart(ctx, s.bucket, key, uploadID, len(parts)+1, bytes.NewReader(buf), int64(len(buf)),
			minio.PutObjectPartOptions{CustomHeader: hdr, DisableContentSha256: true})
		if err != nil {
			return nil, nil, convert(ctx, "put", id, err)
		}
		parts = append(parts, minio.CompletePart{PartNumber: p.PartNumber, ETag: p.ETag, ChecksumCRC64NVME: p.ChecksumCRC64NVME})
		if eof {
			break
		}
		if buf, eof, err = fill(src, buf[:0], int(s.partSize)); err != nil {
			return nil, nil, fmt.Errorf("put %s: %w", id, err)
		}
	}
	return parts, whole.Sum(nil), nil
}

// finishPending makes the metadata of a's completed upload, created marked
// pending, final in place. The ETag condition makes sure it is still the
// object we uploaded; if it is not, or the copy fails, the object is
// removed.
func (s *Store) finishPending(ctx context.Context, a artifact.Artifact, etag string) error {
	key := s.key(a.ID)
	_, err := s.c.CopyObject(ctx,
		minio.CopyDestOptions{Bucket: s.bucket, Object: key, ContentType: a.MimeType, UserMetadata: encodeMeta(a, false), ReplaceMetadata: true},
		minio.CopySrcOptions{Bucket: s.bucket, Object: key, MatchETag: etag})
	if err == nil {
		return nil
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	s.c.RemoveObject(dctx, s.bucket, key, minio.RemoveObjectOptions{})
	cancel()
	if minio.ToErrorResponse(err).Code == "PreconditionFailed" {
		// Someone replaced our pending object: not our artifact any more.
		return fmt.Errorf("put %s: object changed during upload: %w", a.ID, artifact.ErrUnavailable)
	}
	return convert(ctx, "put", a.ID, err)
}

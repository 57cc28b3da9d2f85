// Package s3store provides an artifact.Store on MinIO or any S3-compatible
// service. It is the only package that imports minio-go, and it turns
// minio-go's errors into artifact's sentinel errors where it calls it.
//
// # Layout
//
// One object per artifact, at PREFIX<id>. The metadata travels with it as
// user metadata (x-amz-meta-spillway-*; the MIME type is the Content-Type,
// the size the object's own), so Stat is one HEAD and nothing can separate
// bytes from metadata. Link revocations are empty objects under
// PREFIXrevoked/, each named by artifact.RevocationKey.
//
// # Put
//
// Put streams r through SHA-256 into a buffer of PartSize bytes, so upload
// memory is bounded by PartSize (minio-go's own default for a stream of
// unknown size buffers 528 MiB). Then:
//
//   - An artifact that fits in one part is checked against the declared size
//     and SHA-256 before a single byte is sent, and uploaded with one PUT
//     carrying x-amz-checksum-sha256, which the server verifies and keeps.
//   - A larger one goes up as a multipart upload with a full-object
//     CRC-64/NVME checksum (each part and the assembled object verified by
//     the server). The upload is completed only once size and SHA-256 of the
//     whole stream check out; otherwise it is aborted and nothing was ever
//     visible. Because user metadata is fixed when a multipart upload
//     starts, before the stream's SHA-256 is known, the object is created
//     marked pending and its metadata then replaced by a copy onto itself,
//     conditional on its ETag (metadata-only on MinIO: about 7 ms, where a
//     data copy of 100 MiB took 400 ms). Stat, Open and ListExpired treat a
//     pending object as absent; ListExpired hands out pending objects older
//     than a day, left by a crash, for deletion.
//
// Artifacts are immutable: every write carries If-None-Match: *, which the
// server checks on PUT and on initiating and completing a multipart upload
// (MinIO does; AWS S3 checks PUT and completion), so of two racing Puts of
// one id exactly one wins. A service that ignores If-None-Match would let
// the later Put win instead.
package s3store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/lifecycle"
	"github.com/minio/minio-go/v7/pkg/s3utils"

	"github.com/spillway-dev/spillway/artifact"
)

var (
	_ artifact.Store     = (*Store)(nil)
	_ artifact.Presigner = (*Store)(nil)
)

const (
	// DefaultPartSize is the multipart part size when Options.PartSize is 0.
	DefaultPartSize = 16 << 20
	// MinPartSize and MaxPartSize are S3's limits on a part.
	MinPartSize = 5 << 20
	MaxPartSize = 5 << 30
	maxParts    = 10000

	// pendingMaxAge is how old a pending object (see the package doc) must
	// be before ListExpired takes it for the leftover of a crash.
	pendingMaxAge     = 24 * time.Hour
	checksumAlgorithm = "x-amz-checksum-algorithm"
	checksumType      = "x-amz-checksum-type"
	fullObject        = "FULL_OBJECT"

	// pingKey is written and removed by Ping. It is not a valid id, so
	// nothing else ever sees it.
	pingKey = ".spillway-ping"
	// emptySHA256 is the SHA-256 of no bytes, for the empty objects of Ping
	// and Revoke.
	emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

// Store is an artifact.Store in one bucket under a key prefix. Create it
// with New; the zero value is not usable. Its methods are safe for
// concurrent use; Put holds one part buffer (Options.PartSize) per call.
type Store struct {
	c        *minio.Client
	core     minio.Core
	bucket   string
	prefix   string
	partSize int64
}

// New connects to o.Bucket and checks that it exists, creating it when
// o.CreateBucket is set, and installs the lifecycle rule of o.LifecycleDays.
// It returns ErrInvalid for bad options and ErrUnavailable when the service
// cannot be reached, refuses the credentials, or the bucket is missing.
func New(ctx context.Context, o Options) (*Store, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	c, err := minio.New(o.Endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(o.AccessKey, o.SecretKey, o.SessionToken),
		Secure: o.Secure,
		Region: o.Region,
		// Lets Put send x-amz-checksum-sha256 (minio-go only allows
		// checksum headers on clients that declare trailer support).
		TrailingHeaders: true,
		// Fail over to ErrUnavailable within seconds when the service is
		// down, rather than retrying for the better part of a minute.
		MaxRetries: 3,
	})
	if err != nil {
		return nil, fmt.Errorf("s3store: %w: %w", artifact.ErrInvalid, err)
	}
	s := &Store{c: c, core: minio.Core{Client: c}, bucket: o.Bucket, prefix: o.Prefix, partSize: o.PartSize}
	if s.partSize == 0 {
		s.partSize = DefaultPartSize
	}
	ok, err := c.BucketExists(ctx, o.Bucket)
	// A server that has just started may answer before it is ready
	// (MinIO: "Server not initialized yet"): wait for it, a little.
	for try := 0; err != nil && starting(err) && try < 40 && ctx.Err() == nil; try++ {
		time.Sleep(250 * time.Millisecond)
		ok, err = c.BucketExists(ctx, o.Bucket)
	}
	if err != nil {
		return nil, convert("bucket", o.Bucket, err)
	}
	if !ok {
		if !o.CreateBucket {
			return nil, fmt.Errorf("s3store: bucket %s does not exist (create it, or set create=true): %w", o.Bucket, artifact.ErrUnavailable)
		}
		err := c.MakeBucket(ctx, o.Bucket, minio.MakeBucketOptions{Region: o.Region})
		if err != nil && minio.ToErrorResponse(err).Code != "BucketAlreadyOwnedByYou" {
			return nil, convert("create bucket", o.Bucket, err)
		}
	}
	if o.LifecycleDays > 0 {
		if err := s.setLifecycle(ctx, o.LifecycleDays); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// starting reports an error of a service that is still starting up.
func starting(err error) bool {
	switch minio.ToErrorResponse(err).Code {
	case "XMinioServerNotInitialized", "ServiceUnavailable", "SlowDown":
		return true
	}
	return false
}

// LifecycleRuleID names the bucket lifecycle rule New installs for a prefix.
func LifecycleRuleID(prefix string) string { return "spillway-expiry:" + prefix }

// setLifecycle adds or updates this store's rule, keeping the bucket's
// other rules: expire objects under the prefix after days, and abort
// multipart uploads abandoned for a day.
func (s *Store) setLifecycle(ctx context.Context, days int) error {
	cfg, err := s.c.GetBucketLifecycle(ctx, s.bucket)
	if err != nil {
		if minio.ToErrorResponse(err).Code != "NoSuchLifecycleConfiguration" {
			return convert("get lifecycle", s.bucket, err)
		}
		cfg = lifecycle.NewConfiguration()
	}
	rule := lifecycle.Rule{
		ID:                             LifecycleRuleID(s.prefix),
		Status:                         "Enabled",
		RuleFilter:                     lifecycle.Filter{Prefix: s.prefix},
		Expiration:                     lifecycle.Expiration{Days: lifecycle.ExpirationDays(days)},
		AbortIncompleteMultipartUpload: lifecycle.AbortIncompleteMultipartUpload{DaysAfterInitiation: 1},
	}
	rules := cfg.Rules[:0]
	for _, r := range cfg.Rules {
		if r.ID == rule.ID {
			// (MinIO drops AbortIncompleteMultipartUpload, cleaning stale
			// uploads itself, so it is not compared.)
			if r.Status == rule.Status && r.RuleFilter.Prefix == s.prefix && r.Expiration.Days == rule.Expiration.Days {
				return nil // already in place: replicas starting together do not rewrite it
			}
			continue
		}
		rules = append(rules, r)
	}
	cfg.Rules = append(rules, rule)
	if err := s.c.SetBucketLifecycle(ctx, s.bucket, cfg); err != nil {
		return convert("set lifecycle", s.bucket, err)
	}
	return nil
}

func (s *Store) key(id string) string { return s.prefix + id }

// convert turns a minio-go error into one wrapping artifact's sentinels:
// missing object → ErrNotFound, failed If-None-Match → ErrExists, ctx's
// own error kept as is, anything else (network, credentials, server) →
// ErrUnavailable with the cause.
func convert(op, id string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s %s: %w", op, id, err)
	}
	switch minio.ToErrorResponse(err).Code {
	case "NoSuchKey", "NotFound":
		return fmt.Errorf("%s %s: %w", op, id, artifact.ErrNotFound)
	case "PreconditionFailed", "ConditionalRequestConflict":
		return fmt.Errorf("%s %s: %w", op, id, artifact.ErrExists)
	}
	return fmt.Errorf("%s %s: %w: %w", op, id, artifact.ErrUnavailable, err)
}

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
// and ErrUnavailable when the service fails. On any error no artifact is
// visible. An empty MimeType is stored as application/octet-stream.
func (s *Store) Put(ctx context.Context, meta artifact.Artifact, r io.Reader) (artifact.Artifact, error) {
	a, err := artifact.Normalize(meta)
	if err != nil {
		return artifact.Artifact{}, err
	}
	if err := ctx.Err(); err != nil {
		return artifact.Artifact{}, fmt.Errorf("put %s: %w", a.ID, err)
	}
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
		return artifact.Artifact{}, convert("put", a.ID, err)
	}
	return a, nil
}

func (s *Store) putMultipart(ctx context.Context, a artifact.Artifact, buf []byte, src *source) (artifact.Artifact, error) {
	key := s.key(a.ID)
	// A full-object CRC-64/NVME checksum: each part and, at completion, the
	// whole object are verified by the server. It also lets MinIO replace
	// the metadata below without copying the data (it recomputes a checksum,
	// copying, for an object that has none).
	crc := minio.ChecksumCRC64NVME
	opts := minio.PutObjectOptions{ContentType: a.MimeType, UserMetadata: encodeMeta(a, true)}
	opts.UserMetadata[checksumAlgorithm] = crc.String()
	opts.UserMetadata[checksumType] = fullObject
	opts.SetMatchETagExcept("*")
	uploadID, err := s.core.NewMultipartUpload(ctx, s.bucket, key, opts)
	if err != nil {
		return artifact.Artifact{}, convert("put", a.ID, err)
	}
	completed := false
	defer func() {
		if !completed {
			// Best effort, on a context of its own: ctx may be why we stop.
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			s.core.AbortMultipartUpload(actx, s.bucket, key, uploadID)
			cancel()
		}
	}()

	whole, part := crc.Hasher(), crc.Hasher()
	var parts []minio.CompletePart
	for eof := false; len(buf) > 0; {
		if len(parts) == maxParts {
			return artifact.Artifact{}, fmt.Errorf("put %s: more than %d parts of %d bytes: %w", a.ID, maxParts, s.partSize, artifact.ErrTooLarge)
		}
		whole.Write(buf)
		part.Reset()
		part.Write(buf)
		hdr := http.Header{}
		hdr.Set(crc.Key(), base64.StdEncoding.EncodeToString(part.Sum(nil)))
		hdr.Set(checksumAlgorithm, crc.String())
		hdr.Set(checksumType, fullObject)
		p, err := s.core.PutObjectPart(ctx, s.bucket, key, uploadID, len(parts)+1, bytes.NewReader(buf), int64(len(buf)),
			minio.PutObjectPartOptions{CustomHeader: hdr, DisableContentSha256: true})
		if err != nil {
			return artifact.Artifact{}, convert("put", a.ID, err)
		}
		parts = append(parts, minio.CompletePart{PartNumber: p.PartNumber, ETag: p.ETag, ChecksumCRC64NVME: p.ChecksumCRC64NVME})
		if eof {
			break
		}
		if buf, eof, err = fill(src, buf[:0], int(s.partSize)); err != nil {
			return artifact.Artifact{}, fmt.Errorf("put %s: %w", a.ID, err)
		}
	}
	sum := hex.EncodeToString(src.hash.Sum(nil))
	if err := verify(a, src.n, sum); err != nil {
		return artifact.Artifact{}, err
	}
	a.Size, a.SHA256 = src.n, sum

	copts := minio.PutObjectOptions{UserMetadata: map[string]string{
		crc.Key():    base64.StdEncoding.EncodeToString(whole.Sum(nil)),
		checksumType: fullObject,
	}}
	copts.SetMatchETagExcept("*")
	info, err := s.core.CompleteMultipartUpload(ctx, s.bucket, key, uploadID, parts, copts)
	if err != nil {
		return artifact.Artifact{}, convert("put", a.ID, err)
	}
	completed = true
	// The object exists, marked pending. Make its metadata final in place;
	// the ETag condition makes sure it is still the object we uploaded.
	_, err = s.c.CopyObject(ctx,
		minio.CopyDestOptions{Bucket: s.bucket, Object: key, ContentType: a.MimeType, UserMetadata: encodeMeta(a, false), ReplaceMetadata: true},
		minio.CopySrcOptions{Bucket: s.bucket, Object: key, MatchETag: info.ETag})
	if err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		s.c.RemoveObject(dctx, s.bucket, key, minio.RemoveObjectOptions{})
		cancel()
		if minio.ToErrorResponse(err).Code == "PreconditionFailed" {
			// Someone replaced our pending object: not our artifact any more.
			return artifact.Artifact{}, fmt.Errorf("put %s: object changed during upload: %w", a.ID, artifact.ErrUnavailable)
		}
		return artifact.Artifact{}, convert("put", a.ID, err)
	}
	return a, nil
}

// Stat returns id's metadata with one HEAD: ErrNotFound when id is absent,
// malformed or still being uploaded, ErrUnavailable when the service fails
// or the metadata is damaged.
func (s *Store) Stat(ctx context.Context, id string) (artifact.Artifact, error) {
	if !artifact.ValidID(id) {
		return artifact.Artifact{}, fmt.Errorf("stat %q: %w", id, artifact.ErrNotFound)
	}
	if err := ctx.Err(); err != nil {
		return artifact.Artifact{}, fmt.Errorf("stat %s: %w", id, err)
	}
	info, err := s.c.StatObject(ctx, s.bucket, s.key(id), minio.StatObjectOptions{})
	if err != nil {
		return artifact.Artifact{}, convert("stat", id, err)
	}
	return s.decode("stat", id, info)
}

func (s *Store) decode(op, id string, info minio.ObjectInfo) (artifact.Artifact, error) {
	a, err := decodeMeta(id, info)
	if errors.Is(err, errIncomplete) {
		return artifact.Artifact{}, fmt.Errorf("%s %s: %w", op, id, artifact.ErrNotFound)
	}
	if err != nil {
		return artifact.Artifact{}, fmt.Errorf("%s %s: %w: %w", op, id, artifact.ErrUnavailable, err)
	}
	return a, nil
}

// Open returns up to length bytes of id from offset (length < 0: to the
// end) with one ranged GET, streaming. A range reaching past the end is cut
// at the end; an offset at or past the end, or a zero length, yields an
// empty reader. A negative offset is ErrInvalid; an absent, malformed or
// pending id is ErrNotFound. Read errors wrap ErrUnavailable. The caller
// closes the reader.
func (s *Store) Open(ctx context.Context, id string, offset, length int64) (io.ReadCloser, error) {
	if !artifact.ValidID(id) {
		return nil, fmt.Errorf("open %q: %w", id, artifact.ErrNotFound)
	}
	if offset < 0 {
		return nil, fmt.Errorf("open %s: offset %d: %w", id, offset, artifact.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("open %s: %w", id, err)
	}
	empty := func() (io.ReadCloser, error) {
		if _, err := s.Stat(ctx, id); err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	if length == 0 {
		return empty()
	}
	var opts minio.GetObjectOptions
	switch {
	case length > 0 && length <= 1<<62-offset:
		opts.SetRange(offset, offset+length-1)
	case offset > 0:
		opts.SetRange(offset, 0)
	}
	body, info, _, err := s.core.GetObject(ctx, s.bucket, s.key(id), opts)
	if err != nil {
		if minio.ToErrorResponse(err).Code == "InvalidRange" {
			return empty() // the object exists; the offset is past its end
		}
		return nil, convert("open", id, err)
	}
	if _, err := s.decode("open", id, info); err != nil {
		body.Close()
		return nil, err
	}
	return &objectReader{ReadCloser: body, id: id}, nil
}

// objectReader turns a broken download into ErrUnavailable.
type objectReader struct {
	io.ReadCloser
	id string
}

func (r *objectReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = convert("read", r.id, err)
	}
	return n, err
}

// Delete removes id; an absent id is not an error, a malformed one is
// ErrInvalid. Downloads in progress may finish.
func (s *Store) Delete(ctx context.Context, id string) error {
	if !artifact.ValidID(id) {
		return fmt.Errorf("delete %q: %w", id, artifact.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %s: %w", id, err)
	}
	if err := s.c.RemoveObject(ctx, s.bucket, s.key(id), minio.RemoveObjectOptions{}); err != nil {
		if err = convert("delete", id, err); !errors.Is(err, artifact.ErrNotFound) {
			return err
		}
	}
	return nil
}

// ListExpired calls fn with the id of every artifact expired at now, and of
// every pending object older than a day (a crashed upload's). It lists the
// prefix with metadata (a MinIO extension: one request per 1000 objects)
// and falls back to a HEAD per object where the listing carries none. It
// stops at the first error of fn, ctx or the service and returns it.
func (s *Store) ListExpired(ctx context.Context, now time.Time, fn func(id string) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("list expired: %w", err)
	}
	lctx, cancel := context.WithCancel(ctx) // stops the listing goroutine on early return
	defer cancel()
	for obj := range s.c.ListObjects(lctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix, WithMetadata: true}) {
		if obj.Err != nil {
			return convert("list", s.prefix, obj.Err)
		}
		id := strings.TrimPrefix(obj.Key, s.prefix)
		if !artifact.ValidID(id) {
			continue
		}
		get := mapGetter(obj.UserMetadata)
		if get(keySHA256) == "" && get(keyPending) == "" {
			info, err := s.c.StatObject(ctx, s.bucket, obj.Key, minio.StatObjectOptions{})
			if err != nil {
				if err = convert("list", id, err); errors.Is(err, artifact.ErrNotFound) {
					continue // deleted meanwhile
				}
				return err
			}
			get = headerGetter(info.Metadata)
		}
		expired := false
		switch {
		case get(keyPending) != "":
			expired = now.Sub(obj.LastModified) > pendingMaxAge
		case get(keySHA256) != "":
			if v := get(keyExpires); v != "" {
				exp, err := time.Parse(time.RFC3339Nano, v)
				expired = err == nil && !now.Before(exp)
			}
		}
		if expired {
			if err := fn(id); err != nil {
				return err
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("list expired: %w", err)
	}
	return nil
}

// Ping reports whether the bucket is reachable and writable by writing and
// removing a small object under the prefix: ErrUnavailable if not.
func (s *Store) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	key := s.prefix + pingKey
	if _, err := s.core.PutObject(ctx, s.bucket, key, bytes.NewReader(nil), 0, "", emptySHA256, minio.PutObjectOptions{}); err != nil {
		return convert("ping", s.bucket, err)
	}
	if err := s.c.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return convert("ping", s.bucket, err)
	}
	return nil
}

// PresignGet returns a URL, valid for ttl (1 s to 7 days), that serves id
// with the given Content-Type and Content-Disposition (when not empty) and
// Cache-Control: private, no-store. It signs locally and does not check
// that id exists. A malformed id is ErrNotFound, a ttl out of range
// ErrInvalid.
func (s *Store) PresignGet(ctx context.Context, id string, ttl time.Duration, contentType, disposition string) (*url.URL, error) {
	if !artifact.ValidID(id) {
		return nil, fmt.Errorf("presign %q: %w", id, artifact.ErrNotFound)
	}
	if ttl < time.Second || ttl > 7*24*time.Hour {
		return nil, fmt.Errorf("presign %s: ttl %v not within 1s-7d: %w", id, ttl, artifact.ErrInvalid)
	}
	q := url.Values{}
	if contentType != "" {
		q.Set("response-content-type", contentType)
	}
	if disposition != "" {
		q.Set("response-content-disposition", disposition)
	}
	q.Set("response-cache-control", "private, no-store")
	u, err := s.c.PresignedGetObject(ctx, s.bucket, s.key(id), ttl, q)
	if err != nil {
		return nil, convert("presign", id, err)
	}
	return u, nil
}

// checkBucket is s3utils' bucket name check, for Options.check.
func checkBucket(name string) error { return s3utils.CheckValidBucketName(name) }

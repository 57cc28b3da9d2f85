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
// PREFIXrevoked/<artifact.RevocationPath>/, each named by
// artifact.RevocationKey.
//
// # Put
//
// Put streams r through SHA-256 into a buffer of PartSize bytes, so upload
// memory is bounded by PartSize (minio-go's own default for a stream of
// unknown size buffers 528 MiB), and at most MaxPuts uploads (MaxPutsPerTenant
// of one tenant) hold one at once. Then:
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
// # Open
//
// A read of 1 MiB or more from an http endpoint (no TLS, no proxy; Linux)
// is a presigned GET that Open sends itself, on a connection of its own:
// the reader it returns hands the fetch endpoint that connection,
// positioned at the body (artifact.ConnSection), and the kernel moves the
// bytes to the client (splice), where minio-go's body cost two copies per
// byte in user space. Any answer but the expected 200 or 206 with a length
// is asked again through minio-go, which maps it to the same errors; the
// deadlines are the same (see deadline.go and direct.go). Other reads go
// through minio-go and its pooled connections.
//
// Artifacts are immutable: every write carries If-None-Match: *, which the
// server checks on PUT and on initiating and completing a multipart upload
// (MinIO does; AWS S3 checks PUT and completion), so of two racing Puts of
// one id exactly one wins. A service that ignores If-None-Match would let
// the later Put win instead.
package s3store

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
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
	// DefaultPartSize is the multipart part size when Options.PartSize is
	// 0: S3's smallest, so that an upload holds as little as it can.
	DefaultPartSize = MinPartSize
	// DefaultMaxPuts, DefaultMaxPutsPerTenant and DefaultPutWait bound the
	// uploads in flight when Options leaves them 0: 16 × 5 MiB of part
	// buffers at most.
	DefaultMaxPuts          = 16
	DefaultMaxPutsPerTenant = 4
	DefaultPutWait          = 2 * time.Second
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
// concurrent use; Put holds one part buffer (Options.PartSize) per call,
// for at most Options.MaxPuts calls at once.
type Store struct {
	c          *minio.Client
	core       minio.Core
	bucket     string
	prefix     string
	partSize   int64
	gate       *gate         // bounds the Puts in flight (Options.MaxPuts)
	timeout    time.Duration // Options.Timeout (see deadline.go)
	idle       time.Duration // Options.IdleTimeout
	errTimeout error         // the cause of a bounded call's expired deadline
	direct     bool          // Open GETs directly (see direct.go)
}

// New connects to o.Bucket and checks that it exists, creating it when
// o.CreateBucket is set, and installs the lifecycle rule of o.LifecycleDays.
// It returns ErrInvalid for bad options, ErrMisconfigured when the service
// refuses the credentials or the bucket is missing, and ErrUnavailable
// when the service cannot be reached.
func New(ctx context.Context, o Options) (*Store, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	timeout, idle := cmp.Or(o.Timeout, DefaultTimeout), cmp.Or(o.IdleTimeout, DefaultIdleTimeout)
	c, err := newClient(o, timeout, idle)
	if err != nil {
		return nil, fmt.Errorf("s3store: %w: %w", artifact.ErrInvalid, err)
	}
	s := &Store{c: c, core: minio.Core{Client: c}, bucket: o.Bucket, prefix: o.Prefix, partSize: o.PartSize,
		timeout: timeout, idle: idle, errTimeout: newTimeoutError(timeout), direct: directOK(o.Endpoint, o.Secure),
		gate: newGate(cmp.Or(o.MaxPuts, DefaultMaxPuts), cmp.Or(o.MaxPutsPerTenant, DefaultMaxPutsPerTenant), cmp.Or(o.PutWait, DefaultPutWait))}
	if s.partSize == 0 {
		s.partSize = DefaultPartSize
	}
	if err := s.ensureBucket(ctx, o); err != nil {
		return nil, err
	}
	if o.LifecycleDays > 0 {
		if err := s.setLifecycle(ctx, o.LifecycleDays); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// newClient returns a minio-go client for o whose requests carry the
// deadlines of deadline.go.
func newClient(o Options, timeout, idle time.Duration) (*minio.Client, error) {
	tr, err := newTransport(o.Secure, timeout, idle)
	if err != nil {
		return nil, err
	}
	return minio.New(o.Endpoint, &minio.Options{
		Creds:     credentials.NewStaticV4(o.AccessKey, o.SecretKey, o.SessionToken),
		Secure:    o.Secure,
		Region:    o.Region,
		Transport: tr,
		// Lets Put send x-amz-checksum-sha256 (minio-go only allows
		// checksum headers on clients that declare trailer support).
		TrailingHeaders: true,
		// Fail over to ErrUnavailable within seconds when the service is
		// down, rather than retrying for the better part of a minute.
		MaxRetries: 3,
	})
}

// ensureBucket checks that o.Bucket exists, waiting up to 10 s for a
// service that is still starting, and creates it when it does not and
// o.CreateBucket is set.
func (s *Store) ensureBucket(ctx context.Context, o Options) error {
	exists := func() (bool, error) {
		bctx, cancel := s.bounded(ctx)
		defer cancel()
		ok, err := s.c.BucketExists(bctx, o.Bucket)
		return ok, convert(bctx, "bucket", o.Bucket, err)
	}
	ok, err := exists()
	// A server that has just started may answer before it is ready
	// (MinIO: "Server not initialized yet"): wait for it, a little.
	for try := 0; err != nil && starting(err) && try < 40 && ctx.Err() == nil; try++ {
		time.Sleep(250 * time.Millisecond)
		ok, err = exists()
	}
	switch {
	case err != nil:
		return err
	case ok:
		return nil
	case !o.CreateBucket:
		return fmt.Errorf("s3store: bucket %s does not exist (create it, or set create=true): %w", o.Bucket, artifact.ErrMisconfigured)
	}
	bctx, cancel := s.bounded(ctx)
	defer cancel()
	err = s.c.MakeBucket(bctx, o.Bucket, minio.MakeBucketOptions{Region: o.Region})
	if err != nil && minio.ToErrorResponse(err).Code != "BucketAlreadyOwnedByYou" {
		return convert(bctx, "create bucket", o.Bucket, err)
	}
	return nil
}

// starting reports an error of a service that is still starting up.
func starting(err error) bool {
	var er minio.ErrorResponse
	if !errors.As(err, &er) {
		return false
	}
	switch er.Code {
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
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	cfg, err := s.c.GetBucketLifecycle(ctx, s.bucket)
	if err != nil {
		if minio.ToErrorResponse(err).Code != "NoSuchLifecycleConfiguration" {
			return convert(ctx, "get lifecycle", s.bucket, err)
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
		return convert(ctx, "set lifecycle", s.bucket, err)
	}
	return nil
}

func (s *Store) key(id string) string { return s.prefix + id }

// convert turns a minio-go error of a call made with ctx into one wrapping
// artifact's sentinels: missing object → ErrNotFound, failed If-None-Match
// → ErrExists, the store's own deadline (see bounded) → ErrUnavailable,
// the caller's cancellation kept as is, anything else (network,
// credentials, server) → ErrUnavailable with the cause. A nil err stays nil.
func convert(ctx context.Context, op, id string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		if cause := context.Cause(ctx); errors.Is(cause, artifact.ErrUnavailable) {
			return fmt.Errorf("%s %s: %w", op, id, cause)
		}
	}
	// Only the caller's own end is kept as is: net/http's timeouts also
	// match context.DeadlineExceeded, and they are the service's fault.
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return fmt.Errorf("%s %s: %w", op, id, err)
	}
	switch minio.ToErrorResponse(err).Code {
	case "NoSuchKey", "NotFound":
		return fmt.Errorf("%s %s: %w", op, id, artifact.ErrNotFound)
	case "PreconditionFailed", "ConditionalRequestConflict":
		return fmt.Errorf("%s %s: %w", op, id, artifact.ErrExists)
	case "AccessDenied", "NoSuchBucket", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled":
		// Configuration, not a passing failure: retrying cannot help.
		return fmt.Errorf("%s %s: %w: %w", op, id, artifact.ErrMisconfigured, err)
	}
	return fmt.Errorf("%s %s: %w: %w", op, id, artifact.ErrUnavailable, err)
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
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	info, err := s.c.StatObject(ctx, s.bucket, s.key(id), minio.StatObjectOptions{})
	if err != nil {
		return artifact.Artifact{}, convert(ctx, "stat", id, err)
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
	if err := artifact.StartOpen(ctx, id, offset); err != nil {
		return nil, err
	}
	if length == 0 {
		return s.openEmpty(ctx, id)
	}
	if s.direct && (length < 0 || length >= directMin) {
		rc, err := s.openDirect(ctx, id, offset, length)
		if !errors.Is(err, errIndirect) {
			return rc, err
		}
	}
	return s.getObject(ctx, id, rangeOptions(offset, length))
}

// openEmpty returns an empty reader of id, or Stat's error when id is
// not there to read.
func (s *Store) openEmpty(ctx context.Context, id string) (io.ReadCloser, error) {
	if _, err := s.Stat(ctx, id); err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(nil)), nil
}

// rangeOptions asks for length bytes from offset (length < 0: to the end).
func rangeOptions(offset, length int64) minio.GetObjectOptions {
	var opts minio.GetObjectOptions
	switch {
	case length > 0 && length <= 1<<62-offset:
		opts.SetRange(offset, offset+length-1)
	case offset > 0:
		opts.SetRange(offset, 0)
	}
	return opts
}

// getObject opens id through minio-go. It is bounded like Stat until the
// body starts; the body then has the transport's idle deadline only,
// however long it takes.
func (s *Store) getObject(ctx context.Context, id string, opts minio.GetObjectOptions) (io.ReadCloser, error) {
	rctx, cancel := startOp(ctx)
	timer := time.AfterFunc(s.timeout, func() { cancel(s.errTimeout) })
	body, info, _, err := s.core.GetObject(rctx, s.bucket, s.key(id), opts)
	if !timer.Stop() && err == nil {
		body.Close()
		err = context.Cause(rctx)
	}
	if err != nil {
		defer cancel(nil)
		if minio.ToErrorResponse(err).Code == "InvalidRange" {
			return s.openEmpty(ctx, id) // the object exists; the offset is past its end
		}
		return nil, convert(rctx, "open", id, err)
	}
	if _, err := s.decode("open", id, info); err != nil {
		body.Close()
		cancel(nil)
		return nil, err
	}
	return &objectReader{ReadCloser: body, id: id, ctx: rctx, cancel: cancel}, nil
}

// objectReader turns a broken download into ErrUnavailable.
type objectReader struct {
	io.ReadCloser
	id     string
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func (r *objectReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = convert(r.ctx, "read", r.id, err)
	}
	return n, err
}

func (r *objectReader) Close() error {
	err := r.ReadCloser.Close()
	r.cancel(nil)
	return err
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
	return s.remove(ctx, "delete", s.key(id))
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
	err := s.list(ctx, "list", minio.ListObjectsOptions{Prefix: s.prefix, WithMetadata: true}, func(obj minio.ObjectInfo) error {
		return s.visitExpired(ctx, now, obj, fn)
	})
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("list expired: %w", err)
	}
	return nil
}

// list calls visit with each object the listing o yields, stopping at
// visit's first error. The listing is bounded like a call that only asks:
// when it yields nothing for Timeout (the time visit takes does not
// count), it fails with ErrUnavailable. The caller's own cancellation
// ends it without an error of its own: check ctx after.
func (s *Store) list(ctx context.Context, op string, o minio.ListObjectsOptions, visit func(minio.ObjectInfo) error) error {
	lctx, cancel := startOp(ctx) // also stops the listing goroutine on early return
	defer cancel(nil)
	watchdog := time.AfterFunc(s.timeout, func() { cancel(s.errTimeout) })
	defer watchdog.Stop()
	for obj := range s.c.ListObjects(lctx, s.bucket, o) {
		if !watchdog.Stop() {
			break
		}
		if obj.Err != nil {
			return convert(lctx, op, o.Prefix, obj.Err)
		}
		if err := visit(obj); err != nil {
			return err
		}
		watchdog.Reset(s.timeout)
	}
	if lctx.Err() != nil && ctx.Err() == nil {
		return convert(lctx, op, o.Prefix, lctx.Err())
	}
	return nil
}

// visitExpired calls fn with obj's id if it is expired at now (see ListExpired).
func (s *Store) visitExpired(ctx context.Context, now time.Time, obj minio.ObjectInfo, fn func(id string) error) error {
	id := strings.TrimPrefix(obj.Key, s.prefix)
	if !artifact.ValidID(id) {
		return nil
	}
	get := mapGetter(obj.UserMetadata)
	if get(keySHA256) == "" && get(keyPending) == "" {
		sctx, cancel := s.bounded(ctx)
		info, err := s.c.StatObject(sctx, s.bucket, obj.Key, minio.StatObjectOptions{})
		err = convert(sctx, "list", id, err)
		cancel()
		if errors.Is(err, artifact.ErrNotFound) {
			return nil // deleted meanwhile
		}
		if err != nil {
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
		return fn(id)
	}
	return nil
}

// Ping reports whether the bucket is reachable and writable by writing and
// removing a small object under the prefix: ErrUnavailable if not.
func (s *Store) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	key := s.prefix + pingKey
	if _, err := s.core.PutObject(ctx, s.bucket, key, bytes.NewReader(nil), 0, "", emptySHA256, minio.PutObjectOptions{}); err != nil {
		return convert(ctx, "ping", s.bucket, err)
	}
	if err := s.c.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return convert(ctx, "ping", s.bucket, err)
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
	ctx, cancel := s.bounded(ctx) // signs locally, but may ask the bucket's region once
	defer cancel()
	u, err := s.c.PresignedGetObject(ctx, s.bucket, s.key(id), ttl, q)
	if err != nil {
		return nil, convert(ctx, "presign", id, err)
	}
	return u, nil
}

// checkBucket is s3utils' bucket name check, for Options.check.
func checkBucket(name string) error { return s3utils.CheckValidBucketName(name) }

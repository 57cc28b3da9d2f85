package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/token"
)

// revokedPrefix holds revocation records under the store's prefix: one
// empty object per revocation at
// revoked/<artifact.RevocationPath>/<artifact.RevocationKey>, so that
// reading an artifact's revocations, or counting a tenant's, is one listing
// request per 1000 records. Artifact listings are not recursive and never
// descend into it.
const revokedPrefix = "revoked/"

// revocationPrefix is the key prefix of tenant's records, of one artifact
// when id is not "".
func (s *Store) revocationPrefix(tenant, id string) string {
	return s.prefix + revokedPrefix + artifact.RevocationPath(tenant, id) + "/"
}

// Revoke records a revocation (see artifact.Store) as an empty object,
// written only where none is: a record already there (the same token id
// and expiry, revoked again here or by another replica) is left as it is,
// with no new write or object version.
func (s *Store) Revoke(ctx context.Context, r artifact.Revocation) error {
	if !token.ValidID(r.TokenID) || !artifact.ValidID(r.Artifact) {
		return fmt.Errorf("revoke: token or artifact id: %w", artifact.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	key := s.revocationPrefix(r.Tenant, r.Artifact) + artifact.RevocationKey(r.TokenID, r.Expires)
	opts := minio.PutObjectOptions{}
	opts.SetMatchETagExcept("*")
	_, err := s.core.PutObject(ctx, s.bucket, key, bytes.NewReader(nil), 0, "", emptySHA256, opts)
	if minio.ToErrorResponse(err).Code == "PreconditionFailed" {
		return nil // recorded already, durably: the record is its name
	}
	return convert(ctx, "revoke", r.TokenID, err)
}

// Revocations lists tenant's revocation records (see artifact.Store), those
// of artifact id only when id is not "", ignoring foreign objects and
// records past their expiry.
func (s *Store) Revocations(ctx context.Context, tenant, id string, now time.Time, fn func(artifact.Revocation) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("revocations: %w", err)
	}
	prefix := s.revocationPrefix(tenant, "")
	from := s.revocationPrefix(tenant, id)
	err := s.list(ctx, "revocations", minio.ListObjectsOptions{Prefix: from, Recursive: true}, func(obj minio.ObjectInfo) error {
		r, ok := artifact.ParseRevocationPath(tenant, strings.TrimPrefix(obj.Key, prefix))
		if !ok || !now.Before(r.Expires) {
			return nil
		}
		return fn(r)
	})
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("revocations: %w", err)
	}
	return nil
}

// SweepRevocations removes every record past its expiry (see
// artifact.Store). It lists the whole revocation prefix: the sweeper's
// job, never a fetch's.
func (s *Store) SweepRevocations(ctx context.Context, now time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("sweep revocations: %w", err)
	}
	n := 0
	err := s.list(ctx, "sweep revocations", minio.ListObjectsOptions{Prefix: s.prefix + revokedPrefix, Recursive: true}, func(obj minio.ObjectInfo) error {
		// Records of any layout are named by RevocationKey.
		if _, exp, ok := artifact.ParseRevocationKey(path.Base(obj.Key)); !ok || now.Before(exp) {
			return nil
		}
		if err := s.remove(ctx, "sweep revocations", obj.Key); err != nil {
			return err
		}
		n++
		return nil
	})
	if err == nil {
		err = ctx.Err()
	}
	return n, err
}

// DeleteRevocations removes the records of tenant's artifact id (see
// artifact.Store).
func (s *Store) DeleteRevocations(ctx context.Context, tenant, id string) error {
	if !artifact.ValidID(id) {
		return fmt.Errorf("delete revocations %q: %w", id, artifact.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete revocations: %w", err)
	}
	err := s.list(ctx, "delete revocations", minio.ListObjectsOptions{Prefix: s.revocationPrefix(tenant, id), Recursive: true}, func(obj minio.ObjectInfo) error {
		return s.remove(ctx, "delete revocations", obj.Key)
	})
	if err == nil {
		err = ctx.Err()
	}
	return err
}

// remove deletes one object, bounded; an absent one is not an error.
func (s *Store) remove(ctx context.Context, op, key string) error {
	rctx, cancel := s.bounded(ctx)
	defer cancel()
	if err := s.c.RemoveObject(rctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		if err = convert(rctx, op, key, err); !errors.Is(err, artifact.ErrNotFound) {
			return err
		}
	}
	return nil
}

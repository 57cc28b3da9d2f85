package s3store

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/token"
)

// revokedPrefix holds revocation records under the store's prefix: one
// empty object per revocation, named by artifact.RevocationKey, so that
// reading the list is one listing request per 1000 records. Artifact
// listings are not recursive and never descend into it.
const revokedPrefix = "revoked/"

// Revoke records a revocation (see artifact.Store) as an empty object.
func (s *Store) Revoke(ctx context.Context, tokenID string, expires time.Time) error {
	if !token.ValidID(tokenID) {
		return fmt.Errorf("revoke: token id: %w", artifact.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	key := s.prefix + revokedPrefix + artifact.RevocationKey(tokenID, expires)
	if _, err := s.core.PutObject(ctx, s.bucket, key, bytes.NewReader(nil), 0, "", emptySHA256, minio.PutObjectOptions{}); err != nil {
		return convert(ctx, "revoke", tokenID, err)
	}
	return nil
}

// Revocations lists the revocation records (see artifact.Store), removing
// those past their expiry and ignoring foreign objects.
func (s *Store) Revocations(ctx context.Context, now time.Time, fn func(tokenID string, expires time.Time) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("revocations: %w", err)
	}
	prefix := s.prefix + revokedPrefix
	err := s.list(ctx, "revocations", minio.ListObjectsOptions{Prefix: prefix}, func(obj minio.ObjectInfo) error {
		id, exp, ok := artifact.ParseRevocationKey(strings.TrimPrefix(obj.Key, prefix))
		if !ok {
			return nil
		}
		if !now.Before(exp) {
			// Best effort: the next listing retries.
			rctx, cancel := s.bounded(ctx)
			s.c.RemoveObject(rctx, s.bucket, obj.Key, minio.RemoveObjectOptions{})
			cancel()
			return nil
		}
		return fn(id, exp)
	})
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("revocations: %w", err)
	}
	return nil
}

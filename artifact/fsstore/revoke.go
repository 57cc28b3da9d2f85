package fsstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/token"
)

// revokedName is the directory of revocation records: one empty file per
// revocation, named by artifact.RevocationKey, so that reading the list is
// one directory read. It is not a shard name, so listings of artifacts
// never see it.
const revokedName = "revoked"

func (s *Store) revokedDir() string { return filepath.Join(s.dir, revokedName) }

// Revoke records a revocation (see artifact.Store): an empty file created
// and made durable with its directory. A crash leaves either no file or a
// complete record, because the name is the record.
func (s *Store) Revoke(ctx context.Context, tokenID string, expires time.Time) error {
	if !token.ValidID(tokenID) {
		return fmt.Errorf("revoke: token id: %w", artifact.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	dir := s.revokedDir()
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return unavailable("revoke", tokenID, err)
		}
		if err := syncDir(s.dir); err != nil {
			return unavailable("revoke", tokenID, err)
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, artifact.RevocationKey(tokenID, expires)), os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return unavailable("revoke", tokenID, err)
	}
	if err := f.Close(); err != nil {
		return unavailable("revoke", tokenID, err)
	}
	if err := syncDir(dir); err != nil {
		return unavailable("revoke", tokenID, err)
	}
	return nil
}

// Revocations lists the revocation records (see artifact.Store), removing
// those past their expiry and ignoring foreign files.
func (s *Store) Revocations(ctx context.Context, now time.Time, fn func(tokenID string, expires time.Time) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("revocations: %w", err)
	}
	entries, err := os.ReadDir(s.revokedDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return unavailable("revocations", s.revokedDir(), err)
	}
	for _, e := range entries {
		id, exp, ok := artifact.ParseRevocationKey(e.Name())
		if !ok {
			continue
		}
		if !now.Before(exp) {
			os.Remove(filepath.Join(s.revokedDir(), e.Name())) // best effort: the next listing retries
			continue
		}
		if err := fn(id, exp); err != nil {
			return err
		}
	}
	return nil
}

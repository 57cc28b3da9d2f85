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

// revokedName is the directory of revocation records:
// DIR/revoked/<artifact.RevocationPath>/<artifact.RevocationKey>, one
// empty file per revocation, so that reading an artifact's revocations is
// one directory read and counting a tenant's one read per artifact it has
// revoked links of. It is not a shard name, so listings of artifacts never
// see it.
const revokedName = "revoked"

func (s *Store) revokedDir() string { return filepath.Join(s.dir, revokedName) }

// revocationDir is the directory of tenant's records, of one artifact when
// id is not "".
func (s *Store) revocationDir(tenant, id string) string {
	return filepath.Join(s.revokedDir(), filepath.FromSlash(artifact.RevocationPath(tenant, id)))
}

// Revoke records a revocation (see artifact.Store): an empty file created
// and made durable with its directories. A crash leaves either no file or
// a complete record, because the name is the record. A record already
// there is not written again; its directory is synced all the same, in
// case the Revoke that created it failed before it was durable. It returns
// ErrInvalid for a malformed token or artifact id, ctx's error, ErrNoSpace
// when the disk or quota is full and ErrUnavailable when the file system
// fails otherwise.
func (s *Store) Revoke(ctx context.Context, r artifact.Revocation) error {
	if !token.ValidID(r.TokenID) || !artifact.ValidID(r.Artifact) {
		return fmt.Errorf("revoke: token or artifact id: %w", artifact.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	dir := s.revocationDir(r.Tenant, r.Artifact)
	name := filepath.Join(dir, artifact.RevocationKey(r.TokenID, r.Expires))
	made := false // whether directories were made, which must be made durable too
	for attempt := 0; ; attempt++ {
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return unavailable("revoke", r.TokenID, err)
			}
			made = true
		}
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrNotExist) && attempt < 3 {
			continue // the sweeper removed the empty directory meanwhile
		}
		if errors.Is(err, fs.ErrExist) {
			break // recorded already
		}
		if err != nil {
			return unavailable("revoke", r.TokenID, err)
		}
		if err := f.Close(); err != nil {
			return unavailable("revoke", r.TokenID, err)
		}
		break
	}
	for d := dir; ; d = filepath.Dir(d) {
		if err := syncDir(d); err != nil {
			return unavailable("revoke", r.TokenID, err)
		}
		if !made || d == s.dir {
			return nil
		}
	}
}

// Revocations calls fn with tenant's revocation records (see
// artifact.Store), only those of artifact id when id is not "", ignoring
// foreign files and records past their expiry. It stops at fn's first
// error and returns it as it is; it returns ctx's error when ctx ends, and
// ErrUnavailable when a directory cannot be read.
func (s *Store) Revocations(ctx context.Context, tenant, id string, now time.Time, fn func(artifact.Revocation) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("revocations: %w", err)
	}
	ids := []string{id}
	if id == "" {
		entries, err := readDir(s.revocationDir(tenant, ""))
		if err != nil {
			return unavailable("revocations", tenant, err)
		}
		ids = ids[:0]
		for _, e := range entries {
			ids = append(ids, e.Name())
		}
	}
	for _, id := range ids {
		if !artifact.ValidID(id) {
			continue
		}
		entries, err := readDir(s.revocationDir(tenant, id))
		if err != nil {
			return unavailable("revocations", id, err)
		}
		for _, e := range entries {
			r, ok := artifact.ParseRevocationPath(tenant, id+"/"+e.Name())
			if !ok || !now.Before(r.Expires) {
				continue
			}
			if err := fn(r); err != nil {
				return err
			}
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("revocations: %w", err)
		}
	}
	return nil
}

// readDir is os.ReadDir with an absent directory read as empty.
func readDir(dir string) ([]os.DirEntry, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return entries, err
}

// SweepRevocations removes every record past its expiry (see
// artifact.Store), and the directories it empties, and returns how many
// records it removed. It walks the whole revocation tree, so it is the
// sweeper's job, never a fetch's. A file-system failure, or ctx ending
// during the walk, is returned wrapped in ErrUnavailable.
func (s *Store) SweepRevocations(ctx context.Context, now time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("sweep revocations: %w", err)
	}
	n := 0
	root := s.revokedDir()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if d.IsDir() {
			return nil
		}
		// Records of any layout are named by RevocationKey.
		if _, exp, ok := artifact.ParseRevocationKey(d.Name()); ok && !now.Before(exp) {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			n++
		}
		return nil
	})
	if err == nil {
		removeEmptyDirs(root)
	}
	if err != nil {
		return n, unavailable("sweep revocations", root, err)
	}
	return n, nil
}

// removeEmptyDirs removes the empty tenant and artifact directories below
// root. A Revoke racing with it retries its create (see Revoke).
func removeEmptyDirs(root string) {
	tenants, _ := os.ReadDir(root)
	for _, t := range tenants {
		if !t.IsDir() {
			continue
		}
		td := filepath.Join(root, t.Name())
		arts, _ := os.ReadDir(td)
		for _, a := range arts {
			if a.IsDir() {
				os.Remove(filepath.Join(td, a.Name())) // fails unless empty
			}
		}
		os.Remove(td) // fails unless empty
	}
}

// DeleteRevocations removes the records of tenant's artifact id (see
// artifact.Store); none there is not an error. It returns ErrInvalid for a
// malformed id, ctx's error, and ErrUnavailable when the file system fails.
func (s *Store) DeleteRevocations(ctx context.Context, tenant, id string) error {
	if !artifact.ValidID(id) {
		return fmt.Errorf("delete revocations %q: %w", id, artifact.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete revocations: %w", err)
	}
	if err := os.RemoveAll(s.revocationDir(tenant, id)); err != nil {
		return unavailable("delete revocations", id, err)
	}
	return nil
}

package artifact

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits on metadata, the same for every store so that an artifact one
// store accepts the others accept too (S3 allows 2 KB of user metadata in
// all, and these fit even when every byte needs escaping).
const (
	maxName     = 255
	maxTenant   = 128
	maxSource   = 128
	maxMimeType = 255
)

// defaultMimeType is stored when meta.MimeType is empty.
const defaultMimeType = "application/octet-stream"

// Normalize is the one metadata check of every Store: Put calls it before
// anything is written. It returns meta in the form stores keep (default
// MIME type, lower-case SHA-256, UTC times), or an error wrapping
// ErrInvalid that names the first bad field.
func Normalize(meta Artifact) (Artifact, error) {
	bad := func(format string, args ...any) (Artifact, error) {
		return Artifact{}, fmt.Errorf("put: "+format+": %w", append(args, ErrInvalid)...)
	}
	if !ValidID(meta.ID) {
		return bad("malformed id %q", meta.ID)
	}
	if meta.Size < 0 {
		return bad("negative size %d", meta.Size)
	}
	if meta.SHA256 != "" {
		if _, err := hex.DecodeString(meta.SHA256); err != nil || len(meta.SHA256) != 64 {
			return bad("sha256 %q is not 64 hex digits", meta.SHA256)
		}
		meta.SHA256 = strings.ToLower(meta.SHA256)
	}
	if meta.MimeType == "" {
		meta.MimeType = defaultMimeType
	}
	if !validMimeType(meta.MimeType) {
		return bad("mime type %q", meta.MimeType)
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{{"name", meta.Name, maxName}, {"tenant", meta.Tenant, maxTenant}, {"source", meta.Source, maxSource}} {
		if len(f.v) > f.max {
			return bad("%s longer than %d bytes", f.name, f.max)
		}
		if !utf8.ValidString(f.v) {
			return bad("%s is not UTF-8", f.name)
		}
	}
	if meta.Call != meta.Call.Bounded() {
		return bad("call provenance outside its bounds (Call.Bounded)")
	}
	meta.Created, meta.Expires = meta.Created.UTC(), meta.Expires.UTC()
	for _, t := range []int{meta.Created.Year(), meta.Expires.Year()} {
		if t < 1 || t > 9999 {
			return bad("time outside years 1-9999")
		}
	}
	return meta, nil
}

// StartPut is how every Store's Put begins: it returns Normalize's answer
// for meta, or ctx's error (wrapped, naming the id) when ctx has already
// ended, so no store starts writing for a caller that has gone.
func StartPut(ctx context.Context, meta Artifact) (Artifact, error) {
	a, err := Normalize(meta)
	if err != nil {
		return Artifact{}, err
	}
	if err := ctx.Err(); err != nil {
		return Artifact{}, fmt.Errorf("put %s: %w", a.ID, err)
	}
	return a, nil
}

// StartOpen is how every Store's Open begins, so the stores answer bad
// arguments alike: an id ValidID refuses is ErrNotFound (no store can
// hold it), a negative offset is ErrInvalid, and an ended ctx returns its
// error, each wrapped and naming the id.
func StartOpen(ctx context.Context, id string, offset int64) error {
	if !ValidID(id) {
		return fmt.Errorf("open %q: %w", id, ErrNotFound)
	}
	if offset < 0 {
		return fmt.Errorf("open %s: offset %d: %w", id, offset, ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("open %s: %w", id, err)
	}
	return nil
}

// validMimeType accepts what can travel unchanged in a Content-Type header:
// printable ASCII, no surrounding spaces.
func validMimeType(s string) bool {
	if s == "" || len(s) > maxMimeType || s[0] == ' ' || s[len(s)-1] == ' ' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

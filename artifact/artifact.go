// Package artifact is Spillway's domain: the metadata of a stored artifact,
// the Store interface its backends implement, the Service that mints
// self-authenticating links (with the token package's Signer), the HTTP
// handler that serves artifact bytes to holders of such links, and the
// audit trail of every offload and every read of those bytes (audit.go).
//
// The package imports no storage vendor. Backends live in sub-packages
// (fsstore, s3store) and convert their vendor's errors into the sentinel
// errors declared here. HTTPError is the one place those errors become
// HTTP answers; what every HTTP route shares (safety headers, the error
// body, the write-stall rule) is in the httpsafe sub-package.
package artifact

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"
)

// Sentinel errors. Backends wrap them with context; callers test with errors.Is.
var (
	// ErrNotFound is returned when no artifact has the requested id.
	ErrNotFound = errors.New("artifact: not found")
	// ErrExpired is returned when the artifact exists but its expiry has passed.
	ErrExpired = errors.New("artifact: expired")
	// ErrUnavailable is returned when the backing store cannot be reached.
	ErrUnavailable = errors.New("artifact: store unavailable")
	// ErrMisconfigured is returned when the backing store refuses
	// Spillway's credentials or lacks its bucket: a configuration error
	// that no retry cures, for the operator, not the caller, to fix.
	ErrMisconfigured = errors.New("artifact: store misconfigured (credentials refused or no such bucket)")
	// ErrTooLarge is returned when an upload exceeds the configured size cap.
	ErrTooLarge = errors.New("artifact: too large")
	// ErrIntegrity is returned when the bytes received do not match the
	// declared size or SHA-256; nothing is stored.
	ErrIntegrity = errors.New("artifact: size or checksum mismatch")
	// ErrInvalid is returned for malformed ids or metadata.
	ErrInvalid = errors.New("artifact: invalid")
	// ErrExists is returned by Put when the id is already taken: artifacts
	// are immutable.
	ErrExists = errors.New("artifact: already exists")
	// ErrLinkRefused is returned when a link's token does not allow the
	// request: malformed, tampered, of a retired key, revoked, or used
	// outside its bindings (method, client address). The fetch endpoint
	// answers every such case with the same 403, whatever was wrong.
	ErrLinkRefused = errors.New("artifact: link not valid for this request")
	// ErrNoSpace is returned when the store has no room left for the bytes
	// (a full disk or an exhausted quota); nothing is stored.
	ErrNoSpace = errors.New("artifact: store is full")
	// ErrIncomplete is returned by Service.Put when the bytes could not be
	// read to their end (a malformed or aborted upload): the sender's
	// failure, not the store's. Nothing is stored.
	ErrIncomplete = errors.New("artifact: the bytes ended before their end")
	// ErrRevocationLimit is returned by Service.Revoke when the artifact,
	// or its tenant, already has as many revoked links as allowed
	// (Service.MaxRevocationsPerArtifact, MaxRevocationsPerTenant):
	// delete the artifact instead, which refuses all its links at once.
	ErrRevocationLimit = errors.New("artifact: too many revoked links")
	// ErrBusy is returned when a store has as many uploads in flight as it
	// allows (in all, or of the caller's tenant) and none ended within a
	// short wait: retry later. It wraps ErrUnavailable, so a caller that
	// only knows that one treats it as the passing failure it is.
	ErrBusy = fmt.Errorf("artifact: too many uploads at once: %w", ErrUnavailable)
)

// Artifact is the metadata stored with every artifact. It is immutable once
// Put returns.
type Artifact struct {
	ID       string    `json:"id"`
	Name     string    `json:"name,omitempty"`
	MimeType string    `json:"mimeType"`
	Size     int64     `json:"size"`
	SHA256   string    `json:"sha256"` // lower-case hex
	Created  time.Time `json:"created"`
	Expires  time.Time `json:"expires"`
	Tenant   string    `json:"tenant,omitempty"` // owner; "" when inbound auth is off
	Source   string    `json:"source,omitempty"` // what produced it, e.g. "tool:query" or "put"
	// Call is the request that produced it (provenance, for the audit
	// trail); zero when none was recorded. See Call.Bounded for its limits.
	Call Call `json:"call,omitzero"`
}

// Expired reports whether a is past its expiry at now. A zero Expires never expires.
func (a Artifact) Expired(now time.Time) bool {
	return !a.Expires.IsZero() && !now.Before(a.Expires)
}

// Store keeps artifact bytes with their metadata. Implementations must be safe
// for concurrent use and have identical semantics (see package storetest).
type Store interface {
	// Put reads r to EOF and stores the bytes under meta.ID with meta's
	// metadata. It computes Size and SHA256 while streaming; if meta.Size is
	// positive or meta.SHA256 is set and the bytes disagree, it stores nothing
	// and returns ErrIntegrity. It returns the stored metadata only once the
	// artifact is durable. An existing id yields ErrExists.
	Put(ctx context.Context, meta Artifact, r io.Reader) (Artifact, error)
	// Stat returns the metadata of id, or ErrNotFound. It does not check expiry.
	Stat(ctx context.Context, id string) (Artifact, error)
	// Open returns length bytes of id starting at offset; length < 0 reads to
	// the end. The caller validates the range against Stat's size.
	Open(ctx context.Context, id string, offset, length int64) (io.ReadCloser, error)
	// Delete removes id. Deleting an absent id is not an error.
	Delete(ctx context.Context, id string) error
	// ListExpired calls fn with the id of every artifact that expired before
	// now, stopping at the first error fn returns.
	ListExpired(ctx context.Context, now time.Time, fn func(id string) error) error
	// Ping reports whether the store is reachable and writable: ErrUnavailable if not.
	Ping(ctx context.Context) error
	// Revoke durably records r where every replica sharing the store will
	// see it. Recording a token id again is not an error; the later expiry
	// wins. A malformed artifact or token id (ValidID, token.ValidID) is
	// ErrInvalid.
	Revoke(ctx context.Context, r Revocation) error
	// Revocations calls fn for every revocation recorded under tenant whose
	// expiry is after now: those of artifactID only, or of every artifact
	// of tenant when artifactID is "". It stops at the first error fn
	// returns. A token id recorded more than once may be reported more than
	// once. It removes nothing: that is SweepRevocations' job, off the read
	// path.
	Revocations(ctx context.Context, tenant, artifactID string, now time.Time, fn func(Revocation) error) error
	// SweepRevocations removes every revocation, of any tenant, whose
	// expiry is not after now, and returns how many it removed.
	SweepRevocations(ctx context.Context, now time.Time) (int, error)
	// DeleteRevocations removes every revocation of tenant's artifactID
	// (after the artifact is deleted, so that they stop counting against
	// the tenant's bound). Removing none is not an error.
	DeleteRevocations(ctx context.Context, tenant, artifactID string) error
}

// FileSection is implemented by a reader Store.Open returns when its bytes
// are a section of a regular file (the local-directory store): the fetch
// endpoint then has the kernel copy them to the client (sendfile) instead
// of reading them through a buffer. The file stays owned by the reader,
// which its Close closes; the endpoint may move the file's offset.
type FileSection interface {
	// FileSection returns the file and the section: n bytes from off.
	FileSection() (f *os.File, off, n int64)
}

// Presigner is implemented by stores that can hand out a short-lived URL of
// their own for an object (S3). The fetch handler's redirect mode uses it.
type Presigner interface {
	// PresignGet returns a URL valid for ttl that serves id with the given
	// response Content-Type and Content-Disposition.
	PresignGet(ctx context.Context, id string, ttl time.Duration, contentType, disposition string) (*url.URL, error)
}

// idEncoding is lower-case base32 without padding: URL- and file-name-safe,
// case-insensitive file systems cannot confuse two ids.
var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// idLen is the length of an id: 20 random bytes (160 bits) in base32.
const idLen = 32

// NewID returns a fresh opaque artifact id with 160 random bits.
func NewID() string {
	var b [20]byte
	rand.Read(b[:]) // never fails (crypto/rand since Go 1.24)
	return idEncoding.EncodeToString(b[:])
}

// ValidID reports whether id has the exact shape NewID produces. Stores call it
// before turning an id into a path or key, so no id can traverse.
func ValidID(id string) bool {
	if len(id) != idLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// URIPrefix starts every artifact's MCP resource URI.
const URIPrefix = "spillway://artifacts/"

// URI returns the MCP resource URI of artifact id.
func URI(id string) string { return URIPrefix + id }

// IDFromURI returns the artifact id of a Spillway resource URI, and whether uri is one.
func IDFromURI(uri string) (string, bool) {
	id, ok := strings.CutPrefix(uri, URIPrefix)
	if !ok || !ValidID(id) {
		return "", false
	}
	return id, true
}

package artifact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"net/url"
	"time"

	"github.com/spillway-dev/spillway/artifact/identity"
	"github.com/spillway-dev/spillway/artifact/token"
	"github.com/spillway-dev/spillway/policy/decision"
)

// MintAuthorizer decides whether a link may be minted (the policy's mint
// decision). *policy.Engine implements it.
type MintAuthorizer interface {
	Mint(ctx context.Context, in decision.MintInput) (decision.Mint, error)
}

// LinkOptions shape a minted link.
type LinkOptions struct {
	TTL    time.Duration // 0: Service.DefaultTTL; never beyond the artifact's expiry
	Method token.Method  // zero: token.MethodGet
	CIDR   netip.Prefix  // client address binding; zero: none
	Tenant string        // who asks; the link is bound to the artifact's tenant
	// Audience is a label signed into the link for the fetch policy
	// (token.Claims.Audience); it binds nothing by itself.
	Audience string
	Source   string // for the mint decision: "offload", "api", "cli", "stream"
}

// Link is a minted link to an artifact.
type Link struct {
	URL     string    // the httpUrl a client fetches the bytes from, token included
	Expires time.Time // when the link stops working; never after the artifact's expiry
	TokenID string    // the id of the link's token, which Service.Revoke takes
}

// Service ties a Store to a Signer: it stores artifacts, mints links to them,
// serves their metadata through a cache, and decides every read of their
// bytes (Authorize). Fields must be set before first use and not changed
// afterwards; a Service must not be copied after first use. Methods are safe
// for concurrent use.
type Service struct {
	Store     Store
	Signer    *token.Signer
	PublicURL *url.URL       // base of every httpUrl, e.g. https://spill.example.com
	Mint      MintAuthorizer // nil allows every mint (tests and tools only)
	Cache     *Cache         // nil disables caching
	Metrics   *Metrics       // nil counts nothing
	// Audit receives the audit trail: one line per offload and per read of
	// an artifact's bytes, allowed or refused (audit.go). Nil writes none.
	// Its lines never carry a token.
	Audit *slog.Logger

	// Fetch decides every read of an artifact's bytes (Authorize). Nil
	// denies them all: a misconfigured server must not be open.
	Fetch FetchAuthorizer

	DefaultTTL time.Duration // 0: 15 minutes
	MaxTTL     time.Duration // 0: 1 hour
	Now        func() time.Time

	// MaxRevocationsPerArtifact and MaxRevocationsPerTenant bound the
	// revoked links that can be recorded (Revoke): 0 takes
	// DefaultMaxRevocationsPerArtifact and DefaultMaxRevocationsPerTenant.
	MaxRevocationsPerArtifact int
	MaxRevocationsPerTenant   int

	revoked revocations
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Service) ttl(d time.Duration) time.Duration {
	if d <= 0 {
		d = s.DefaultTTL
		if d <= 0 {
			d = 15 * time.Minute
		}
	}
	return min(d, s.maxTTL())
}

func (s *Service) maxTTL() time.Duration {
	if s.MaxTTL <= 0 {
		return time.Hour
	}
	return s.MaxTTL
}

// Put stores r as a new artifact that lives for ttl (capped by MaxTTL). An
// empty meta.ID gets a fresh one; Created and Expires are set here. It returns
// once the artifact is durable.
func (s *Service) Put(ctx context.Context, meta Artifact, ttl time.Duration, r io.Reader) (Artifact, error) {
	if meta.ID == "" {
		meta.ID = NewID()
	}
	if meta.MimeType == "" {
		meta.MimeType = defaultMimeType
	}
	now := s.now().UTC().Truncate(time.Second)
	meta.Created = now
	// One extra second so that a link minted now for the same ttl, whose
	// expiry is rounded to the second, never outlives the artifact.
	meta.Expires = now.Add(s.ttl(ttl) + time.Second)
	src := &source{r: r}
	start := time.Now()
	a, err := s.Store.Put(ctx, meta, src)
	if err != nil && src.err != nil {
		// The store failed because its input did: say so, whatever the
		// store wrapped the reader's error in.
		err = fmt.Errorf("put %s: %w: %w", meta.ID, ErrIncomplete, src.err)
	}
	s.Metrics.storeOp("put", start, err)
	s.Metrics.put(a.Size, err)
	if err != nil {
		return Artifact{}, err
	}
	s.Cache.addMeta(a)
	return a, nil
}

// source remembers the first error of the reader of a Put.
type source struct {
	r   io.Reader
	err error
}

// Staging passes on the Staging r reads, if any (StagingOf).
func (s *source) Staging() Staging {
	st, _ := StagingOf(s.r)
	return st
}

func (s *source) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF && s.err == nil {
		s.err = err
	}
	return n, err
}

// Stat returns id's metadata, from the cache when it holds it. An expired
// artifact yields ErrExpired.
func (s *Service) Stat(ctx context.Context, id string) (Artifact, error) {
	if !ValidID(id) {
		return Artifact{}, fmt.Errorf("stat: %w", ErrNotFound)
	}
	a, ok := s.Cache.meta(id)
	if !ok {
		var err error
		start := time.Now()
		a, err = s.Store.Stat(ctx, id)
		s.Metrics.storeOp("stat", start, err)
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				s.Cache.remove(id) // a blob may outlive its metadata here
			}
			return Artifact{}, err
		}
		s.Cache.addMeta(a)
	}
	if a.Expired(s.now()) {
		return a, fmt.Errorf("stat %s: %w", id, ErrExpired)
	}
	return a, nil
}

// Delete removes id from the store, then from the caches. Links to it stop
// working on this replica when Delete returns, and on every other replica
// within their Cache's MetaTTL (DefaultMetaTTL: 2 s). The revocations
// recorded for it go with it.
func (s *Service) Delete(ctx context.Context, id string) error {
	if !ValidID(id) {
		return fmt.Errorf("delete: %w", ErrNotFound)
	}
	a, statErr := s.Stat(ctx, id) // for its tenant, which names its revocations
	if err := s.delete(ctx, id); err != nil {
		return err
	}
	if statErr == nil || errors.Is(statErr, ErrExpired) {
		s.dropRevocations(ctx, a)
	}
	return nil
}

// delete is the one way an artifact is deleted. The tombstone comes first:
// a fetch that read the store before the delete cannot cache the artifact
// after the eviction. Eviction comes after the store: evicting first let a
// concurrent fetch cache it again while it was still in the store.
func (s *Service) delete(ctx context.Context, id string) error {
	s.Cache.bury(id)
	start := time.Now()
	err := s.Store.Delete(ctx, id)
	s.Metrics.storeOp("delete", start, err)
	s.Cache.remove(id)
	return err
}

// dropRevocations removes the revocations of a deleted artifact, so that
// they stop counting against its tenant's bound. Best effort: the sweeper
// removes them at the artifact's expiry anyway.
func (s *Service) dropRevocations(ctx context.Context, a Artifact) {
	start := time.Now()
	err := s.Store.DeleteRevocations(ctx, a.Tenant, a.ID)
	s.Metrics.storeOp("delete_revocations", start, err)
}

// Link mints an httpUrl for a, after the mint decision allows it. The link
// never outlives the artifact.
func (s *Service) Link(ctx context.Context, a Artifact, o LinkOptions) (Link, error) {
	now := s.now()
	ttl := s.ttl(o.TTL)
	if o.Method == 0 {
		o.Method = token.MethodGet
	}
	if s.Mint != nil {
		var err error
		if o, ttl, err = s.decideMint(ctx, a, o, ttl, now); err != nil {
			return Link{}, err
		}
	}
	exp := now.Add(ttl).Truncate(time.Second)
	if !a.Expires.IsZero() && exp.After(a.Expires) {
		exp = a.Expires
	}
	if !exp.After(now) {
		return Link{}, fmt.Errorf("link %s: %w", a.ID, ErrExpired)
	}
	tokenID := token.NewID()
	tok, err := s.Signer.Mint(token.Claims{
		ID:        tokenID,
		Artifact:  a.ID,
		Method:    o.Method,
		NotBefore: now.Add(-time.Second),
		Expires:   exp,
		CIDR:      o.CIDR,
		Tenant:    a.Tenant,
		Audience:  o.Audience,
	})
	if err != nil {
		return Link{}, fmt.Errorf("link %s: %w: %w", a.ID, ErrInvalid, err)
	}
	return Link{URL: s.fetchURL(a.ID, tok), Expires: exp, TokenID: tokenID}, nil
}

// decideMint asks the mint policy (s.Mint) for a link to a with o,
// living ttl from now. It returns o and ttl as the decision narrowed them
// (never widened), a *DeniedError when the decision denies or would widen
// them, or the evaluation's error.
func (s *Service) decideMint(ctx context.Context, a Artifact, o LinkOptions, ttl time.Duration, now time.Time) (LinkOptions, time.Duration, error) {
	in := decision.MintInput{
		Artifact:            Info(a),
		Tenant:              o.Tenant,
		Source:              o.Source,
		RequestedTTLSeconds: int64(ttl / time.Second),
		Audience:            o.Audience,
		Now:                 now.Unix(),
		Claims:              identity.ClaimsFrom(ctx), // the caller of an offload, when known
	}
	if o.CIDR.IsValid() {
		in.CIDR = o.CIDR.String()
	}
	d, err := s.Mint.Mint(ctx, in)
	if err != nil {
		return o, ttl, fmt.Errorf("mint decision: %w", err)
	}
	if !d.Allow {
		return o, ttl, &DeniedError{Reason: d.Reason}
	}
	if d.MaxTTLSeconds > 0 {
		ttl = min(ttl, time.Duration(d.MaxTTLSeconds)*time.Second)
	}
	// The decision narrows what the caller asked for, never widens it.
	if o.CIDR, o.Audience, err = d.Narrow(o.CIDR, o.Audience); errors.Is(err, decision.ErrWiden) {
		return o, ttl, &DeniedError{Reason: err.Error()}
	} else if err != nil {
		return o, ttl, fmt.Errorf("mint decision: %w", err)
	}
	return o, ttl, nil
}

// Publish stores r and mints a link to it. It is the one call the
// offloader makes.
func (s *Service) Publish(ctx context.Context, meta Artifact, r io.Reader, o LinkOptions) (Artifact, Link, error) {
	a, err := s.Put(ctx, meta, o.TTL, r)
	if err != nil {
		return Artifact{}, Link{}, err
	}
	l, err := s.Link(ctx, a, o)
	if err != nil {
		// Nobody can ever fetch it: do not leave it for the sweeper.
		_ = s.delete(context.WithoutCancel(ctx), a.ID)
		return Artifact{}, Link{}, err
	}
	return a, l, nil
}

// FetchPath is the route of the fetch endpoint; {id} is the artifact id.
const FetchPath = "/a/{id}"

func (s *Service) fetchURL(id, token string) string {
	u := *s.PublicURL
	u.Path = joinPath(u.Path, "/a/"+id)
	u.RawQuery = "t=" + token // base64url: nothing to escape
	return u.String()
}

func joinPath(base, p string) string {
	for len(base) > 0 && base[len(base)-1] == '/' {
		base = base[:len(base)-1]
	}
	return base + p
}

// DeniedError is returned when a policy decision denies, or when no
// decision could be made (no policy, an evaluation error): an error denies.
type DeniedError struct {
	Reason string // the policy's, safe to show the client
	Err    error  // why no decision was made; for the log, never the client
}

func (e *DeniedError) Error() string {
	msg := "artifact: denied by policy"
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *DeniedError) Unwrap() error { return e.Err }

// message returns what the client is told of e: the policy's reason,
// never why an evaluation failed (that is for the log).
func (e *DeniedError) message() string {
	switch {
	case e.Err != nil:
		return "the policy could not be evaluated"
	case e.Reason != "":
		return "denied by policy: " + e.Reason
	}
	return "denied by policy"
}

// Info converts metadata to the shape policies see.
func Info(a Artifact) decision.ArtifactInfo {
	i := decision.ArtifactInfo{
		ID: a.ID, Name: a.Name, MimeType: a.MimeType, Size: a.Size, SHA256: a.SHA256,
		Tenant: a.Tenant, Source: a.Source,
	}
	if !a.Created.IsZero() {
		i.Created = a.Created.Unix()
	}
	if !a.Expires.IsZero() {
		i.Expires = a.Expires.Unix()
	}
	return i
}

// open opens length bytes of id from offset in the store (Store.Open),
// measured.
func (s *Service) open(ctx context.Context, id string, offset, length int64) (io.ReadCloser, error) {
	start := time.Now()
	rc, err := s.Store.Open(ctx, id, offset, length)
	s.Metrics.storeOp("open", start, err)
	return rc, err
}

// Ping reports whether the store is reachable and writable (Store.Ping),
// measured.
func (s *Service) Ping(ctx context.Context) error {
	start := time.Now()
	err := s.Store.Ping(ctx)
	s.Metrics.storeOp("ping", start, err)
	return err
}

package artifact

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/spillway-dev/spillway/artifact/token"
	"github.com/spillway-dev/spillway/policy/decision"
)

// FetchAuthorizer is the policy's fetch decision. *policy.Engine implements it.
type FetchAuthorizer interface {
	Fetch(ctx context.Context, in decision.FetchInput) (decision.Fetch, error)
}

// The ways bytes leave Spillway (Access.Via, the policy's input.via).
const (
	// ViaLink is the fetch endpoint /a/{id}, with a link token.
	ViaLink = "link"
	// ViaRedirect is a presigned storage URL handed out without a request of
	// the holder's own (resources/stream's redirect mode). Authorize allows
	// it only when the decision allows redirect.
	ViaRedirect = "redirect"
	// ViaRead is MCP resources/read of an artifact URI, and the proxy's
	// artifact tools (a window, a search or a jq query of its bytes).
	ViaRead = "resources/read"
	// ViaStream is MCP resources/stream of an artifact URI (direct or
	// fallback mode; redirect mode asks with ViaRedirect).
	ViaStream = "resources/stream"
)

// Access is one request for an artifact's bytes, by whatever way it came.
type Access struct {
	ID string // the artifact id
	// Tenant is the caller's tenant: the inbound identity's on MCP paths,
	// the token's tenant claim on a link. "" is the tenant-less caller.
	Tenant string
	Via    string // ViaLink, ViaRedirect, ViaRead or ViaStream
	// The request, for the policy. Method is the HTTP method ("GET" for MCP
	// reads; a token's method class is checked against it). Path is the
	// URL path ("/a/ID", "/mcp"). Source is the peer address, zero when
	// unknown (stdio). Header may be nil; credentials in it are never
	// shown to the policy.
	Method string
	Path   string
	Source netip.Addr
	Header http.Header
	// Token holds the verified claims of the link token, for ViaLink; nil
	// on MCP paths. Authorize checks its bindings and revocation.
	Token *token.Claims
}

// Authorize is the one access rule for every way bytes leave Spillway. In
// order, it checks:
//
//   - the link token, when there is one: bound to this artifact and to
//     in.Tenant, its method class allows in.Method, its CIDR holds
//     in.Source (ErrLinkRefused otherwise);
//   - the artifact: ErrNotFound when it does not exist or belongs to another
//     tenant, with no difference between the two (tenants are compared
//     exactly: a tenant-less artifact is readable only by a tenant-less
//     caller); ErrExpired past its expiry;
//   - the link token's id is not revoked for this artifact (ErrLinkRefused
//     otherwise; ErrUnavailable when the artifact's revocations cannot be
//     read);
//   - the fetch decision: a *DeniedError when there is no policy
//     (Service.Fetch nil), when its evaluation fails, when it denies, or
//     when in.Via is ViaRedirect and it does not allow redirect.
//
// It returns the artifact's metadata and the decision (headers to add,
// whether a redirect is allowed).
func (s *Service) Authorize(ctx context.Context, in Access) (Artifact, decision.Fetch, error) {
	var d decision.Fetch
	if !ValidID(in.ID) {
		return Artifact{}, d, fmt.Errorf("authorize: %w", ErrNotFound)
	}
	method := in.Method
	if method == "" {
		method = http.MethodGet
	}
	if c := in.Token; c != nil {
		if c.Artifact != in.ID || c.Tenant != in.Tenant || !c.Method.Allows(method) ||
			(c.CIDR.IsValid() && !c.CIDR.Contains(in.Source)) {
			return Artifact{}, d, fmt.Errorf("authorize %s: bindings: %w", in.ID, ErrLinkRefused)
		}
	}
	a, err := s.Owned(ctx, in.ID, in.Tenant)
	if err != nil {
		return Artifact{}, d, err
	}
	if c := in.Token; c != nil {
		if err := s.checkRevoked(ctx, a, c.ID); err != nil {
			return Artifact{}, d, err
		}
	}
	if d, err = s.decideFetch(ctx, in, a, method); err != nil {
		return Artifact{}, d, err
	}
	return a, d, nil
}

// decideFetch asks the fetch policy (s.Fetch) about in, a request with
// method for a. No policy, a failed evaluation, a denial and a redirect
// the decision does not allow are each a *DeniedError: an error denies.
func (s *Service) decideFetch(ctx context.Context, in Access, a Artifact, method string) (decision.Fetch, error) {
	if s.Fetch == nil {
		return decision.Fetch{}, &DeniedError{Reason: "no fetch policy is configured"}
	}
	pin := decision.FetchInput{
		Via: in.Via,
		Request: decision.Request{
			Method:        method,
			Path:          strings.Split(strings.Trim(in.Path, "/"), "/"),
			Headers:       policyHeaders(in.Header),
			SourceAddress: sourceString(in.Source),
		},
		Artifact: Info(a),
		Now:      s.now().Unix(),
	}
	if in.Token != nil {
		t := tokenInfo(*in.Token)
		pin.Token = &t
	}
	d, err := s.Fetch.Fetch(ctx, pin)
	switch {
	case err != nil:
		return decision.Fetch{}, &DeniedError{Err: fmt.Errorf("fetch decision: %w", err)}
	case !d.Allow:
		return d, &DeniedError{Reason: d.Reason}
	case in.Via == ViaRedirect && !d.Redirect:
		return d, &DeniedError{Reason: "redirect is not allowed for this artifact"}
	}
	return d, nil
}

// Owned returns id's metadata if tenant owns it: the tenant rule of every
// path, management routes included. Tenants are compared exactly, so a
// tenant-less artifact is only a tenant-less caller's. Another tenant's
// artifact yields ErrNotFound, exactly as an unknown id does, expired or
// not: no caller learns what exists beyond its own. Otherwise it returns
// what Stat returns (ErrExpired past expiry, ErrUnavailable).
func (s *Service) Owned(ctx context.Context, id, tenant string) (Artifact, error) {
	a, err := s.Stat(ctx, id)
	if (err == nil || errors.Is(err, ErrExpired)) && a.Tenant != tenant {
		return Artifact{}, fmt.Errorf("artifact %s: %w", id, ErrNotFound)
	}
	return a, err
}

func sourceString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

func tokenInfo(c token.Claims) decision.TokenClaims {
	t := decision.TokenClaims{
		ID: c.ID, KeyID: c.KeyID, Method: "GET",
		NotBefore: c.NotBefore.Unix(), Expires: c.Expires.Unix(),
		Tenant: c.Tenant, Audience: c.Audience,
	}
	if c.Method == token.MethodHead {
		t.Method = "HEAD"
	}
	if c.CIDR.IsValid() {
		t.CIDR = c.CIDR.String()
	}
	return t
}

// policyHeaders copies request headers with lower-case names, minus credentials.
func policyHeaders(h http.Header) map[string][]string {
	out := make(map[string][]string, len(h))
	for k, v := range h {
		if l, ok := lowerHeaders[k]; ok {
			k = l
		} else {
			k = strings.ToLower(k)
		}
		switch k {
		case "authorization", "cookie", "proxy-authorization":
			continue
		}
		out[k] = v
	}
	return out
}

// lowerHeaders maps the canonical names of the headers most fetches carry
// to their lower-case spelling, so that a policy input costs no string
// per such header.
var lowerHeaders = func() map[string]string {
	m := make(map[string]string)
	for _, k := range []string{"Accept", "Accept-Encoding", "Accept-Language", "Authorization", "Cache-Control",
		"Connection", "Cookie", "If-Match", "If-None-Match", "If-Range", "Range", "Referer", "User-Agent",
		"X-Forwarded-For", "X-Forwarded-Proto", "X-Request-Id"} {
		m[k] = strings.ToLower(k)
	}
	return m
}()

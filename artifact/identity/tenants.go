// Package identity says who is calling Spillway on every surface except the
// link endpoint (/a/), whose links carry their own authority. It finds the
// tenant of an inbound bearer token (Tenants): a static token, or an OAuth
// 2.1 access token (a JWT its issuer signed, verified as the MCP
// authorization spec asks of a resource server: OAuth, with RFC 9728
// protected-resource metadata). It also checks whether a request may come
// from where it comes from (Guard: Host and Origin checks against DNS
// rebinding and cross-site requests). The management API and the MCP face
// both use it; a link token is never an identity here.
//
// It imports the standard library, package token, whose ReadSecretFile is
// the one rule for files that hold secrets, and lestrrat-go/jwx for JOSE.
package identity

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/spillway-dev/spillway/artifact/token"
)

// ErrUnauthenticated is returned by Authenticate when a required bearer
// token is missing, malformed or unknown.
var ErrUnauthenticated = errors.New("identity: missing or unknown bearer token")

// Limits of the token list format: an inbound token is MinTokenLen to
// MaxTokenLen bytes long, a tenant name 1 to MaxTenantLen bytes.
const (
	MinTokenLen  = 16
	MaxTokenLen  = 1024
	MaxTenantLen = 128
)

// Tenants maps inbound bearer tokens to tenant names. A nil or empty
// Tenants (the zero value is empty) requires no token and admits every
// caller as tenant ""; the command refuses that where a non-loopback client
// could reach it. A Tenants is immutable once built and safe for concurrent
// use. Tokens are kept only as SHA-256 sums and never appear in errors.
type Tenants struct {
	tokens []entry
	oauth  *OAuth // access tokens beside the static ones; nil: none
}

type entry struct {
	sum    [sha256.Size]byte
	tenant string
}

// NewTenants builds a Tenants from token → tenant pairs. Each token must be
// an RFC 6750 b64token (A-Z a-z 0-9 - . _ ~ + / then optional = padding) of
// MinTokenLen to MaxTokenLen bytes; each tenant 1 to MaxTenantLen of
// A-Z a-z 0-9 . _ : @ -. It returns an error for the first pair that
// breaks these rules; the error never contains a token. An empty map
// yields an empty Tenants, which requires no token.
func NewTenants(m map[string]string) (*Tenants, error) {
	t := &Tenants{}
	for tok, tenant := range m {
		if err := t.add(tok, tenant); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func (t *Tenants) add(tok, tenant string) error {
	if !validToken(tok) {
		return fmt.Errorf("the token must be %d to %d characters of A-Z a-z 0-9 - . _ ~ + / and optional = padding", MinTokenLen, MaxTokenLen)
	}
	if !validTenant(tenant) {
		return fmt.Errorf("the tenant must be 1 to %d characters of A-Z a-z 0-9 . _ : @ -", MaxTenantLen)
	}
	sum := sha256.Sum256([]byte(tok))
	for _, e := range t.tokens {
		if e.sum == sum {
			return errors.New("the same token is listed twice")
		}
	}
	t.tokens = append(t.tokens, entry{sum, tenant})
	return nil
}

// ParseTenants parses the flag form "token=tenant,token=tenant". Spaces
// around entries and around "=" are ignored, empty entries skipped. A
// tenant never contains "=", so an entry splits at its last "=" and a token
// may end in base64 padding ("dG9rZW4...==acme" is token "dG9rZW4...=",
// tenant "acme"). The rules of NewTenants apply, and a token listed twice
// is an error. Errors name the entry by position, never its text. An empty
// s yields an empty Tenants, which requires no token.
func ParseTenants(s string) (*Tenants, error) {
	t := &Tenants{}
	n := 0
	for item := range strings.SplitSeq(s, ",") {
		n++
		if err := t.parseEntry(item); err != nil {
			return nil, fmt.Errorf("identity: auth token entry %d: %w", n, err)
		}
	}
	return t, nil
}

// ParseTenantsFile parses the file form: one token=tenant per line, as in
// ParseTenants; blank lines and lines starting with # are ignored.
func ParseTenantsFile(b []byte) (*Tenants, error) {
	t := &Tenants{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, MaxTokenLen+MaxTenantLen+4096)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(s, "#") {
			continue
		}
		if err := t.parseEntry(s); err != nil {
			return nil, fmt.Errorf("identity: auth tokens line %d: %w", line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("identity: auth tokens line %d: %w", line+1, err)
	}
	return t, nil
}

func (t *Tenants) parseEntry(s string) error {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	i := strings.LastIndexByte(s, '=')
	if i < 0 {
		return errors.New("want token=tenant")
	}
	return t.add(strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+1:]))
}

// ReadTenantsFile reads and parses a token file (see ParseTenantsFile).
// Because the file holds secrets, it is read with token.ReadSecretFile, the
// one rule for secret files (--key-file's too): a file that other users
// could read or change is refused with an error and not parsed, while a
// Kubernetes secret volume is accepted. The error for a missing file wraps
// fs.ErrNotExist.
func ReadTenantsFile(path string) (*Tenants, error) {
	b, err := token.ReadSecretFile(path)
	if err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	t, err := ParseTenantsFile(b)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return t, nil
}

// Required reports whether callers must present a token: false for a nil
// or empty Tenants without OAuth.
func (t *Tenants) Required() bool { return t != nil && (len(t.tokens) > 0 || t.oauth != nil) }

// Count returns the number of distinct tenants t names: 0 for a nil or
// empty Tenants, whose callers are all tenant "". With OAuth, whose
// issuer names any number of tenants, it is at least 2.
func (t *Tenants) Count() int {
	if t == nil {
		return 0
	}
	names := map[string]bool{}
	for _, e := range t.tokens {
		names[e.tenant] = true
	}
	if t.oauth != nil {
		return max(len(names), 2)
	}
	return len(names)
}

// Authenticate returns the tenant of r's bearer token: "" and no error when
// no token is required; ErrUnauthenticated when one is required and r
// carries no single "Authorization: Bearer" header with a known token.
// Every configured token is compared in constant time, so the timing says
// nothing about which tokens exist.
//
// With OAuth (see WithOAuth), a token that is no static one is verified
// as an access token; see Identify for its errors.
func (t *Tenants) Authenticate(r *http.Request) (string, error) {
	if t != nil && t.oauth != nil {
		p, err := t.Identify(r)
		return p.Tenant, err
	}
	return t.static(r)
}

// static is Authenticate with the static tokens only.
func (t *Tenants) static(r *http.Request) (string, error) {
	if t == nil || len(t.tokens) == 0 {
		return "", nil
	}
	tok, ok := bearerToken(r.Header.Values("Authorization"))
	if !ok {
		return "", ErrUnauthenticated
	}
	tenant, found := t.lookup(tok)
	if !found {
		return "", ErrUnauthenticated
	}
	return tenant, nil
}

// lookup returns the tenant of a static token. Every configured token is
// compared in constant time.
func (t *Tenants) lookup(tok string) (string, bool) {
	sum := sha256.Sum256([]byte(tok))
	found := 0
	tenant := ""
	for _, e := range t.tokens {
		eq := subtle.ConstantTimeCompare(sum[:], e.sum[:])
		if eq == 1 {
			tenant = e.tenant
		}
		found |= eq
	}
	return tenant, found == 1
}

// WithOAuth returns a Tenants that admits t's static tokens and, beside
// them, the access tokens o verifies; t is not changed. A nil o returns t.
func (t *Tenants) WithOAuth(o *OAuth) *Tenants {
	if o == nil {
		return t
	}
	n := &Tenants{oauth: o}
	if t != nil {
		n.tokens = t.tokens
	}
	return n
}

// OAuth returns the access-token verifier of t; nil without one.
func (t *Tenants) OAuth() *OAuth {
	if t == nil {
		return nil
	}
	return t.oauth
}

// Identify returns who r's bearer token says the caller is: a zero
// Principal and no error when no token is required; the static token's
// tenant; or, with OAuth, the access token's principal (its claims
// included). Errors: ErrUnauthenticated without a single "Authorization:
// Bearer" header, or (without OAuth) with an unknown token;
// ErrInvalidToken (which wraps ErrUnauthenticated) for a token OAuth
// refuses; ErrInsufficientScope for one that lacks a required scope. No
// error quotes the token. Refuse turns them into the answer.
func (t *Tenants) Identify(r *http.Request) (Principal, error) {
	if !t.Required() {
		return Principal{}, nil
	}
	tok, ok := bearerToken(r.Header.Values("Authorization"))
	if !ok {
		return Principal{}, ErrUnauthenticated
	}
	if tenant, found := t.lookup(tok); found {
		return Principal{Tenant: tenant}, nil
	}
	if t.oauth == nil {
		return Principal{}, ErrUnauthenticated
	}
	return t.oauth.Verify(r.Context(), tok)
}

// Refusal is how a face answers an error of Identify.
type Refusal struct {
	// Status is 401, or 403 for ErrInsufficientScope.
	Status int
	// Challenge is the WWW-Authenticate value: with OAuth, it names the
	// protected-resource metadata and, for a token refused, the RFC 6750
	// error code.
	Challenge string
	// Message is safe to show the client.
	Message string
}

// Refuse returns the answer to err, an error of Identify or Authenticate.
func (t *Tenants) Refuse(err error) Refusal {
	if t == nil || t.oauth == nil {
		return Refusal{http.StatusUnauthorized, `Bearer realm="spillway"`, "Unauthorized: missing or unknown bearer token"}
	}
	status, challenge := t.oauth.challenge(err)
	msg := "Unauthorized: a bearer access token is required"
	switch {
	case errors.Is(err, ErrInsufficientScope):
		msg = "Forbidden: the access token lacks a required scope"
	case errors.Is(err, ErrInvalidToken):
		msg = "Unauthorized: invalid or expired access token"
	}
	return Refusal{status, challenge, msg}
}

// validToken reports whether s is an RFC 6750 b64token of MinTokenLen to
// MaxTokenLen bytes.
func validToken(s string) bool {
	if len(s) < MinTokenLen || len(s) > MaxTokenLen {
		return false
	}
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !(isAlnum(c) || strings.IndexByte("-._~+/", c) >= 0) {
			return false
		}
	}
	return true
}

// validTenant reports whether s is 1 to MaxTenantLen bytes of
// A-Z a-z 0-9 . _ : @ -.
func validTenant(s string) bool {
	if s == "" || len(s) > MaxTenantLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isAlnum(c) || strings.IndexByte("._:@-", c) >= 0) {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

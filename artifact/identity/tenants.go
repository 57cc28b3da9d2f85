// Package identity says who is calling Spillway on every surface except the
// link endpoint (/a/), whose links carry their own authority. It finds the
// tenant of an inbound bearer token (Tenants), and checks whether a request
// may come from where it comes from (Guard: Host and Origin checks against
// DNS rebinding and cross-site requests). The management API and the MCP
// face both use it; a link token is never an identity here.
//
// It imports only the standard library and package token, whose
// ReadSecretFile is the one rule for files that hold secrets.
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
// or empty Tenants.
func (t *Tenants) Required() bool { return t != nil && len(t.tokens) > 0 }

// Count returns the number of distinct tenants t names: 0 for a nil or
// empty Tenants, whose callers are all tenant "".
func (t *Tenants) Count() int {
	if t == nil {
		return 0
	}
	names := map[string]bool{}
	for _, e := range t.tokens {
		names[e.tenant] = true
	}
	return len(names)
}

// Authenticate returns the tenant of r's bearer token: "" and no error when
// no token is required; ErrUnauthenticated when one is required and r
// carries no single "Authorization: Bearer" header with a known token.
// Every configured token is compared in constant time, so the timing says
// nothing about which tokens exist.
func (t *Tenants) Authenticate(r *http.Request) (string, error) {
	if !t.Required() {
		return "", nil
	}
	auth := r.Header.Values("Authorization")
	if len(auth) != 1 {
		return "", ErrUnauthenticated
	}
	scheme, tok, ok := strings.Cut(auth[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", ErrUnauthenticated
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	found := 0
	tenant := ""
	for _, e := range t.tokens {
		eq := subtle.ConstantTimeCompare(sum[:], e.sum[:])
		if eq == 1 {
			tenant = e.tenant
		}
		found |= eq
	}
	if found == 0 {
		return "", ErrUnauthenticated
	}
	return tenant, nil
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

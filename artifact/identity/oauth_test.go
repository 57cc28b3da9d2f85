package identity_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/spillway-dev/spillway/artifact/identity"
	"github.com/spillway-dev/spillway/artifact/identity/oauthtest"
)

const resource = "https://spill.example.com/mcp"

func newOAuth(t *testing.T, as *oauthtest.AS, mod func(*identity.OAuthConfig)) *identity.Tenants {
	t.Helper()
	cfg := identity.OAuthConfig{Issuer: as.URL, Resource: resource, JWKSURL: as.JWKSURL(), RefetchGap: time.Hour}
	if mod != nil {
		mod(&cfg)
	}
	o, err := identity.NewOAuth(cfg)
	if err != nil {
		t.Fatal(err)
	}
	static, err := identity.ParseTenants("static-token-0123456789=ops")
	if err != nil {
		t.Fatal(err)
	}
	return static.WithOAuth(o)
}

func identify(ts *identity.Tenants, auth ...string) (identity.Principal, error) {
	r := httptest.NewRequest(http.MethodPost, "http://spill.example.com/mcp", nil)
	for _, a := range auth {
		r.Header.Add("Authorization", a)
	}
	return ts.Identify(r)
}

func TestOAuthAcceptsAndMapsTenant(t *testing.T) {
	as := oauthtest.New(t)
	ts := newOAuth(t, as, nil)
	tok := as.Mint(t, map[string]any{"sub": "alice@example.com", "aud": resource, "scope": "mcp:read mcp:write", "org": "acme"})
	p, err := identify(ts, "Bearer "+tok)
	if err != nil {
		t.Fatal(err)
	}
	if p.Tenant != "alice@example.com" || !p.OAuth || p.Claims["org"] != "acme" || strings.Join(p.Scopes, " ") != "mcp:read mcp:write" {
		t.Errorf("principal = %+v", p)
	}
	if got, err := ts.Authenticate(httptest.NewRequest("GET", "/", nil)); err == nil || got != "" {
		t.Errorf("Authenticate without a token = %q, %v", got, err)
	}
	// The static tokens keep working beside OAuth.
	if p, err := identify(ts, "Bearer static-token-0123456789"); err != nil || p.Tenant != "ops" || p.OAuth {
		t.Errorf("static token: %+v, %v", p, err)
	}
	// A configured claim names the tenant; aud may be a list.
	ts = newOAuth(t, as, func(c *identity.OAuthConfig) { c.TenantClaim = "org" })
	tok = as.Mint(t, map[string]any{"sub": "bob", "aud": []string{"other", resource}, "org": "acme"})
	if p, err := identify(ts, "Bearer "+tok); err != nil || p.Tenant != "acme" {
		t.Errorf("tenant claim org: %+v, %v", p, err)
	}
}

func TestOAuthRefusals(t *testing.T) {
	as := oauthtest.New(t)
	ts := newOAuth(t, as, func(c *identity.OAuthConfig) { c.ClockSkew = time.Second })
	now := time.Now()
	good := map[string]any{"sub": "alice", "aud": resource}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for a, b := range good {
			m[a] = b
		}
		m[k] = v
		return m
	}
	stranger := oauthtest.NewKey(t, "k1") // same kid as the AS's key, other key
	hdrClaims := func(hdr string, claims map[string]any) string {
		b, _ := json.Marshal(claims)
		return b64(hdr) + "." + base64.RawURLEncoding.EncodeToString(b)
	}
	tests := []struct {
		name string
		tok  string
	}{
		{"wrong audience", as.Mint(t, with("aud", "https://other.example.com/mcp"))},
		{"no audience", as.Mint(t, with("aud", nil))},
		{"wrong issuer", as.Mint(t, with("iss", "https://evil.example.com"))},
		{"expired", as.Mint(t, with("exp", now.Add(-time.Minute).Unix()))},
		{"no exp", as.Mint(t, with("exp", nil))},
		{"not yet valid", as.Mint(t, with("nbf", now.Add(time.Hour).Unix()))},
		{"signed by another key", oauthtest.MintWith(t, stranger, map[string]any{"iss": as.URL, "sub": "alice", "aud": resource, "exp": now.Add(time.Hour).Unix()})},
		{"alg none", hdrClaims(`{"alg":"none","kid":"k1"}`, with("iss", as.URL)) + "."},
		{"alg none with a signature", hdrClaims(`{"alg":"none","kid":"k1"}`, with("iss", as.URL)) + ".c2ln"},
		{"HMAC keyed with the public key", hmacWithPublicKey(t, as, with("iss", as.URL))},
		{"duplicate alg", hdrClaims(`{"alg":"ES256","alg":"none","kid":"k1"}`, with("iss", as.URL)) + ".c2ln"},
		{"tenant claim not a tenant name", as.Mint(t, with("sub", "auth0|alice"))},
		{"tenant claim missing", as.Mint(t, with("sub", nil))},
		{"garbage", "not-a-jwt-but-long-enough"},
		{"JWE shape", "a.b.c.d.e"},
	}
	for _, tt := range tests {
		_, err := identify(ts, "Bearer "+tt.tok)
		if !errors.Is(err, identity.ErrInvalidToken) || !errors.Is(err, identity.ErrUnauthenticated) {
			t.Errorf("%s: err = %v, want ErrInvalidToken", tt.name, err)
			continue
		}
		if strings.Contains(err.Error(), tt.tok) {
			t.Errorf("%s: the error quotes the token", tt.name)
		}
		ref := ts.Refuse(err)
		want := `Bearer resource_metadata="https://spill.example.com/.well-known/oauth-protected-resource/mcp", error="invalid_token"`
		if ref.Status != http.StatusUnauthorized || ref.Challenge != want {
			t.Errorf("%s: refusal %d %q", tt.name, ref.Status, ref.Challenge)
		}
	}
	// No token at all: a challenge without an error code (RFC 6750 §3.1).
	for _, auth := range [][]string{nil, {"Basic YTpi"}, {"Bearer a", "Bearer b"}} {
		_, err := identify(ts, auth...)
		ref := ts.Refuse(err)
		if !errors.Is(err, identity.ErrUnauthenticated) || errors.Is(err, identity.ErrInvalidToken) || ref.Status != 401 ||
			ref.Challenge != `Bearer resource_metadata="https://spill.example.com/.well-known/oauth-protected-resource/mcp"` {
			t.Errorf("%q: %v, %+v", auth, err, ref)
		}
	}
}

func TestOAuthInsufficientScope(t *testing.T) {
	as := oauthtest.New(t)
	ts := newOAuth(t, as, func(c *identity.OAuthConfig) { c.Scopes = []string{"mcp:tools", "mcp:read"} })
	tok := as.Mint(t, map[string]any{"sub": "alice", "aud": resource, "scope": "mcp:read"})
	_, err := identify(ts, "Bearer "+tok)
	ref := ts.Refuse(err)
	want := `Bearer resource_metadata="https://spill.example.com/.well-known/oauth-protected-resource/mcp", error="insufficient_scope", scope="mcp:tools mcp:read"`
	if !errors.Is(err, identity.ErrInsufficientScope) || ref.Status != http.StatusForbidden || ref.Challenge != want {
		t.Errorf("err %v, refusal %d %q", err, ref.Status, ref.Challenge)
	}
	// scp as a list (Azure, Okta) holds scopes too.
	tok = as.Mint(t, map[string]any{"sub": "alice", "aud": resource, "scp": []string{"mcp:read", "mcp:tools"}})
	if _, err := identify(ts, "Bearer "+tok); err != nil {
		t.Errorf("scp list: %v", err)
	}
}

// TestOAuthKeyRotation: a token signed by a key the JWKS gained since it
// was fetched makes Spillway fetch it once; a kid still unknown is
// refused, and a flood of them fetches nothing more within the gap.
func TestOAuthKeyRotation(t *testing.T) {
	as := oauthtest.New(t)
	ts := newOAuth(t, as, nil)
	claims := map[string]any{"sub": "alice", "aud": resource}
	if _, err := identify(ts, "Bearer "+as.Mint(t, claims)); err != nil {
		t.Fatal(err)
	}
	if as.Fetches() != 1 {
		t.Fatalf("fetches after the first token = %d", as.Fetches())
	}
	as.Rotate(t)
	var wg sync.WaitGroup
	for range 8 { // at once: one fetch serves them all
		wg.Go(func() {
			if _, err := identify(ts, "Bearer "+as.Mint(t, claims)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if as.Fetches() != 2 {
		t.Fatalf("fetches after the rotation = %d, want 2", as.Fetches())
	}
	for i := range 50 {
		k := oauthtest.NewKey(t, "unknown-"+string(rune('a'+i%26)))
		tok := oauthtest.MintWith(t, k, map[string]any{"iss": as.URL, "sub": "alice", "aud": resource, "exp": time.Now().Add(time.Hour).Unix()})
		if _, err := identify(ts, "Bearer "+tok); !errors.Is(err, identity.ErrInvalidToken) {
			t.Fatalf("unknown kid: %v", err)
		}
	}
	if as.Fetches() != 2 {
		t.Errorf("fetches after 50 unknown kids = %d, want still 2 (none within the gap)", as.Fetches())
	}
}

// TestOAuthRefetchGap: once the gap has passed, an unknown kid fetches the
// keys again, once.
func TestOAuthRefetchGap(t *testing.T) {
	as := oauthtest.New(t)
	ts := newOAuth(t, as, func(c *identity.OAuthConfig) { c.RefetchGap = 100 * time.Millisecond })
	claims := map[string]any{"sub": "alice", "aud": resource}
	if _, err := identify(ts, "Bearer "+as.Mint(t, claims)); err != nil {
		t.Fatal(err)
	}
	unknown := oauthtest.MintWith(t, oauthtest.NewKey(t, "nope"), map[string]any{"iss": as.URL, "sub": "a", "aud": resource, "exp": time.Now().Add(time.Hour).Unix()})
	for range 2 {
		identify(ts, "Bearer "+unknown)
	}
	n := as.Fetches()
	time.Sleep(150 * time.Millisecond)
	for range 5 {
		if _, err := identify(ts, "Bearer "+unknown); !errors.Is(err, identity.ErrInvalidToken) {
			t.Fatal(err)
		}
	}
	if n != 2 || as.Fetches() != 3 {
		t.Errorf("fetches: %d within the gap, %d after it; want 2 and 3", n, as.Fetches())
	}
}

func TestOAuthConfiguredKeys(t *testing.T) {
	as := oauthtest.New(t)
	k := oauthtest.NewKey(t, "fixed")
	set := jwk.NewSet()
	set.AddKey(k) // private: only its public half is kept
	o, err := identity.NewOAuth(identity.OAuthConfig{Issuer: as.URL, Resource: resource, Keys: set})
	if err != nil {
		t.Fatal(err)
	}
	ts := (*identity.Tenants)(nil).WithOAuth(o)
	tok := oauthtest.MintWith(t, k, map[string]any{"iss": as.URL, "sub": "alice", "aud": resource, "exp": time.Now().Add(time.Hour).Unix()})
	if p, err := identify(ts, "Bearer "+tok); err != nil || p.Tenant != "alice" {
		t.Errorf("%+v, %v", p, err)
	}
	if _, err := identify(ts, "Bearer "+as.Mint(t, map[string]any{"sub": "alice", "aud": resource})); !errors.Is(err, identity.ErrInvalidToken) {
		t.Errorf("a key not configured: %v", err)
	}
	if as.Fetches() != 0 {
		t.Errorf("configured keys fetched the JWKS")
	}
}

func TestNewOAuthRefusesBadConfig(t *testing.T) {
	ok := identity.OAuthConfig{Issuer: "https://as.example.com", Resource: resource, JWKSURL: "https://as.example.com/jwks"}
	for name, mod := range map[string]func(*identity.OAuthConfig){
		"no issuer":        func(c *identity.OAuthConfig) { c.Issuer = "" },
		"no resource":      func(c *identity.OAuthConfig) { c.Resource = "" },
		"resource quote":   func(c *identity.OAuthConfig) { c.Resource = `https://x/"mcp` },
		"no keys":          func(c *identity.OAuthConfig) { c.JWKSURL = "" },
		"JWKS not http":    func(c *identity.OAuthConfig) { c.JWKSURL = "file:///etc/jwks" },
		"HMAC":             func(c *identity.OAuthConfig) { c.Algorithms = []string{"HS256"} },
		"none":             func(c *identity.OAuthConfig) { c.Algorithms = []string{"none"} },
		"scope with quote": func(c *identity.OAuthConfig) { c.Scopes = []string{`a"b`} },
	} {
		c := ok
		mod(&c)
		if _, err := identity.NewOAuth(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := identity.NewOAuth(ok); err != nil {
		t.Error(err)
	}
}

// TestProtectedResourceMetadata checks the document against RFC 9728 §2:
// resource (a URL without fragment) is required, the rest are JSON arrays
// of strings.
func TestProtectedResourceMetadata(t *testing.T) {
	as := oauthtest.New(t)
	o, err := identity.NewOAuth(identity.OAuthConfig{Issuer: as.URL, Resource: resource, JWKSURL: as.JWKSURL(), Scopes: []string{"mcp:read"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := o.MetadataURL(); got != "https://spill.example.com/.well-known/oauth-protected-resource/mcp" {
		t.Errorf("MetadataURL = %q", got)
	}
	w := httptest.NewRecorder()
	o.MetadataHandler().ServeHTTP(w, httptest.NewRequest("GET", "/.well-known/oauth-protected-resource/mcp", nil))
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s", w.Code, w.Header().Get("Content-Type"))
	}
	var doc map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	CheckMetadata(t, doc, resource, as.URL)
	if s, _ := doc["scopes_supported"].([]any); len(s) != 1 || s[0] != "mcp:read" {
		t.Errorf("scopes_supported = %v", doc["scopes_supported"])
	}
	w = httptest.NewRecorder()
	o.MetadataHandler().ServeHTTP(w, httptest.NewRequest("POST", "/.well-known/oauth-protected-resource", nil))
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", w.Code)
	}
}

// CheckMetadata checks an RFC 9728 document's fields and types.
func CheckMetadata(t *testing.T, doc map[string]any, resource, issuer string) {
	t.Helper()
	if doc["resource"] != resource {
		t.Errorf("resource = %v", doc["resource"])
	}
	for _, f := range []string{"authorization_servers", "bearer_methods_supported", "scopes_supported"} {
		v, ok := doc[f]
		if !ok {
			continue
		}
		list, isList := v.([]any)
		if !isList {
			t.Errorf("%s is %T, want an array", f, v)
		}
		for _, e := range list {
			if _, ok := e.(string); !ok {
				t.Errorf("%s holds %T", f, e)
			}
		}
	}
	if as, _ := doc["authorization_servers"].([]any); len(as) != 1 || as[0] != issuer {
		t.Errorf("authorization_servers = %v", doc["authorization_servers"])
	}
	if bm, _ := doc["bearer_methods_supported"].([]any); len(bm) != 1 || bm[0] != "header" {
		t.Errorf("bearer_methods_supported = %v", doc["bearer_methods_supported"])
	}
}

func TestPrincipalContext(t *testing.T) {
	if _, ok := identity.FromContext(context.Background()); ok {
		t.Error("a principal in an empty context")
	}
	p := identity.Principal{Tenant: "a", OAuth: true, Claims: map[string]any{"sub": "a"}}
	got, ok := identity.FromContext(identity.NewContext(context.Background(), p))
	if !ok || got.Tenant != "a" || got.Claims["sub"] != "a" {
		t.Errorf("%+v %v", got, ok)
	}
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// hmacWithPublicKey is the classic confusion: HS256 keyed with the bytes
// of the issuer's public key, which a verifier that lets the header pick
// the algorithm would accept.
func hmacWithPublicKey(t *testing.T, as *oauthtest.AS, claims map[string]any) string {
	t.Helper()
	resp, err := http.Get(as.JWKSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	set, err := jwk.ParseReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := set.Key(0)
	var pub ecdsa.PublicKey
	if err := jwk.Export(k, &pub); err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&pub)
	tok := jwt.New()
	for n, v := range claims {
		tok.Set(n, v)
	}
	tok.Set("exp", time.Now().Add(time.Hour).Unix())
	hk, _ := jwk.Import(der)
	hk.Set(jwk.KeyIDKey, "k1")
	b, err := jwt.Sign(tok, jwt.WithKey(jwa.HS256(), hk))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

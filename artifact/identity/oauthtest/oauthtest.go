// Package oauthtest is an OAuth 2.1 authorization server for tests, on
// loopback: it holds its own signing keys, publishes them as a JWKS,
// serves RFC 8414 metadata and grants access tokens to a client
// credentials request. Tests mint tokens with it directly too, right or
// deliberately wrong.
package oauthtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

// AS is a running authorization server. Its methods are safe for
// concurrent use.
type AS struct {
	// URL is its issuer identifier (http://127.0.0.1:PORT).
	URL string
	// ClientID and ClientSecret are the one client it knows.
	ClientID, ClientSecret string

	srv     *httptest.Server
	mu      sync.Mutex
	keys    []jwk.Key // private; the first one signs
	nkeys   int
	fetches atomic.Int64
	// Claims are added to every token the token endpoint grants.
	claims map[string]any
	// ttl is the lifetime of the tokens the token endpoint grants;
	// granted holds each one's expiry.
	ttl     time.Duration
	granted map[string]time.Time
}

// New starts an AS with one ES256 key; it stops when t ends.
func New(t testing.TB) *AS {
	a := &AS{ClientID: "test-client", ClientSecret: "test-secret-0123456789", claims: map[string]any{},
		ttl: time.Hour, granted: map[string]time.Time{}}
	a.Rotate(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/jwks", a.serveJWKS)
	mux.HandleFunc("/.well-known/oauth-authorization-server", a.serveMetadata)
	mux.HandleFunc("/.well-known/openid-configuration", a.serveMetadata)
	mux.HandleFunc("/token", a.serveToken)
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	a.URL = a.srv.URL
	return a
}

// JWKSURL is where the AS publishes its public keys.
func (a *AS) JWKSURL() string { return a.URL + "/jwks" }

// Fetches counts the requests for the JWKS so far.
func (a *AS) Fetches() int { return int(a.fetches.Load()) }

// SetClaim adds a claim to every token the token endpoint grants.
func (a *AS) SetClaim(name string, v any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.claims[name] = v
}

// SetTokenTTL sets the lifetime (expires_in, and the exp claim) of the
// tokens the token endpoint grants from now on; the default is an hour.
// It is rounded up to whole seconds.
func (a *AS) SetTokenTTL(d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ttl = d
}

// Grants counts the tokens the token endpoint granted so far.
func (a *AS) Grants() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.granted)
}

// Granted reports whether the token endpoint granted tok and it has not
// expired: what an upstream that trusts this AS checks.
func (a *AS) Granted(tok string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	exp, ok := a.granted[tok]
	return ok && time.Now().Before(exp)
}

// Rotate makes a new signing key (kid "k1", "k2", ...) the one that signs,
// published beside the old ones.
func (a *AS) Rotate(t testing.TB) jwk.Key {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.nkeys++
	k := NewKey(t, fmt.Sprintf("k%d", a.nkeys))
	a.keys = append([]jwk.Key{k}, a.keys...)
	return k
}

// NewKey returns a fresh ES256 private key with kid.
func NewKey(t testing.TB, kid string) jwk.Key {
	t.Helper()
	raw, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := jwk.Import(raw)
	if err != nil {
		t.Fatal(err)
	}
	k.Set(jwk.KeyIDKey, kid)
	k.Set(jwk.AlgorithmKey, jwa.ES256())
	return k
}

// Mint signs claims (iss, exp and iat added unless present) with the
// current key.
func (a *AS) Mint(t testing.TB, claims map[string]any) string {
	t.Helper()
	a.mu.Lock()
	k := a.keys[0]
	a.mu.Unlock()
	return MintWith(t, k, a.withDefaults(claims))
}

func (a *AS) withDefaults(claims map[string]any) map[string]any {
	out := map[string]any{"iss": a.URL, "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()}
	for k, v := range claims {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = v
	}
	return out
}

// MintWith signs claims with key, as ES256.
func MintWith(t testing.TB, key jwk.Key, claims map[string]any) string {
	t.Helper()
	tok := jwt.New()
	for k, v := range claims {
		if err := tok.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	b, err := jwt.Sign(tok, jwt.WithKey(jwa.ES256(), key))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (a *AS) serveJWKS(w http.ResponseWriter, r *http.Request) {
	a.fetches.Add(1)
	a.mu.Lock()
	set := jwk.NewSet()
	for _, k := range a.keys {
		pub, _ := k.PublicKey()
		set.AddKey(pub)
	}
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/jwk-set+json")
	json.NewEncoder(w).Encode(set)
}

func (a *AS) serveMetadata(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"issuer":                                a.URL,
		"token_endpoint":                        a.URL + "/token",
		"jwks_uri":                              a.JWKSURL(),
		"authorization_endpoint":                a.URL + "/authorize",
		"response_types_supported":              []string{"code"},
		"grant_types_supported":                 []string{"client_credentials"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
		"code_challenge_methods_supported":      []string{"S256"},
	})
}

// serveToken grants a client credentials request of the known client: a
// token whose sub is the client id, aud the RFC 8707 resource asked for,
// scope the scopes asked for.
func (a *AS) serveToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.ParseForm() != nil || r.PostForm.Get("grant_type") != "client_credentials" {
		tokenError(w, "unsupported_grant_type")
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != a.ClientID || secret != a.ClientSecret {
		tokenError(w, "invalid_client")
		return
	}
	claims := map[string]any{"sub": id, "client_id": id}
	if res := r.PostForm.Get("resource"); res != "" {
		claims["aud"] = res
	}
	if sc := strings.TrimSpace(r.PostForm.Get("scope")); sc != "" {
		claims["scope"] = sc
	}
	a.mu.Lock()
	for k, v := range a.claims {
		claims[k] = v
	}
	k, secs := a.keys[0], int64((a.ttl+time.Second-1)/time.Second)
	a.mu.Unlock()
	exp := time.Now().Add(time.Duration(secs) * time.Second)
	claims["exp"], claims["jti"] = exp.Unix(), fmt.Sprint(time.Now().UnixNano())
	tok := MintWith(&panicTB{}, k, a.withDefaults(claims))
	a.mu.Lock()
	a.granted[tok] = exp
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": secs})
}

func tokenError(w http.ResponseWriter, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(map[string]string{"error": code})
}

// panicTB lets MintWith run in a handler, where a failure is a bug.
type panicTB struct{ testing.TB }

func (*panicTB) Helper()                      {}
func (*panicTB) Fatal(args ...any)            { panic(fmt.Sprint(args...)) }
func (*panicTB) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }

package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/spillway-dev/spillway/artifact/identity"
)

// oauthFlags configure /mcp as an OAuth 2.1 resource server (the MCP
// authorization spec): access tokens of one issuer, beside or instead of
// --auth-tokens.
type oauthFlags struct {
	issuer      string
	jwksURL     string
	jwksFile    string
	resource    string
	audience    string
	tenantClaim string
	scopes      string
	algs        string
	clockSkew   time.Duration
}

func (o *oauthFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&o.issuer, "oauth-issuer", "", "accept OAuth access tokens (JWTs) of this authorization server's issuer `URL` on /mcp")
	fs.StringVar(&o.jwksURL, "oauth-jwks-url", "", "`URL` of the issuer's key set (JWKS), fetched and kept, fetched again for an unknown kid")
	fs.StringVar(&o.jwksFile, "oauth-jwks-file", "", "`file` of the verification keys (a JWKS, or PEM public keys) instead of --oauth-jwks-url")
	fs.StringVar(&o.resource, "oauth-resource", "", "Spillway's canonical resource `URI` announced in its protected-resource metadata (default the public URL and /mcp)")
	fs.StringVar(&o.audience, "oauth-audience", "", "the `aud` an access token must hold (default --oauth-resource)")
	fs.StringVar(&o.tenantClaim, "oauth-tenant-claim", "sub", "the access token `claim` that names the tenant")
	fs.StringVar(&o.scopes, "oauth-scopes", "", "`scopes` every access token must hold, comma-separated (announced as scopes_supported)")
	fs.StringVar(&o.algs, "oauth-algs", "", "accepted signature `algorithms`, comma-separated (default every asymmetric one: RS*, PS*, ES*, EdDSA)")
	fs.DurationVar(&o.clockSkew, "oauth-clock-skew", 30*time.Second, "leeway on an access token's exp and nbf")
}

// on reports whether OAuth is configured.
func (o *oauthFlags) on() bool { return o.issuer != "" }

// check refuses OAuth flags without --oauth-issuer, or an issuer without
// keys, before anything is opened.
func (o *oauthFlags) check() error {
	if !o.on() {
		if o.jwksURL != "" || o.jwksFile != "" || o.resource != "" || o.audience != "" || o.scopes != "" || o.algs != "" {
			return errors.New("--oauth-* flags need --oauth-issuer")
		}
		return nil
	}
	if (o.jwksURL == "") == (o.jwksFile == "") {
		return errors.New("--oauth-issuer needs one of --oauth-jwks-url and --oauth-jwks-file")
	}
	return nil
}

// build returns the verifier, nil without --oauth-issuer. publicURL is
// Spillway's public URL, whose /mcp is the default resource.
func (o *oauthFlags) build(publicURL *url.URL, log *slog.Logger) (*identity.OAuth, error) {
	if !o.on() {
		return nil, nil
	}
	cfg := identity.OAuthConfig{
		Issuer: o.issuer, JWKSURL: o.jwksURL, Resource: o.resource, Audience: o.audience,
		TenantClaim: o.tenantClaim, Scopes: splitList(o.scopes), Algorithms: splitList(o.algs),
		ClockSkew: o.clockSkew, Logger: log,
	}
	if o.clockSkew == 0 {
		cfg.ClockSkew = -1 // the flag's 0 is none
	}
	if cfg.Resource == "" {
		cfg.Resource = publicURL.JoinPath("mcp").String()
	}
	if o.jwksFile != "" {
		keys, err := readKeys(o.jwksFile)
		if err != nil {
			return nil, fmt.Errorf("--oauth-jwks-file: %w", err)
		}
		cfg.Keys = keys
	}
	v, err := identity.NewOAuth(cfg)
	if err != nil {
		return nil, err
	}
	log.Info("/mcp accepts OAuth access tokens", "issuer", cfg.Issuer, "resource", cfg.Resource, "resource_metadata", v.MetadataURL())
	return v, nil
}

// readKeys reads a JWKS file, or a file of PEM public keys.
func readKeys(path string) (jwk.Set, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pem := strings.HasPrefix(strings.TrimSpace(string(b)), "-----BEGIN")
	return jwk.Parse(b, jwk.WithPEM(pem))
}

// mountOAuthMetadata serves the RFC 9728 protected-resource metadata at
// /.well-known/oauth-protected-resource and at the path-suffixed form the
// MCP authorization spec's clients try first
// (/.well-known/oauth-protected-resource/mcp). The document is public:
// no guard, any origin.
func mountOAuthMetadata(r *mux.Router, v *identity.OAuth) {
	h := v.MetadataHandler()
	u, _ := url.Parse(v.MetadataURL())
	const root = "/.well-known/oauth-protected-resource"
	methods := []string{http.MethodGet, http.MethodHead, http.MethodOptions}
	r.Handle(root, h).Methods(methods...)
	if u != nil && u.Path != root {
		r.Handle(u.Path, h).Methods(methods...)
	}
}

package identity

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

// Errors of OAuth.Verify and Tenants.Identify, beside ErrUnauthenticated.
var (
	// ErrInvalidToken is returned when a bearer token was sent but is not
	// one Spillway accepts: unknown, malformed, badly signed, expired, or
	// for another issuer or audience. It wraps ErrUnauthenticated, so
	// every face answers it with 401.
	ErrInvalidToken = fmt.Errorf("identity: invalid or expired access token: %w", ErrUnauthenticated)
	// ErrInsufficientScope is returned for a valid access token that lacks
	// a required scope: 403 (RFC 6750 §3.1).
	ErrInsufficientScope = errors.New("identity: the access token lacks a required scope")
)

// DefaultAlgorithms are the signature algorithms an OAuth verifier accepts
// unless told otherwise: every asymmetric one. HMAC and "none" can never
// be configured: a resource server holds no issuer's secret.
var DefaultAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// OAuthConfig configures an OAuth 2.1 resource server (see NewOAuth).
type OAuthConfig struct {
	// Issuer is the authorization server's issuer identifier; a token's
	// iss must equal it. Required.
	Issuer string
	// Resource is Spillway's canonical resource URI (its public URL and
	// /mcp), announced in the protected-resource metadata. Required.
	Resource string
	// Audience is the aud a token must hold; default Resource.
	Audience string
	// JWKSURL is where the issuer publishes its keys (http or https).
	// Exactly one of JWKSURL and Keys is set.
	JWKSURL string
	// Keys are fixed verification keys, instead of JWKSURL.
	Keys jwk.Set
	// TenantClaim names the claim that becomes the tenant; default "sub".
	// Its value must be a string that is a valid tenant name (1 to
	// MaxTenantLen of A-Z a-z 0-9 . _ : @ -), else the token is refused.
	TenantClaim string
	// Scopes are required of every token (all of them), and announced as
	// scopes_supported.
	Scopes []string
	// Algorithms are the accepted signature algorithms; default
	// DefaultAlgorithms. Only asymmetric ones are allowed.
	Algorithms []string
	// ClockSkew is the leeway on exp, nbf and iat; default 30s, negative
	// none.
	ClockSkew time.Duration
	// Client fetches JWKSURL; default a client with a 10s timeout.
	Client *http.Client
	// RefetchGap is the least time between two fetches of JWKSURL;
	// default 30s. KeysMaxAge is how long fetched keys are used before
	// they are fetched again; default 1h.
	RefetchGap, KeysMaxAge time.Duration
	// Logger receives JWKS fetch failures and, at debug level, why a
	// token was refused (never a token); default slog.Default().
	Logger *slog.Logger
}

// OAuth verifies JWT access tokens as an OAuth 2.1 resource server (the
// MCP authorization spec, RFC 9068): signed by the issuer with an allowed
// asymmetric algorithm, with the configured iss and aud, unexpired, valid
// now (nbf), and holding every required scope. A *OAuth is immutable once
// built and safe for concurrent use.
type OAuth struct {
	cfg      OAuthConfig
	keys     *keySource
	algs     map[string]jwa.SignatureAlgorithm
	metadata []byte
	metaURL  string
}

// NewOAuth checks cfg and returns its verifier. It fetches nothing: the
// issuer's keys are fetched by the first token's verification.
func NewOAuth(cfg OAuthConfig) (*OAuth, error) {
	if err := checkOAuthConfig(&cfg); err != nil {
		return nil, fmt.Errorf("identity: oauth: %w", err)
	}
	o := &OAuth{cfg: cfg, algs: map[string]jwa.SignatureAlgorithm{}}
	for _, a := range cfg.Algorithms {
		alg, ok := jwa.LookupSignatureAlgorithm(a)
		if !ok || !slices.Contains(DefaultAlgorithms, a) {
			return nil, fmt.Errorf("identity: oauth: algorithm %q is not an asymmetric signature algorithm", a)
		}
		o.algs[a] = alg
	}
	var err error
	if cfg.Keys != nil {
		if o.keys, err = newStaticKeys(cfg.Keys); err != nil {
			return nil, fmt.Errorf("identity: oauth: %w", err)
		}
	} else {
		o.keys = &keySource{url: cfg.JWKSURL, client: cfg.Client, minGap: cfg.RefetchGap, maxAge: cfg.KeysMaxAge, log: cfg.Logger}
	}
	o.metaURL = MetadataURL(cfg.Resource)
	o.metadata, err = json.Marshal(o.Metadata())
	return o, err
}

// checkOAuthConfig checks cfg and fills its defaults.
func checkOAuthConfig(cfg *OAuthConfig) error {
	if err := absoluteURL(cfg.Issuer, "issuer"); err != nil {
		return err
	}
	if err := absoluteURL(cfg.Resource, "resource"); err != nil {
		return err
	}
	if u, _ := url.Parse(cfg.Resource); u.Fragment != "" || strings.ContainsAny(cfg.Resource, `"\ `) {
		return errors.New("the resource URI must have no fragment, quote, backslash or space")
	}
	if (cfg.JWKSURL == "") == (cfg.Keys == nil) {
		return errors.New("give either a JWKS URL or keys")
	}
	if cfg.JWKSURL != "" {
		if err := absoluteURL(cfg.JWKSURL, "JWKS URL"); err != nil {
			return err
		}
	}
	for _, s := range cfg.Scopes {
		if !validScope(s) {
			return fmt.Errorf("scope %q is not an RFC 6749 scope token", s)
		}
	}
	cfg.Audience = defaultStr(cfg.Audience, cfg.Resource)
	cfg.TenantClaim = defaultStr(cfg.TenantClaim, "sub")
	if len(cfg.Algorithms) == 0 {
		cfg.Algorithms = DefaultAlgorithms
	}
	switch {
	case cfg.ClockSkew == 0:
		cfg.ClockSkew = 30 * time.Second
	case cfg.ClockSkew < 0:
		cfg.ClockSkew = 0
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	cfg.RefetchGap = defaultDur(cfg.RefetchGap, 30*time.Second)
	cfg.KeysMaxAge = defaultDur(cfg.KeysMaxAge, time.Hour)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return nil
}

func absoluteURL(s, what string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("the %s must be an http(s) URL", what)
	}
	return nil
}

func defaultStr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func defaultDur(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// validScope reports whether s is an RFC 6749 §3.3 scope-token
// (%x21 / %x23-5B / %x5D-7E), so it fits a quoted header parameter.
func validScope(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// Principal is who a request authenticated as.
type Principal struct {
	// Tenant is the tenant the caller acts as.
	Tenant string
	// OAuth is true when an access token, not a static token, said so.
	OAuth bool
	// Scopes are the access token's scopes (its scope or scp claim).
	Scopes []string
	// Claims are every claim of the access token, as decoded JSON
	// (numbers as float64); nil for a static token. They are for policy
	// input and audit: never log the token itself.
	Claims map[string]any
}

// Verify returns the principal of an access token; ErrInvalidToken
// (wrapped, with a reason that never quotes the token) when it is not
// acceptable, or ErrInsufficientScope when it is but lacks a required
// scope.
//
// A refusal is logged at debug level with its reason (never the token).
func (o *OAuth) Verify(ctx context.Context, tok string) (Principal, error) {
	p, err := o.verify(ctx, tok)
	if err != nil {
		o.cfg.Logger.Debug("access token refused", "reason", strings.TrimPrefix(err.Error(), ErrInvalidToken.Error()+": "))
	}
	return p, err
}

func (o *OAuth) verify(ctx context.Context, tok string) (Principal, error) {
	h, err := parseCompactJWS(tok)
	if err != nil {
		return Principal{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	alg, ok := o.algs[h.alg]
	if !ok {
		return Principal{}, fmt.Errorf("%w: algorithm not allowed", ErrInvalidToken)
	}
	key, err := o.keys.key(ctx, h)
	if err != nil {
		return Principal{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	_, err = jwt.Parse([]byte(tok), jwt.WithKey(alg, key), jwt.WithValidate(true),
		jwt.WithIssuer(o.cfg.Issuer), jwt.WithAudience(o.cfg.Audience),
		jwt.WithAcceptableSkew(o.cfg.ClockSkew), jwt.WithRequiredClaim("exp"))
	if err != nil {
		return Principal{}, fmt.Errorf("%w: %s", ErrInvalidToken, jwtReason(err))
	}
	return o.principal(tok)
}

// jwtReason names why jwx refused a token, without its text (which may
// quote claims).
func jwtReason(err error) string {
	switch {
	case errors.Is(err, jwt.TokenExpiredError()):
		return "expired"
	case errors.Is(err, jwt.TokenNotYetValidError()):
		return "not yet valid"
	case errors.Is(err, jwt.InvalidIssuerError()):
		return "wrong issuer"
	case errors.Is(err, jwt.InvalidAudienceError()):
		return "wrong audience"
	case errors.Is(err, jwt.InvalidIssuedAtError()):
		return "issued in the future"
	case errors.Is(err, jwt.MissingRequiredClaimError()):
		return "no exp claim"
	case errors.Is(err, jwt.ValidateError()):
		return "claims not valid"
	}
	return "bad signature or malformed token"
}

// principal reads the claims of tok, whose signature and claims were
// checked, into a Principal.
func (o *OAuth) principal(tok string) (Principal, error) {
	payload := tok[strings.IndexByte(tok, '.')+1 : strings.LastIndexByte(tok, '.')]
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	var claims map[string]any
	if err == nil {
		err = json.Unmarshal(raw, &claims)
	}
	if err != nil || claims == nil {
		return Principal{}, fmt.Errorf("%w: claims are not a JSON object", ErrInvalidToken)
	}
	tenant, _ := claims[o.cfg.TenantClaim].(string)
	if !validTenant(tenant) {
		return Principal{}, fmt.Errorf("%w: claim %s is not a tenant name (1 to %d of A-Z a-z 0-9 . _ : @ -)", ErrInvalidToken, o.cfg.TenantClaim, MaxTenantLen)
	}
	p := Principal{Tenant: tenant, OAuth: true, Scopes: scopesOf(claims), Claims: claims}
	for _, s := range o.cfg.Scopes {
		if !slices.Contains(p.Scopes, s) {
			return p, ErrInsufficientScope
		}
	}
	return p, nil
}

// scopesOf returns the scopes of claims: RFC 9068's space-separated scope
// string, or the scp claim (a list or a string) some issuers use instead.
func scopesOf(claims map[string]any) []string {
	if s, ok := claims["scope"].(string); ok {
		return strings.Fields(s)
	}
	switch v := claims["scp"].(type) {
	case string:
		return strings.Fields(v)
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// MetadataURL returns where the protected-resource metadata of resource
// is served (RFC 9728 §3.1): /.well-known/oauth-protected-resource put
// between its host and its path.
func MetadataURL(resource string) string {
	u, err := url.Parse(resource)
	if err != nil {
		return ""
	}
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	return (&url.URL{Scheme: u.Scheme, Host: u.Host}).String() + "/.well-known/oauth-protected-resource" + path
}

// ProtectedResourceMetadata is the RFC 9728 document of a resource.
type ProtectedResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
}

// Metadata returns o's protected-resource metadata.
func (o *OAuth) Metadata() ProtectedResourceMetadata {
	return ProtectedResourceMetadata{
		Resource:               o.cfg.Resource,
		AuthorizationServers:   []string{o.cfg.Issuer},
		BearerMethodsSupported: []string{"header"},
		ScopesSupported:        o.cfg.Scopes,
	}
}

// MetadataURL returns where o's metadata is served (see MetadataURL).
func (o *OAuth) MetadataURL() string { return o.metaURL }

// MetadataHandler serves o's protected-resource metadata to GET and HEAD,
// and answers a CORS preflight (OPTIONS).
// The document is public and the same for every caller, so any origin
// may read it (browser-based MCP clients fetch it cross-origin).
func (o *OAuth) MetadataHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		switch r.Method {
		case http.MethodGet, http.MethodHead:
		case http.MethodOptions:
			// A browser's preflight: MCP clients send MCP-Protocol-Version.
			h.Set("Access-Control-Allow-Origin", "*")
			h.Set("Access-Control-Allow-Methods", "GET, HEAD")
			h.Set("Access-Control-Allow-Headers", "*")
			w.WriteHeader(http.StatusNoContent)
			return
		default:
			h.Set("Allow", "GET, HEAD, OPTIONS")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "public, max-age=3600")
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("X-Content-Type-Options", "nosniff")
		w.Write(o.metadata)
	})
}

// challenge returns the WWW-Authenticate value and status that answer err
// (RFC 6750 §3, RFC 9728 §5.1, the MCP authorization spec).
func (o *OAuth) challenge(err error) (int, string) {
	var b strings.Builder
	b.WriteString(`Bearer resource_metadata="` + o.metaURL + `"`)
	status := http.StatusUnauthorized
	switch {
	case errors.Is(err, ErrInsufficientScope):
		status = http.StatusForbidden
		b.WriteString(`, error="insufficient_scope"`)
	case errors.Is(err, ErrInvalidToken):
		b.WriteString(`, error="invalid_token"`)
	}
	if len(o.cfg.Scopes) > 0 {
		b.WriteString(`, scope="` + strings.Join(o.cfg.Scopes, " ") + `"`)
	}
	return status, b.String()
}

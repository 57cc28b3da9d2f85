package artifact

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/spillway-dev/spillway/artifact/token"
)

// Tenants maps inbound bearer tokens to tenant names. It is the one
// authenticator of every caller-facing API (/mcp and /v1/artifacts). An empty
// Tenants admits everyone as tenant "". Safe for concurrent use once built.
type Tenants struct {
	tokens []tenantToken
}

type tenantToken struct {
	sum    [sha256.Size]byte
	tenant string
}

// NewTenants builds a Tenants from token → tenant pairs.
func NewTenants(m map[string]string) (*Tenants, error) {
	t := &Tenants{}
	for tok, tenant := range m {
		if len(tok) < 16 {
			return nil, errors.New("artifact: inbound tokens must be at least 16 characters")
		}
		if tenant == "" || !token.ValidField(tenant) {
			return nil, fmt.Errorf("artifact: bad tenant name %q", tenant)
		}
		t.tokens = append(t.tokens, tenantToken{sha256.Sum256([]byte(tok)), tenant})
	}
	return t, nil
}

// ParseTenants parses "token=tenant,token=tenant".
func ParseTenants(s string) (*Tenants, error) {
	m := map[string]string{}
	for pair := range strings.SplitSeq(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		tok, tenant, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, errors.New("artifact: inbound tokens are written token=tenant")
		}
		m[strings.TrimSpace(tok)] = strings.TrimSpace(tenant)
	}
	return NewTenants(m)
}

// Required reports whether callers must present a token.
func (t *Tenants) Required() bool { return t != nil && len(t.tokens) > 0 }

// ErrUnauthenticated is returned when a required inbound token is missing or unknown.
var ErrUnauthenticated = errors.New("artifact: missing or unknown bearer token")

// Authenticate returns the tenant of r's bearer token. Every configured token
// is compared, in constant time, so timing reveals nothing.
func (t *Tenants) Authenticate(r *http.Request) (string, error) {
	if !t.Required() {
		return "", nil
	}
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", ErrUnauthenticated
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	tenant := ""
	for _, tt := range t.tokens {
		if subtle.ConstantTimeCompare(sum[:], tt.sum[:]) == 1 {
			tenant = tt.tenant
		}
	}
	if tenant == "" {
		return "", ErrUnauthenticated
	}
	return tenant, nil
}

// APIOptions configure the upload API.
type APIOptions struct {
	Tenants   *Tenants     // nil or empty: anyone who can reach it, as tenant ""
	MaxUpload int64        // bytes; 0: 1 GiB
	Logger    *slog.Logger // nil: slog.Default()
}

// API is the artifact service's management API for tool authors and SDKs:
//
//	POST   /v1/artifacts             upload (body = bytes) → resource_link
//	POST   /v1/artifacts/{id}/links  mint a fresh link     → resource_link
//	GET    /v1/artifacts/{id}        metadata
//	DELETE /v1/artifacts/{id}        delete; every link dies with it
type API struct {
	svc *Service
	o   APIOptions
}

// NewAPI returns the management API over svc.
func NewAPI(svc *Service, o APIOptions) *API {
	if o.MaxUpload <= 0 {
		o.MaxUpload = 1 << 30
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &API{svc: svc, o: o}
}

// Register mounts the API's routes on r.
func (a *API) Register(r *mux.Router) {
	r.HandleFunc("/v1/artifacts", a.upload).Methods(http.MethodPost)
	r.HandleFunc("/v1/artifacts/{id}/links", a.mint).Methods(http.MethodPost)
	r.HandleFunc("/v1/artifacts/{id}", a.stat).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/v1/artifacts/{id}", a.delete).Methods(http.MethodDelete)
}

func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, ErrUnauthenticated) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="spillway"`)
	}
	if he := toHTTP(err); he.status >= 500 {
		a.o.Logger.Warn("api error", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeError(w, err)
}

func (a *API) upload(w http.ResponseWriter, r *http.Request) {
	tenant, err := a.o.Tenants.Authenticate(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if r.ContentLength > a.o.MaxUpload {
		a.fail(w, r, ErrTooLarge)
		return
	}
	q := r.URL.Query()
	ttl, err := durationParam(q.Get("ttl"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	name := r.Header.Get("X-Spillway-Name")
	if name == "" {
		name = q.Get("name")
	}
	mt := r.Header.Get("Content-Type")
	if _, _, err := mime.ParseMediaType(mt); err != nil {
		mt = "application/octet-stream"
	}
	meta := Artifact{Name: name, MimeType: mt, Tenant: tenant, Source: "api",
		SHA256: strings.ToLower(r.Header.Get("X-Spillway-SHA256"))}
	if r.ContentLength > 0 {
		meta.Size = r.ContentLength
	}
	body := http.MaxBytesReader(w, r.Body, a.o.MaxUpload)
	art, link, err := a.svc.Publish(r.Context(), meta, body, LinkOptions{TTL: ttl, Tenant: tenant, Source: "api"})
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		err = fmt.Errorf("upload over %d bytes: %w", a.o.MaxUpload, ErrTooLarge)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, NewResourceLink(art, link))
}

// owned returns the artifact named by the route if the caller's tenant owns it.
func (a *API) owned(r *http.Request) (Artifact, string, error) {
	tenant, err := a.o.Tenants.Authenticate(r)
	if err != nil {
		return Artifact{}, "", err
	}
	art, err := a.svc.Stat(r.Context(), mux.Vars(r)["id"])
	if err != nil {
		return Artifact{}, "", err
	}
	if art.Tenant != tenant {
		return Artifact{}, "", &httpError{http.StatusForbidden, "forbidden", "this artifact belongs to another tenant"}
	}
	return art, tenant, nil
}

func (a *API) mint(w http.ResponseWriter, r *http.Request) {
	art, tenant, err := a.owned(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var req struct {
		TTL      string `json:"ttl"`
		CIDR     string `json:"cidr"`
		Audience string `json:"audience"`
		Method   string `json:"method"`
	}
	if r.ContentLength != 0 {
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			a.fail(w, r, fmt.Errorf("link request: %v: %w", err, ErrInvalid))
			return
		}
	}
	o := LinkOptions{Tenant: tenant, Audience: req.Audience, Source: "api", Method: token.MethodGet}
	if o.TTL, err = durationParam(req.TTL); err != nil {
		a.fail(w, r, err)
		return
	}
	switch strings.ToUpper(req.Method) {
	case "", "GET":
	case "HEAD":
		o.Method = token.MethodHead
	default:
		a.fail(w, r, fmt.Errorf("method %q: %w", req.Method, ErrInvalid))
		return
	}
	if req.CIDR != "" {
		if o.CIDR, err = netip.ParsePrefix(req.CIDR); err != nil {
			a.fail(w, r, fmt.Errorf("cidr: %w", ErrInvalid))
			return
		}
	}
	link, err := a.svc.Link(r.Context(), art, o)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, NewResourceLink(art, link))
}

func (a *API) stat(w http.ResponseWriter, r *http.Request) {
	art, _, err := a.owned(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, art)
}

func (a *API) delete(w http.ResponseWriter, r *http.Request) {
	art, _, err := a.owned(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if err := a.svc.Delete(r.Context(), art.ID); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func durationParam(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		if n, err2 := strconv.ParseInt(s, 10, 64); err2 == nil && n > 0 {
			return time.Duration(n) * time.Second, nil
		}
		return 0, fmt.Errorf("ttl %q: %w", s, ErrInvalid)
	}
	return d, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	setSafetyHeaders(w.Header())
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

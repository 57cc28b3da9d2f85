// Package api is the artifact service's management API, for tool authors
// and SDKs: upload, mint a fresh link, read metadata, delete, revoke a
// link. Package identity identifies the callers; a link token is never
// accepted here.
package api

import (
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

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/httpsafe"
	"github.com/spillway-dev/spillway/artifact/identity"
	"github.com/spillway-dev/spillway/artifact/token"
)

// Options configure the API. The zero Options turn it off: every route
// answers 404 "api_off".
type Options struct {
	// Tenants identifies callers by bearer token. Nil or empty: the API is
	// off (every route answers 404 "api_off") unless Anonymous is set.
	Tenants *identity.Tenants
	// Anonymous serves the API without inbound tokens, to anyone who can
	// reach it, as tenant "". Set it only for a listener that no link
	// holder can reach (spillway serve --api-listen on loopback): knowing
	// an artifact id, which every link shows, is then enough to mint and
	// delete. Ignored when Tenants requires tokens.
	Anonymous bool
	// Guard checks Host, Origin and cross-site requests of every caller;
	// nil: the zero Guard (IP-literal and localhost Hosts, same-origin
	// browsers).
	Guard     *identity.Guard
	MaxUpload int64        // bytes; 0 or less: 1 GiB
	Logger    *slog.Logger // nil: slog.Default()
}

// API is the artifact service's management API for tool authors and SDKs:
//
//	POST   /v1/artifacts             upload (body = bytes) → resource_link
//	POST   /v1/artifacts/{id}/links  mint a fresh link     → resource_link
//	GET    /v1/artifacts/{id}        metadata
//	DELETE /v1/artifacts/{id}        delete; every link dies with it
//	DELETE /v1/artifacts/{id}/links/{token}  revoke one link to it
//
// Every request is authenticated first, then checked by the Guard. Another
// tenant's artifact answers 404 like an unknown one. Create an API with
// New; the zero value is not usable. It is safe for concurrent use.
type API struct {
	svc *artifact.Service
	o   Options
}

// New returns the management API over svc, with o's defaults filled in.
// Mount it with Register.
func New(svc *artifact.Service, o Options) *API {
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
	r.Handle("/v1/artifacts", a.route(a.upload)).Methods(http.MethodPost)
	r.Handle("/v1/artifacts/{id}/links", a.route(a.mint)).Methods(http.MethodPost)
	r.Handle("/v1/artifacts/{id}", a.route(a.stat)).Methods(http.MethodGet, http.MethodHead)
	r.Handle("/v1/artifacts/{id}", a.route(a.delete)).Methods(http.MethodDelete)
	r.Handle("/v1/artifacts/{id}/links/{token}", a.route(a.revoke)).Methods(http.MethodDelete)
}

var errOff = httpsafe.NewError(http.StatusNotFound, "api_off",
	"the management API is off: no inbound authentication is configured")

// route wraps h: it refuses the request when the API is off, when the
// bearer token is missing or unknown, or when the Guard refuses it, and
// otherwise calls h with the caller's tenant.
func (a *API) route(h func(http.ResponseWriter, *http.Request, string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.o.Tenants.Required() && !a.o.Anonymous {
			a.fail(w, r, errOff)
			return
		}
		// Authenticate before the Guard checks, so that a request without
		// a token gets 401 and learns what is missing: without
		// Authorization, a POST may look cross-site and the Guard's 403
		// would not say so.
		tenant, err := a.o.Tenants.Authenticate(r)
		if err == nil {
			err = a.o.Guard.Check(r)
		}
		if err != nil {
			a.fail(w, r, err)
			return
		}
		h(w, r, tenant)
	})
}

// Guarded wraps h so that only the requests g admits reach it; the others
// get 403 in the API's error format. The service uses it for its other
// non-link routes (/healthz, /readyz, /metrics, /mcp). A nil g is the zero
// Guard.
func Guarded(g *identity.Guard, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := g.Check(r); err != nil {
			writeError(w, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// fail answers err to the client, and logs it when it is the server's
// fault (a 5xx status).
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	if status := writeError(w, err); status >= 500 {
		a.o.Logger.Warn("api error", "method", r.Method, "path", r.URL.Path, "err", err)
	}
}

// writeError answers err and returns the status. It maps package
// identity's errors itself, and the domain's with artifact.HTTPError, the
// same mapping the fetch endpoint uses.
func writeError(w http.ResponseWriter, err error) int {
	msg := strings.TrimPrefix(err.Error(), "identity: ")
	var he *httpsafe.Error
	switch {
	case errors.Is(err, identity.ErrUnauthenticated):
		w.Header().Set("WWW-Authenticate", `Bearer realm="spillway"`)
		he = httpsafe.NewError(http.StatusUnauthorized, "unauthenticated", "a valid bearer token is required")
	case errors.Is(err, identity.ErrHost):
		he = httpsafe.NewError(http.StatusForbidden, "forbidden_host", msg)
	case errors.Is(err, identity.ErrOrigin):
		he = httpsafe.NewError(http.StatusForbidden, "forbidden_origin", msg)
	case errors.Is(err, identity.ErrCrossSite):
		he = httpsafe.NewError(http.StatusForbidden, "cross_site", msg)
	default:
		he = artifact.HTTPError(err)
	}
	return httpsafe.WriteError(w, he)
}

// upload stores the request body as a new artifact of tenant and answers
// a resource_link to it. A body over MaxUpload is ErrTooLarge (413).
func (a *API) upload(w http.ResponseWriter, r *http.Request, tenant string) {
	if r.ContentLength > a.o.MaxUpload {
		a.fail(w, r, artifact.ErrTooLarge)
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
	meta := artifact.Artifact{Name: name, MimeType: mt, Tenant: tenant, Source: "api",
		SHA256: strings.ToLower(r.Header.Get("X-Spillway-SHA256"))}
	if r.ContentLength > 0 {
		meta.Size = r.ContentLength
	}
	body := http.MaxBytesReader(w, r.Body, a.o.MaxUpload)
	art, link, err := a.svc.Publish(r.Context(), meta, body, artifact.LinkOptions{TTL: ttl, Tenant: tenant, Source: "api"})
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		err = fmt.Errorf("upload over %d bytes: %w", a.o.MaxUpload, artifact.ErrTooLarge)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, artifact.NewResourceLink(art, link))
}

// owned returns the artifact named by the route if tenant owns it. Another
// tenant's artifact is reported as not found, like an unknown id, so that a
// caller cannot learn which ids exist (Service.Owned applies this rule on
// every path).
func (a *API) owned(r *http.Request, tenant string) (artifact.Artifact, error) {
	return a.svc.Owned(r.Context(), mux.Vars(r)["id"], tenant)
}

// mint answers a fresh resource_link to an artifact tenant owns, with the
// TTL, CIDR, audience and method the JSON body asks for (all optional).
func (a *API) mint(w http.ResponseWriter, r *http.Request, tenant string) {
	art, err := a.owned(r, tenant)
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
			a.fail(w, r, fmt.Errorf("link request: %w: %w", err, artifact.ErrInvalid))
			return
		}
	}
	o := artifact.LinkOptions{Tenant: tenant, Audience: req.Audience, Source: "api", Method: token.MethodGet}
	if o.TTL, err = durationParam(req.TTL); err != nil {
		a.fail(w, r, err)
		return
	}
	switch strings.ToUpper(req.Method) {
	case "", "GET":
	case "HEAD":
		o.Method = token.MethodHead
	default:
		a.fail(w, r, fmt.Errorf("method %q: %w", req.Method, artifact.ErrInvalid))
		return
	}
	if req.CIDR != "" {
		if o.CIDR, err = netip.ParsePrefix(req.CIDR); err != nil {
			a.fail(w, r, fmt.Errorf("cidr: %w", artifact.ErrInvalid))
			return
		}
	}
	link, err := a.svc.Link(r.Context(), art, o)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, artifact.NewResourceLink(art, link))
}

func (a *API) stat(w http.ResponseWriter, r *http.Request, tenant string) {
	art, err := a.owned(r, tenant)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, art)
}

func (a *API) delete(w http.ResponseWriter, r *http.Request, tenant string) {
	art, err := a.owned(r, tenant)
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

// revoke refuses one link to an artifact the caller owns, named by its
// token id (a resource_link's _meta "dev.spillway/tokenId"). Every replica
// refuses the link within artifact.RevocationMaxAge, until the artifact
// expires. The revocation is recorded under that artifact and concerns its
// links only: naming another artifact's token id refuses nothing. Revoking
// an id twice, or one that never existed, is not an error, so the answer
// never tells whether a token id exists. Past the bounds on revocations it
// answers 409 "revocation_limit": delete the artifact instead.
func (a *API) revoke(w http.ResponseWriter, r *http.Request, tenant string) {
	if err := a.svc.Revoke(r.Context(), tenant, mux.Vars(r)["id"], mux.Vars(r)["token"]); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// durationParam parses a TTL: a Go duration ("90s", "2h") or a number of
// seconds; "" is 0 (the service's default). Anything else, or a TTL that
// is not positive, is ErrInvalid.
func durationParam(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		if n, err2 := strconv.ParseInt(s, 10, 64); err2 == nil && n > 0 {
			return time.Duration(n) * time.Second, nil
		}
		return 0, fmt.Errorf("ttl %q: %w", s, artifact.ErrInvalid)
	}
	return d, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	httpsafe.SetSafetyHeaders(w.Header())
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

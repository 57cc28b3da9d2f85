// Package mcpproxy is Spillway's MCP proxy: it sits between an agent and
// one MCP tool server, passes every message it does not own through
// unchanged, and rewrites the few it does (initialize and server/discover
// capabilities, tools/call results it offloads, resources/* for its own
// artifact URIs).
//
// Faces: Streamable HTTP (ServeHTTP, mounted at /mcp) and stdio
// (ServeStdio). Upstreams: Streamable HTTP (forwarded request by request,
// so sessions, headers and status codes stay the upstream's) or a stdio
// child process (the proxy then terminates HTTP itself: one child per
// session-era session, one shared child for stateless-era requests).
//
// The data plane decodes only the JSON-RPC envelope and keeps params and
// results as raw JSON. The official Go SDK is used as a test oracle, not
// here: its typed structs drop unknown fields and its transports reject
// methods they do not know, which a transparent proxy must not do.
package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/spillway-dev/spillway/mcpproxy/internal/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/mcpheader"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/identity"
	"github.com/spillway-dev/spillway/mcpproxy/internal/owned"
)

// Protocol revisions the proxy knows by name.
const (
	Version20250326 = "2025-03-26"
	Version20250618 = "2025-06-18"
	Version20251125 = "2025-11-25"
	Version20260728 = "2026-07-28" // the first stateless revision

	metaVersion = "io.modelcontextprotocol/protocolVersion"
)

// Call is what the proxy needs to rewrite the response to a request it
// owns (package owned).
type Call = owned.Call

// Options configure a Proxy. Upstream is required; the rest may be zero.
type Options struct {
	// Upstream is the tool server: an *HTTPUpstream or a *CommandUpstream.
	Upstream Upstream
	// Offloader rewrites tools/call results (and, with OffloadResources,
	// upstream resources/read results). nil: results pass unchanged.
	Offloader        *Offloader
	OffloadResources bool
	// Artifacts serves resources/read for spillway:// URIs. nil: they are
	// forwarded like any other URI.
	Artifacts *artifact.Service
	// Tenants authenticates callers with bearer tokens; nil or empty means
	// no inbound auth (the command refuses that off loopback).
	Tenants *identity.Tenants
	// AllowedHosts and AllowedOrigins extend DNS-rebinding protection:
	// by default only loopback Host names, and Origins equal to the Host,
	// are accepted.
	AllowedHosts, AllowedOrigins []string
	// MaxBody caps a POST body from the client; default 4 MiB.
	MaxBody int64
	// MaxSessions caps live session-era sessions on a stdio upstream (each
	// is a child process); default 64.
	MaxSessions int
	// StreamMode is how resources/stream delivers an artifact: StreamDirect
	// (default), StreamRedirect or StreamDownload.
	StreamMode string
	// Fetch is the artifact fetch endpoint; direct resources/stream
	// responses are served through it. nil: download mode.
	Fetch http.Handler
	// MaxInlineRead caps resources/read of an artifact (base64 in JSON);
	// beyond it the caller is told to use resources/stream or the httpUrl.
	// Default 32 MiB.
	MaxInlineRead int64
	// StreamWindow is how long a session's SSE events stay replayable
	// with Last-Event-ID; default 2 minutes.
	StreamWindow time.Duration
	// StreamPollAfter, when set, ends a session-era POST stream that has
	// been open this long with requests still unanswered, after a retry
	// hint: the client polls with GET and Last-Event-ID and gets the rest
	// there (SEP-1699). It keeps long tool calls clear of the idle
	// timeouts of load balancers. It applies where the proxy terminates
	// sessions (stdio and legacy upstreams); an HTTP upstream's streams
	// are its own. Zero: streams stay open.
	StreamPollAfter time.Duration
	Logger          *slog.Logger
}

// Proxy is an MCP proxy. Create it with New; it is safe for concurrent use.
// Close stops the child processes it started.
type Proxy struct {
	o   Options
	log *slog.Logger

	mu    sync.Mutex
	calls map[string]Call // "session\x00id" → call awaiting its response (HTTP upstream)

	sessions *sessions // stdio upstream only
	tools    mcpheader.Tools
	owned    *owned.Methods // the messages the proxy answers or rewrites
}

// New returns a proxy for o.Upstream.
func New(o Options) (*Proxy, error) {
	if o.Upstream == nil {
		return nil, errors.New("mcpproxy: no upstream")
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 4 << 20
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = 64
	}
	if o.MaxInlineRead <= 0 {
		o.MaxInlineRead = 32 << 20
	}
	if o.StreamWindow <= 0 {
		o.StreamWindow = 2 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	p := &Proxy{o: o, log: o.Logger, calls: map[string]Call{}}
	p.owned = owned.New(owned.Options{
		Artifacts: o.Artifacts, Offloader: o.Offloader, OffloadResources: o.OffloadResources,
		MaxInlineRead: o.MaxInlineRead, StreamMode: o.StreamMode, Fetch: o.Fetch,
		LearnTools: func(r []byte) { p.tools.Learn(r) }, Logger: o.Logger,
	})
	switch up := o.Upstream.(type) {
	case *CommandUpstream:
		p.sessions = newSessions(p, func() (conn, error) { return up.start(p.log) })
	case *HTTPUpstream:
		// Used only if the upstream turns out to speak the legacy
		// HTTP+SSE transport, which the proxy must then terminate.
		p.sessions = newSessions(p, func() (conn, error) { return dialLegacy(up, p) })
	}
	return p, nil
}

// Close stops every child process.
func (p *Proxy) Close() error {
	if p.sessions != nil {
		p.sessions.close()
	}
	return nil
}

// Upstream is where the proxy sends what it does not answer itself.
type Upstream interface{ upstream() }

// ---- the messages the proxy owns (package owned) ----

// Remember records an artifact offloaded for tenant so resources/list can
// show it; the list keeps the most recent 100 per tenant.
func (p *Proxy) Remember(tenant string, a artifact.Artifact) { p.owned.Remember(tenant, a) }

// request is who asks an HTTP request, for the proxy's own methods.
func request(r *http.Request, tenant, version string) owned.Request {
	rq := owned.Request{Tenant: tenant, Session: r.Header.Get("Mcp-Session-Id"), Version: version, Header: r.Header}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		rq.Source = ap.Addr().Unmap()
	}
	return rq
}

// ---- HTTP face: checks shared by both upstream kinds ----

// ServeHTTP serves the Streamable HTTP face; mount it at /mcp.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if msg := p.checkOrigin(r); msg != "" {
		http.Error(w, msg, http.StatusForbidden)
		return
	}
	tenant, err := p.o.Tenants.Authenticate(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="spillway"`)
		http.Error(w, "missing or unknown bearer token", http.StatusUnauthorized)
		return
	}
	r = r.WithContext(withTenant(r.Context(), tenant))
	switch up := p.o.Upstream.(type) {
	case *HTTPUpstream:
		legacy, err := up.legacy(r.Context())
		if err != nil {
			p.log.Warn("upstream unreachable", "err", err)
		}
		if legacy {
			p.sessions.serveHTTP(w, r, tenant)
			return
		}
		p.forward(w, r, up, tenant)
	case *CommandUpstream:
		p.sessions.serveHTTP(w, r, tenant)
	}
}

// checkOrigin is the DNS-rebinding protection: a browser page on another
// site must not reach a server on loopback through a name it controls.
func (p *Proxy) checkOrigin(r *http.Request) string {
	host := r.Host
	if !p.hostAllowed(host) {
		return "Forbidden: invalid Host header"
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return "" // not a browser
	}
	for _, o := range p.o.AllowedOrigins {
		if strings.EqualFold(o, origin) {
			return ""
		}
	}
	u, err := url.Parse(origin)
	if err != nil || !strings.EqualFold(u.Host, host) {
		return "Forbidden: invalid Origin header"
	}
	return ""
}

func (p *Proxy) hostAllowed(host string) bool {
	for _, h := range p.o.AllowedHosts {
		if strings.EqualFold(h, host) || h == "*" {
			return true
		}
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.Trim(name, "[]")
	if strings.EqualFold(name, "localhost") {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback() && len(p.o.AllowedHosts) == 0
}

type tenantKey struct{}

func withTenant(ctx context.Context, t string) context.Context {
	return context.WithValue(ctx, tenantKey{}, t)
}

// readBody reads a POST body under the size cap; the error is answered.
func (p *Proxy) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, p.o.MaxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
		} else {
			http.Error(w, "reading the request body failed", http.StatusBadRequest)
		}
		return nil, false
	}
	return body, true
}

// decodePOST decodes a client's POST body; malformed input is answered
// with a JSON-RPC error and HTTP 400.
func decodePOST(w http.ResponseWriter, body []byte, version string) ([]*jsonrpc.Message, bool, bool) {
	msgs, batch, err := jsonrpc.Decode(body)
	if err != nil {
		code := jsonrpc.CodeInvalidRequest
		if errors.Is(err, jsonrpc.ErrMalformed) {
			code = jsonrpc.CodeParseError
		}
		writeJSONError(w, http.StatusBadRequest, nil, code, err.Error())
		return nil, false, false
	}
	if batch && version != "" && version >= Version20250618 {
		writeJSONError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest,
			"JSON-RPC batches are not part of protocol revision "+version)
		return nil, false, false
	}
	return msgs, batch, true
}

func writeJSONError(w http.ResponseWriter, status int, id []byte, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(jsonrpc.ErrorResponse(id, code, msg).Raw)
}

// requestVersion is the protocol revision a POST speaks: the header, else
// the _meta of its first request.
func requestVersion(r *http.Request, msgs []*jsonrpc.Message) string {
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" {
		return v
	}
	for _, m := range msgs {
		if v := metaProtocolVersion(m.Params); v != "" {
			return v
		}
	}
	return ""
}

// metaProtocolVersion reads params._meta["io.modelcontextprotocol/protocolVersion"].
func metaProtocolVersion(params []byte) string {
	if params == nil {
		return ""
	}
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	var v string
	json.Unmarshal(p.Meta[metaVersion], &v)
	return v
}

func stateless(version string) bool { return mcpheader.Stateless(version) }

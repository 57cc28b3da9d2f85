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
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/spillway-dev/spillway/mcpproxy/internal/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/mcpheader"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/identity"
	"github.com/spillway-dev/spillway/mcpproxy/internal/offload"
)

// Protocol revisions the proxy knows by name.
const (
	Version20250326 = "2025-03-26"
	Version20250618 = "2025-06-18"
	Version20251125 = "2025-11-25"
	Version20260728 = "2026-07-28" // the first stateless revision

	metaVersion = "io.modelcontextprotocol/protocolVersion"
)

// Call describes a request whose result the proxy may rewrite.
type Call struct {
	Method string // "tools/call" or "resources/read"
	Tool   string // tools/call: the tool's name
	URI    string // resources/read: the resource
	Tenant string // the caller, from inbound auth ("" when auth is off)

	stdio bool // asked on the stdio face
	more  bool // a list request with a cursor: not the first page
}

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

	mu     sync.Mutex
	calls  map[string]Call                // "session\x00id" → call awaiting its response (HTTP upstream)
	recent map[string][]artifact.Artifact // tenant → artifacts offloaded lately, for resources/list

	sessions *sessions // stdio upstream only
	tools    mcpheader.Tools
	streams  streamState
	// upstreamStream: the upstream declared resources.stream.
	upstreamStream atomic.Bool
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
	p := &Proxy{o: o, log: o.Logger, calls: map[string]Call{}, recent: map[string][]artifact.Artifact{}}
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

// ---- the messages the proxy owns ----

// before inspects a request from the client. It returns a reply when the
// proxy answers the request itself, and the call to remember when the
// response must be rewritten.
func (p *Proxy) before(ctx context.Context, tenant string, m *jsonrpc.Message) (reply *jsonrpc.Message, c *Call) {
	if !m.IsRequest() {
		return nil, nil
	}
	switch m.Method {
	case "initialize", "server/discover", "resources/list", "resources/templates/list", "tools/list":
		var params struct {
			Cursor string `json:"cursor"`
		}
		json.Unmarshal(m.Params, &params)
		return nil, &Call{Method: m.Method, Tenant: tenant, more: params.Cursor != ""}
	case "tools/call":
		var params struct{ Name string }
		json.Unmarshal(m.Params, &params)
		return nil, &Call{Method: m.Method, Tool: params.Name, Tenant: tenant}
	case "resources/read":
		var params struct{ URI string }
		json.Unmarshal(m.Params, &params)
		if p.o.Artifacts != nil {
			if id, ok := artifact.IDFromURI(params.URI); ok {
				return p.readArtifact(ctx, tenant, m.ID, id), nil
			}
		}
		if p.o.OffloadResources {
			return nil, &Call{Method: m.Method, URI: params.URI, Tenant: tenant}
		}
	}
	return nil, nil
}

// after rewrites the response to a call the proxy owns. A response it
// cannot rewrite passes unchanged: the result is never lost.
func (p *Proxy) after(ctx context.Context, c *Call, resp *jsonrpc.Message) *jsonrpc.Message {
	if c == nil || !resp.IsResponse() {
		return resp
	}
	switch c.Method {
	case "initialize", "server/discover":
		if resp.Result != nil {
			p.upstreamStream.Store(upstreamStreams(resp.Result))
			// resources/stream is for HTTP; over stdio it is not declared
			// (SEP-2532 leaves stdio out).
			if r, err := addResourcesCapability(resp.Result, !c.stdio); err == nil {
				return resp.WithResult(r)
			}
		}
	case "resources/list":
		if c.more {
			return resp
		}
		return p.listArtifacts(c.Tenant, resp)
	case "resources/templates/list":
		if c.more {
			return resp
		}
		return addToList(resp, "resourceTemplates", []json.RawMessage{artifactTemplate})
	case "tools/list":
		if resp.Result != nil {
			p.tools.Learn(resp.Result)
		}
	case "tools/call", "resources/read":
		if resp.Result == nil || p.o.Offloader == nil {
			return resp
		}
		r, stored, err := p.o.Offloader.Rewrite(ctx, offload.Call{Method: c.Method, Tool: c.Tool, URI: c.URI, Tenant: c.Tenant}, resp.Result)
		for _, a := range stored {
			p.Remember(c.Tenant, a)
		}
		if errors.Is(err, offload.ErrWithheld) {
			return jsonrpc.ErrorResponse(resp.ID, jsonrpc.CodeInternalError, "the resource is too large to return inline and could not be stored for download; try again later")
		}
		if err != nil {
			p.log.Warn("offload failed; result passes inline", "method", c.Method, "tool", c.Tool, "err", err)
			return resp
		}
		if !json.Valid(r) {
			p.log.Error("offload produced invalid JSON; result passes inline", "tool", c.Tool)
			return resp
		}
		return resp.WithResult(r)
	}
	return resp
}

// addResourcesCapability declares the resources capability (for the
// proxy's artifact URIs), with stream: true when the face can stream, in
// an initialize or server/discover result, keeping every field the
// upstream sent.
func addResourcesCapability(result []byte, stream bool) ([]byte, error) {
	var r map[string]json.RawMessage
	if err := json.Unmarshal(result, &r); err != nil {
		return nil, err
	}
	var caps map[string]json.RawMessage
	if c, ok := r["capabilities"]; ok {
		if err := json.Unmarshal(c, &caps); err != nil {
			return nil, err
		}
	}
	if caps == nil {
		caps = map[string]json.RawMessage{}
	}
	var res map[string]json.RawMessage
	if r, ok := caps["resources"]; ok {
		if err := json.Unmarshal(r, &res); err != nil {
			return nil, err
		}
	}
	if res == nil {
		res = map[string]json.RawMessage{}
	}
	if stream {
		res["stream"] = json.RawMessage(`true`)
	}
	rb, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	caps["resources"] = rb
	b, err := json.Marshal(caps)
	if err != nil {
		return nil, err
	}
	r["capabilities"] = b
	return json.Marshal(r)
}

// Remember records an artifact offloaded for tenant so resources/list can
// show it; the list keeps the most recent 100 per tenant.
func (p *Proxy) Remember(tenant string, a artifact.Artifact) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := append(p.recent[tenant], a)
	if len(l) > 100 {
		l = l[len(l)-100:]
	}
	p.recent[tenant] = l
}

// artifactTemplate describes Spillway's artifact URIs in
// resources/templates/list.
var artifactTemplate = json.RawMessage(`{"uriTemplate":"spillway://artifacts/{id}","name":"spillway-artifact",` +
	`"title":"Spillway artifact","description":"A large tool output stored by Spillway; read it, stream it, or fetch its httpUrl.",` +
	`"streamable":true}`)

// listArtifacts adds the tenant's live artifacts to the first page of a
// resources/list response.
func (p *Proxy) listArtifacts(tenant string, resp *jsonrpc.Message) *jsonrpc.Message {
	p.mu.Lock()
	var items []json.RawMessage
	for _, a := range p.recent[tenant] {
		if !a.Expired(nowFunc()) {
			b, _ := json.Marshal(map[string]any{
				"uri": artifact.URI(a.ID), "name": a.Name, "mimeType": a.MimeType, "size": a.Size, "streamable": true,
			})
			items = append(items, b)
		}
	}
	p.mu.Unlock()
	return addToList(resp, "resources", items)
}

// addToList appends items to the list under key in a list response. An
// upstream without the method answers -32601; the proxy then answers
// with its own items alone.
func addToList(resp *jsonrpc.Message, key string, items []json.RawMessage) *jsonrpc.Message {
	if resp.Error != nil {
		if resp.ErrorCode() != jsonrpc.CodeMethodNotFound {
			return resp
		}
		resp = jsonrpc.Response(resp.ID, []byte(`{"`+key+`":[]}`))
	}
	if len(items) == 0 {
		return resp
	}
	var r map[string]json.RawMessage
	if json.Unmarshal(resp.Result, &r) != nil {
		return resp
	}
	var list []json.RawMessage
	json.Unmarshal(r[key], &list)
	r[key], _ = json.Marshal(append(list, items...))
	b, err := json.Marshal(r)
	if err != nil {
		return resp
	}
	return resp.WithResult(b)
}

// readArtifact answers resources/read for one of the proxy's artifacts.
func (p *Proxy) readArtifact(ctx context.Context, tenant string, reqID []byte, id string) *jsonrpc.Message {
	svc := p.o.Artifacts
	a, err := svc.Stat(ctx, id)
	if err == nil && a.Tenant != "" && a.Tenant != tenant {
		err = artifact.ErrNotFound // another tenant's artifact does not exist for this caller
	}
	if err != nil {
		return artifactError(reqID, id, err)
	}
	if a.Size > p.o.MaxInlineRead {
		return jsonrpc.ErrorResponse(reqID, jsonrpc.CodeInvalidParams, fmt.Sprintf("artifact is %d bytes, more than resources/read returns inline; use resources/stream or its httpUrl", a.Size))
	}
	rc, err := svc.Store.Open(ctx, id, 0, -1)
	if err != nil {
		return artifactError(reqID, id, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, p.o.MaxInlineRead+1))
	if err != nil {
		return artifactError(reqID, id, err)
	}
	item := map[string]any{"uri": artifact.URI(id), "mimeType": a.MimeType}
	if offload.IsText(a.MimeType) && utf8.Valid(data) {
		item["text"] = string(data)
	} else {
		item["blob"] = base64.StdEncoding.EncodeToString(data)
	}
	b, _ := json.Marshal(map[string]any{"contents": []any{item}})
	return jsonrpc.Response(reqID, b)
}

// artifactError is the one mapping of artifact errors to JSON-RPC.
func artifactError(reqID []byte, id string, err error) *jsonrpc.Message {
	switch {
	case errors.Is(err, artifact.ErrNotFound), errors.Is(err, artifact.ErrExpired):
		// -32002 is MCP's "resource not found".
		return jsonrpc.ErrorResponse(reqID, -32002, "resource not found: "+artifact.URI(id))
	case errors.Is(err, artifact.ErrUnavailable):
		return jsonrpc.ErrorResponse(reqID, jsonrpc.CodeInternalError, "artifact store unavailable; retry later")
	}
	return jsonrpc.ErrorResponse(reqID, jsonrpc.CodeInternalError, "reading the artifact failed")
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

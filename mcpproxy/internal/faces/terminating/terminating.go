// Package terminating is the HTTP face for upstreams that do not speak
// Streamable HTTP themselves (a stdio child, a legacy HTTP+SSE server): the
// proxy terminates the transport. A session-era session gets its own
// upstream connection (so server requests and log levels reach exactly
// its client) and its own streams, each a replayable event log (package
// session); stateless-era requests of one tenant share a supervised
// connection of that tenant's (a crash or restart backoff reaches no other
// tenant), each request in a namespace of its own (package mux) and with
// a bounded queue: a client that stops reading has its own request cut and
// cancelled upstream, never anyone else's.
//
// It also serves an upstream of either kind, or a Streamable HTTP one,
// that speaks only the other era than its client: a session-era session's
// connection may be bridged (Options.SessionDial), and a stateless-era
// request to an upstream that speaks only the session era is bridged
// here, on sessions Spillway holds per tenant and declared capabilities
// (bridge.go, listen.go; Options.Eras).
package terminating

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/mux"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/pool"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/session"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/era"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/httpx"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/mcpheader"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/sse"
)

// Options configure a Face. Dial and Methods are required.
type Options struct {
	Dial pool.Dial
	// SessionDial, when set, dials a session-era session's own upstream
	// connection instead of Dial (a bridge to a stateless-only upstream).
	SessionDial pool.Dial
	Methods     *ownmethods.Methods
	// CheckStateless validates a stateless request's routing headers
	// (Mcp-Method, Mcp-Name, Mcp-Param-*); a non-nil result is the error
	// answered. shared is the connection tool bindings may be listed on,
	// as rq's caller.
	CheckStateless func(ctx context.Context, r *http.Request, rq ownmethods.Request, m *jsonrpc.Message, shared *mux.Mux) *jsonrpc.Message
	// Eras, when set, bridges a stateless-era request to an upstream it
	// knows speaks only the session era (see bridge.go); nil forwards
	// every request in its own era.
	Eras        *era.Cache
	MaxBody     int64
	MaxSessions int
	Limits      session.Limits
	// PollAfter, when set, ends a session-era POST stream open this long,
	// after a retry hint: the client polls with GET (SEP-1699).
	PollAfter time.Duration
	// Queue bounds the messages waiting for one stateless client; past it
	// the client's request is cut. Default 1024.
	Queue int
	// StatelessConns caps the upstream connections of stateless requests,
	// one per tenant (see Tenants); default 16. StatelessIdle closes one
	// unused this long; default 5 minutes.
	StatelessConns int
	StatelessIdle  time.Duration
	// BridgeSessions bounds the upstream sessions a tenant holds for
	// bridged calls that can be asked (their client declared sampling,
	// elicitation or roots) where each needs a session of its own (see
	// RelatedStreams), per set of declared capabilities; default 4. A
	// tenant's connections together are bounded by half of
	// StatelessConns, or by BridgeSessions and one more when it is set at
	// least that high. BridgeWait is how long a request waits while all
	// the connections it may use are busy before it is refused; default
	// 1 minute, negative: refused at once. The wait also ends with the
	// request.
	BridgeSessions int
	BridgeWait     time.Duration
	// RelatedStreams says the upstream sends the server requests of a call
	// on that call's own response stream, and its connections mark them
	// (jsonrpc.Message.Related: Streamable HTTP): bridged calls that can
	// be asked then share their tenant's session, each server request
	// reaching the call it belongs to. false (a stdio child, a legacy
	// HTTP+SSE server): nothing in a server request names its call, so
	// such a call holds a session of its own meanwhile.
	RelatedStreams bool
	// WriteStall cuts a response whose client reads nothing for this long
	// (a stateless request's call is then cancelled upstream; a session's
	// stream waits to be resumed). Default 30 s; negative: never (Close
	// still cuts every response).
	WriteStall time.Duration
	// KeepAlive is how often an open event stream gets an SSE comment, so
	// that no load balancer's idle timeout cuts a long, silent call.
	// Default 15 s; negative: never.
	KeepAlive time.Duration
	Logger    *slog.Logger
}

// Face serves Streamable HTTP over dialed upstream connections. Create it
// with New; safe for concurrent use; Close ends every session.
type Face struct {
	o       Options
	log     *slog.Logger
	table   *session.Table
	shared  *pool.Tenants // stateless requests' connections, one per tenant
	closing chan struct{}

	outsMu sync.Mutex
	outs   map[*out]struct{} // the responses being written; nil once closed

	parks     *parkTable // bridged calls waiting for their client's input
	ownMu     sync.Mutex
	owners    map[*mux.Mux]*queue               // a bridged connection → the one call it serves
	listeners map[string]map[*listener]struct{} // tenant → its bridged listen streams
	// inits: tenant → the upstream's answer to the initialize of its
	// latest bridged session, what its server/discover is answered from
	// (a server may tell each client something of its own). Bounded by
	// the configured tenants.
	inits map[string][]byte
}

// New returns a face configured by o, its zero fields set to their
// defaults.
func New(o Options) *Face {
	if o.MaxBody <= 0 {
		o.MaxBody = 4 << 20
	}
	if o.Queue <= 0 {
		o.Queue = 1024
	}
	if o.WriteStall == 0 {
		o.WriteStall = 30 * time.Second
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = 15 * time.Second
	}
	// A tenant's bridged sessions (one per set of capabilities, and one
	// per call that can be asked) take at most half the connections, or
	// BridgeSessions and one more where it is set higher.
	perTenant := cmp.Or(o.StatelessConns, 16) / 2
	if o.BridgeSessions >= perTenant {
		perTenant = o.BridgeSessions + 1
	}
	if o.BridgeSessions <= 0 {
		o.BridgeSessions = DefaultBridgeSessions
	}
	if o.BridgeWait == 0 {
		o.BridgeWait = DefaultBridgeWait
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	f := &Face{o: o, log: o.Logger, table: session.NewTable(o.MaxSessions, 0, o.Limits),
		closing: make(chan struct{}), outs: map[*out]struct{}{},
		parks: newParkTable(), owners: map[*mux.Mux]*queue{}, listeners: map[string]map[*listener]struct{}{},
		inits: map[string][]byte{}}
	f.shared = pool.NewTenants(f.statelessSupervisor, max(cmp.Or(o.StatelessConns, 16), perTenant), o.StatelessIdle)
	f.shared.LimitPerTenant(pool.KeyTenant, perTenant)
	f.shared.WaitForRoom(o.BridgeWait)
	return f
}

// Close ends every session and stream and stops the shared connection.
// Every response returns at once, a write blocked on a client that
// stopped reading included.
func (f *Face) Close() {
	select {
	case <-f.closing:
	default:
		close(f.closing)
	}
	f.cutAll()
	for _, p := range f.parks.drain() {
		f.unpark(p, "shutting down")
	}
	f.table.Close()
	f.shared.Close()
}

// isAbort reports whether a recovered panic value is http.ErrAbortHandler,
// the panic net/http uses to abort a response on purpose.
func isAbort(v any) bool {
	err, ok := v.(error)
	return ok && errors.Is(err, http.ErrAbortHandler)
}

// Sessions is the number of live sessions.
func (f *Face) Sessions() int { return f.table.Len() }

// ServeHTTP serves one request of rq's caller (authenticated and
// origin-checked by the caller).
func (f *Face) ServeHTTP(w http.ResponseWriter, r *http.Request, rq ownmethods.Request) {
	defer func() {
		if v := recover(); v != nil && !isAbort(v) {
			f.log.Error("terminating face: handler panicked", "panic", v, "stack", string(debug.Stack()))
		}
	}()
	o := f.open(w)
	defer f.done(o)
	w = o
	sid := r.Header.Get("Mcp-Session-Id")
	switch r.Method {
	case http.MethodPost:
		f.post(w, r, rq)
	case http.MethodGet, http.MethodDelete:
		if sid == "" {
			if mcpheader.Stateless(r.Header.Get("Mcp-Protocol-Version")) {
				w.Header().Set("Allow", "POST")
				http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
			} else {
				http.Error(w, "Bad Request: Mcp-Session-Id header required", http.StatusBadRequest)
			}
			return
		}
		if r.Method == http.MethodDelete {
			if f.table.Delete(sid, rq.Tenant) != nil {
				http.Error(w, "session not found", http.StatusNotFound)
				return
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
		s, err := f.table.Get(sid, rq.Tenant)
		if err != nil {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		f.get(w, r, s)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
	}
}

// post serves a POST: to the session it names, a new session (an
// initialize of the session era), or the stateless era (a request of
// that era, or a server/discover).
func (f *Face) post(w http.ResponseWriter, r *http.Request, rq ownmethods.Request) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		http.Error(w, "Content-Type must be application/json", http.StatusUnsupportedMediaType)
		return
	}
	body, ok := httpx.ReadBody(w, r, f.o.MaxBody)
	if !ok {
		return
	}
	// The session first: what it negotiated judges a body that does not
	// say its revision.
	var s *session.Session
	negotiated := ""
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
		var err error
		if s, err = f.table.Get(sid, rq.Tenant); err != nil {
			httpx.WriteError(w, http.StatusNotFound, nil, jsonrpc.CodeInvalidRequest, "session not found")
			return
		}
		negotiated = s.Value.(*live).negotiated()
	}
	msgs, _, ok := httpx.DecodePOST(w, r, body, negotiated)
	if !ok {
		return
	}
	rq.Version = httpx.RequestVersion(r, msgs)
	if s != nil {
		rq.Session = s.ID
	}
	r, traced := traceRequest(r, rq, msgs)
	defer traced()
	switch {
	case s != nil:
		f.sessionPOST(w, r, rq, s, msgs)
	case hasMethod(msgs, "initialize") && !mcpheader.Stateless(rq.Version):
		f.initialize(w, r, rq, msgs, body)
	case mcpheader.Stateless(rq.Version) || hasMethod(msgs, "server/discover"):
		f.statelessPOST(w, r, rq, msgs, body)
	default:
		http.Error(w, "Bad Request: Mcp-Session-Id header required", http.StatusBadRequest)
	}
}

// initialize starts a session for rq's tenant, with its own upstream
// connection, and serves the POST of its initialize in it. The session's
// id goes to the client in the Mcp-Session-Id header.
func (f *Face) initialize(w http.ResponseWriter, r *http.Request, rq ownmethods.Request, msgs []*jsonrpc.Message, body []byte) {
	s, err := f.table.Create(r.Context(), rq.Tenant, f.startSession)
	if err != nil {
		f.log.Warn("starting a session failed", "err", err)
		httpx.UpstreamDown(w, body)
		return
	}
	w.Header().Set("Mcp-Session-Id", s.ID)
	rq.Session = s.ID
	for _, m := range msgs {
		if m.Method == "initialize" {
			f.o.Methods.Initialized(s.ID, m)
		}
	}
	s.OnClose(func() { f.o.Methods.Ended(s.ID) })
	f.sessionPOST(w, r, rq, s, msgs)
}

// hasMethod reports whether a message of msgs has method.
func hasMethod(msgs []*jsonrpc.Message, method string) bool {
	for _, m := range msgs {
		if m.Method == method {
			return true
		}
	}
	return false
}

// wantsSSE reports whether the client takes an event stream.
func wantsSSE(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// keepAlive ticks every KeepAlive (never when off); stop releases it.
func (f *Face) keepAlive() (tick <-chan time.Time, stop func()) {
	if f.o.KeepAlive < 0 {
		return nil, func() {}
	}
	t := time.NewTicker(f.o.KeepAlive)
	return t.C, t.Stop
}

// keepAliveEvent is the comment an idle stream gets: readers ignore it,
// load balancers see traffic.
var keepAliveEvent = sse.Event{Comments: []string{"keep-alive"}}

// openEvents answers with an event stream and returns its writer.
func openEvents(w http.ResponseWriter) *sse.Writer {
	sse.SetHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	return sse.NewWriter(w)
}

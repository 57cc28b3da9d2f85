// Package relay is the HTTP face in front of a Streamable HTTP upstream:
// it forwards each HTTP request's body and transport headers to the
// configured URL, relays each response as it came (headers, status codes,
// SSE event ids, retry hints and comments, sessions) and rewrites only the
// responses to requests the proxy owns (offloading, its own resources).
// No client credential, query or asserted identity reaches the upstream
// (see requestHeader), and an upstream's 401 (or 403 with a challenge),
// which refuses Spillway's own credentials, reaches the client as a 502
// JSON-RPC error.
//
// Each POST knows the requests it carried; their responses are rewritten
// under that POST's context, never found by id in a table shared with
// other clients. A response the upstream delivers on another stream of
// the same session (a GET after a reconnection, or SEP-1699 polling) is
// found in that session's own table, and a session answers only the
// tenant that created it.
//
// The files follow one request: relay.go (the options and which headers
// cross), forward.go (a client's POST read and sent upstream), response.go
// (the upstream's answer, a JSON body or an event stream, relayed with the
// proxy's rewrites), stallwriter.go (the write deadline toward the client),
// own.go (the requests the proxy sends upstream itself: tools/list and
// cancellations), sessions.go (what the relay remembers of a session).
package relay

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/httpx"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

// Options configure a Relay. URL and Methods are required.
type Options struct {
	URL string
	// Client is the base of the upstream client (httpx.UpstreamClient:
	// no redirect to another origin, bounded dialing); nil: the shared one.
	Client *http.Client
	// Header is added to every upstream request (the upstream's own
	// credentials); the client's Authorization is never forwarded.
	Header http.Header
	// MaxMessage caps one message (a JSON body or an SSE event) from the
	// upstream, with Spool what stays of it in memory; default 1 GiB.
	MaxMessage int64
	// Spool, when set, takes every upstream message that may be large as
	// it streams in: its long strings go to disk, and the writers to the
	// client put them back. A request's messages are read through its
	// tenant's view (spill.Spooler.For): what one tenant's messages hold
	// on disk is bounded by its share.
	Spool *spill.Spooler
	// MaxCalls caps the calls a session remembers for responses that
	// arrive on another stream; default 1024.
	MaxCalls int
	// MaxTenantCallBytes caps what one tenant's remembered calls hold,
	// across its sessions; default 16 MiB.
	MaxTenantCallBytes int
	// MaxSessions caps the upstream sessions one tenant holds through the
	// relay; past it the tenant's least recently used one is forgotten.
	// Default 1024.
	MaxSessions int
	// SessionIdle forgets a session with no request for this long (none
	// open: a held GET stream keeps it); its client gets 404 and starts
	// over. Default 1 hour.
	SessionIdle time.Duration
	Methods     *ownmethods.Methods
	// WriteTimeout cuts a client that stops reading: every write to it
	// must progress within this (one that reads slowly but steadily is
	// never cut). Its request is then cancelled upstream. Default 30 s;
	// negative: never (Close still ends every response).
	WriteTimeout time.Duration
	// StallTimeout ends an upstream's event stream that stops in the
	// middle of an event for this long (while the relay waits to read
	// it), or sends less than stall.MinProgress bytes in that long: its
	// unanswered requests get an error instead of waiting as long as
	// their clients do. Between events an upstream may be silent as long
	// as it likes. ≤ 0: never.
	StallTimeout time.Duration
	// KeepAlive is how often an idle relayed event stream gets an SSE
	// comment, so that load balancers' idle timeouts keep it. Default
	// 15 s; negative: never.
	KeepAlive time.Duration
	// OpenAfter opens the client's event stream of a stateless-era call
	// (one whose client accepts text/event-stream) when the upstream has
	// sent no response headers for this long, as the terminating face
	// does: a client's or load balancer's header timeout then never cuts
	// a long, silent call. The response then comes as events, an upstream
	// error as a JSON-RPC error. Default 1 s; negative: never.
	OpenAfter time.Duration
	// DetectLegacy, when set, is asked once the upstream refuses an
	// initialize (400, 404 or 405: the backwards-compatibility rule's
	// sign of a legacy HTTP+SSE server); true hands this request and all
	// later ones back to the caller (ServeHTTP returns true).
	DetectLegacy func(ctx context.Context) bool
	Logger       *slog.Logger
}

// Relay forwards to one HTTP upstream. Safe for concurrent use.
type Relay struct {
	o   Options
	log *slog.Logger
	now func() time.Time

	mu       sync.Mutex
	sessions map[string]*session     // the upstream's session id → who owns it
	tenants  map[string]*tenantState // tenant → its sessions and calls
	maxTotal int                     // sessions across tenants (sessions.go)
	ended    []string                // sessions forgotten, for Methods.Ended
	legacy   atomic.Bool
	direct   atomic.Bool // the upstream answers without redirecting: see send

	closing context.Context // done once Close is called: every relayed request ends
	close   context.CancelFunc
}

// Close ends every relayed request and stream, and refuses new ones
// (503), so that a server's graceful shutdown need not wait for them.
// Safe to call more than once.
func (rl *Relay) Close() {
	rl.close()
}

// Legacy reports whether the upstream turned out to speak only the legacy
// transport: the caller serves every request itself from then on.
func (rl *Relay) Legacy() bool { return rl.legacy.Load() }

// New returns a relay.
func New(o Options) *Relay {
	o.Client = httpx.UpstreamClient(o.Client)
	if o.MaxMessage <= 0 {
		o.MaxMessage = 1 << 30
	}
	if o.MaxCalls <= 0 {
		o.MaxCalls = 1024
	}
	if o.MaxTenantCallBytes <= 0 {
		o.MaxTenantCallBytes = 16 << 20
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = 1024
	}
	if o.SessionIdle <= 0 {
		o.SessionIdle = time.Hour
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = 30 * time.Second
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = 15 * time.Second
	}
	if o.OpenAfter == 0 {
		o.OpenAfter = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	closing, cancel := context.WithCancel(context.Background())
	return &Relay{o: o, log: o.Logger, now: time.Now, sessions: map[string]*session{},
		tenants: map[string]*tenantState{}, maxTotal: maxSessions, closing: closing, close: cancel}
}

// maxSessions bounds the relay's session table across tenants (each is
// also bounded by Options.MaxSessions); see bind.
const maxSessions = 100_000

// requestHeader reports whether a client's request header k reaches the
// upstream. It is an allow-list: what the transport needs (content
// negotiation, MCP's own headers, resumption) and trace context, nothing
// else. The attacker is any client: a credential of any form
// (Authorization, Cookie, X-Api-Key…) or an identity it asserts
// (Forwarded, X-Forwarded-*, X-Real-IP) must not reach an upstream that
// trusts Spillway.
// k is canonical (copyHeaders makes it so).
func requestHeader(k string) bool {
	switch k {
	case "Accept", "Accept-Language", "Content-Type", "Last-Event-Id", "User-Agent",
		"Traceparent", "Tracestate", "Baggage":
		return true
	}
	return strings.HasPrefix(k, "Mcp-")
}

// Response headers that describe one hop, or that the proxy owns.
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Proxy-Connection": true,
	"Content-Length": true, "Host": true, "Authorization": true, "Origin": true, "Referer": true,
	"Cookie": true, "Accept-Encoding": true, "Content-Encoding": true,
}

// copyHeaders copies the headers of src that keep (given a canonical
// name) lets through to dst, minus those src's Connection names (they
// describe the hop, RFC 9110 7.6.1). The values copied share one new
// array, as http.Header.Clone does, instead of an allocation per header,
// on every request and every response.
func copyHeaders(dst, src http.Header, keep func(string) bool) {
	type header struct {
		name string
		vs   []string
	}
	var small [16]header
	kept := small[:0] // the map is walked once: a second walk has another order
	conn := src["Connection"]
	n := 0
	for k, vs := range src {
		if c := http.CanonicalHeaderKey(k); keep(c) && !named(conn, c) {
			kept = append(kept, header{c, vs})
			n += len(vs)
		}
	}
	all := make([]string, n)
	for _, h := range kept {
		m := copy(all, h.vs)
		dst[h.name], all = all[:m:m], all[m:]
	}
}

// named reports whether the Connection header values conn name the
// header k. Names compare without regard to case, as header names do.
func named(conn []string, k string) bool {
	for _, v := range conn {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), k) {
				return true
			}
		}
	}
	return false
}

func responseHeader(k string) bool { return !hopHeaders[k] }

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
package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillway-dev/spillway/artifact/httpsafe"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/offload"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/httpx"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/mcpheader"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/sse"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/stall"
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

// ServeHTTP relays one request of rq's caller (already authenticated and
// origin-checked by the caller). It returns true, having written nothing
// and put the body back, when the upstream turned out to be legacy-only
// (see Options.DetectLegacy).
func (rl *Relay) ServeHTTP(w http.ResponseWriter, r *http.Request, rq ownmethods.Request, maxBody int64) (legacy bool) {
	// The upstream request ends with the client's, with Close, and when
	// the client is cut for not reading.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if rl.closing.Err() != nil {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return false
	}
	// The response's writer also carries Close to the request: one hook
	// on rl.closing per request, not two.
	out := newStallWriter(ctx, rl.closing, cancel, w, rl.o.WriteTimeout)
	defer out.done()
	sid := r.Header.Get("Mcp-Session-Id")
	rq.Session = sid
	var sess *session
	defer rl.tellEnded()
	if sid != "" {
		if sess = rl.lookup(sid, rq.Tenant); sess == nil {
			// Unknown to this proxy, forgotten, or another tenant's: the
			// same answer, and the one that makes a client start a new
			// session.
			httpx.WriteError(w, http.StatusNotFound, nil, jsonrpc.CodeInvalidRequest, "session not found")
			return false
		}
		defer rl.release(sess)
	}
	var ex exchange
	if r.Method == http.MethodPost {
		var ok bool
		if ex, rq.Version, ok = rl.readPOST(ctx, w, r, rq, sess, maxBody); !ok {
			return false
		}
	}
	return rl.forward(ctx, cancel, w, r, out, rq, sess, &ex)
}

// exchange is what the relay learned of a client's POST before
// forwarding it; for another method it is empty.
type exchange struct {
	body    []byte
	init    *jsonrpc.Message // the POST's initialize, if it has one
	pending [][]byte         // the POST's requests not yet answered
	open    map[string]owed  // the same, by jsonrpc.Key
	owns    bool             // the proxy rewrites the answer to one of them
}

// readPOST reads and decodes a client's POST to session sess (nil: none)
// and shows each of its requests to the proxy's own methods, noting those
// whose answers they rewrite. It returns the revision the POST speaks.
// ok is false when it answered the POST itself: a body it refused, a
// request the proxy answers (outside a batch), a resources/stream it
// served.
func (rl *Relay) readPOST(ctx context.Context, w http.ResponseWriter, r *http.Request, rq ownmethods.Request,
	sess *session, maxBody int64) (ex exchange, version string, ok bool) {
	negotiated := ""
	if sess != nil {
		negotiated = rl.negotiated(sess)
	}
	if ex.body, ok = httpx.ReadBody(w, r, maxBody); !ok {
		return ex, "", false
	}
	msgs, batch, ok := httpx.DecodePOST(w, r, ex.body, negotiated)
	if !ok {
		return ex, "", false
	}
	rq.Version = httpx.RequestVersion(r, msgs)
	if !batch && msgs[0].Method == "resources/stream" {
		if rl.o.Methods.ServeStream(w, r, rq, msgs[0], rl.o.Methods.StreamCaps(rq, msgs[0])) {
			return ex, "", false
		}
	}
	// Each request's key is made once, here.
	for _, m := range msgs {
		if m.Method == "initialize" {
			ex.init = m
		}
		if !m.IsRequest() {
			continue
		}
		reply, c := rl.o.Methods.Before(ctx, rq, m)
		if reply != nil && !batch {
			httpx.WriteReply(w, rq.Version, reply)
			return ex, "", false
		}
		if c != nil && m.Method == "tools/call" {
			c.List = rl.listTools(rq.Session, rq.Version, m)
		}
		// A batch is forwarded whole; the proxy's own answers would
		// have to be merged into the upstream's, so in a batch only
		// rewriting applies.
		ex.owns = ex.owns || c != nil
		ex.pending = append(ex.pending, m.ID)
		if ex.open == nil {
			ex.open = make(map[string]owed, len(msgs))
		}
		ex.open[jsonrpc.Key(m.ID)] = owed{id: m.ID, call: c}
	}
	if sess != nil && ex.owns {
		rl.remember(sess, ex.open)
	}
	return ex, rq.Version, true
}

// forward sends the client's request upstream and relays the answer, as
// it came but for the responses the proxy rewrites. It returns true,
// having written nothing, when the upstream turned out to be legacy-only.
func (rl *Relay) forward(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, r *http.Request,
	out *stallWriter, rq ownmethods.Request, sess *session, ex *exchange) (legacy bool) {
	req, err := rl.upstreamRequest(ctx, r, ex.body)
	if err != nil {
		http.Error(w, "bad upstream URL", http.StatusInternalServerError)
		return false
	}
	out.arm()
	early := r.Method == http.MethodPost && rq.Session == "" && ex.init == nil && len(ex.pending) > 0 &&
		mcpheader.Stateless(rq.Version) && strings.Contains(r.Header.Get("Accept"), "text/event-stream")
	resp, opened, err := rl.roundTrip(ctx, cancel, w, out, req, early)
	if opened != nil {
		defer opened.stop()
		rw := &rewriter{rl: rl, ctx: ctx, open: ex.open, sess: sess, echo: respellable(ex.pending), spool: rl.spoolFor(rq.Tenant)}
		rl.relayLate(ctx, opened, resp, err, rw, ex.pending)
		rl.cutIfStalled(out, rq.Session, r, ex.pending)
		return false
	}
	if err != nil {
		if ctx.Err() == nil {
			rl.logUnreachable(err)
			httpx.UpstreamDown(w, ex.body)
		}
		return false
	}
	defer resp.Body.Close()
	if rl.turnedLegacy(ctx, r, resp, ex) {
		return true
	}
	bound := rl.noteSession(r, rq, resp, ex.init)
	if refusesSpillway(resp) {
		// The client's credentials never reach the upstream, so this
		// refusal (or a 403 asking for more scopes) is of Spillway's:
		// relayed as is, with WWW-Authenticate, it would send the client
		// into an OAuth flow against the wrong server, for ever.
		rl.logRefused(resp)
		httpx.UpstreamError(w, ex.body, errRefused)
		return false
	}
	copyHeaders(w.Header(), resp.Header, responseHeader)
	rw := &rewriter{rl: rl, ctx: ctx, open: ex.open, sess: sess, echo: respellable(ex.pending), spool: rl.spoolFor(rq.Tenant), bound: bound}
	rl.relayResponse(ctx, cancel, w, out, resp, rw, ex)
	rl.cutIfStalled(out, rq.Session, r, ex.pending)
	return false
}

// upstreamRequest is the client's request r as it goes upstream, with
// body. The configured URL reaches the upstream whole (its query may
// carry the upstream's key); the client's query is not forwarded (it may
// carry the client's token). Of the client's headers only the transport's
// pass (requestHeader); the configured ones are added.
func (rl *Relay) upstreamRequest(ctx context.Context, r *http.Request, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, r.Method, rl.o.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	copyHeaders(req.Header, r.Header, requestHeader)
	for k, vs := range rl.o.Header {
		req.Header[k] = vs
	}
	return req, nil
}

// turnedLegacy reports whether the upstream refused the POST's initialize
// as a legacy HTTP+SSE server does (400, 404 or 405) and DetectLegacy
// confirms it. The relay then hands this request, its body put back, and
// every later one to the caller.
func (rl *Relay) turnedLegacy(ctx context.Context, r *http.Request, resp *http.Response, ex *exchange) bool {
	if ex.init == nil || rl.o.DetectLegacy == nil {
		return false
	}
	switch resp.StatusCode {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed:
	default:
		return false
	}
	if !rl.o.DetectLegacy(ctx) {
		return false
	}
	rl.log.Info("the upstream speaks the legacy HTTP+SSE transport; terminating the protocol for it")
	rl.legacy.Store(true)
	r.Body = io.NopCloser(bytes.NewReader(ex.body))
	return true
}

// noteSession binds a session the upstream created in answer to a
// request without one to rq's tenant, the only one it answers from now
// on, and forgets a session a DELETE ended. It returns the session bound
// ("" for none).
func (rl *Relay) noteSession(r *http.Request, rq ownmethods.Request, resp *http.Response, init *jsonrpc.Message) (bound string) {
	if up := resp.Header.Get("Mcp-Session-Id"); up != "" && rq.Session == "" && resp.StatusCode < 300 {
		rl.bind(up, rq.Tenant)
		bound = up
		if init != nil {
			rl.o.Methods.Initialized(up, init)
		}
	}
	if r.Method == http.MethodDelete && rq.Session != "" && resp.StatusCode < 300 {
		rl.forgetSession(rq.Session)
	}
	return bound
}

// relayResponse relays resp by its type: an event stream event by event;
// a JSON body the relay must read (an answer it rewrites, a session's, an
// id to respell) rewritten; anything else as it came.
func (rl *Relay) relayResponse(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, out *stallWriter,
	resp *http.Response, rw *rewriter, ex *exchange) {
	ct := resp.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "text/event-stream"):
		rl.relaySSE(ctx, cancel, w, out, resp, rw)
	case strings.HasPrefix(ct, "application/json") && (ex.owns || rw.sess != nil || len(rw.echo) > 0):
		rl.relayJSON(w, out, resp, rw, ex.body)
	default:
		w.WriteHeader(resp.StatusCode)
		io.Copy(out, resp.Body)
	}
}

// refusesSpillway reports whether resp refuses Spillway's credentials: a
// 401, or a 403 with a challenge (more scopes). The client's credentials
// never reach the upstream, so the refusal is not the client's.
func refusesSpillway(resp *http.Response) bool {
	return resp.StatusCode == http.StatusUnauthorized ||
		(resp.StatusCode == http.StatusForbidden && resp.Header.Get("WWW-Authenticate") != "")
}

// logRefused logs that the upstream refused Spillway's credentials.
func (rl *Relay) logRefused(resp *http.Response) {
	rl.log.Warn("the upstream refused Spillway's credentials; check --upstream-header", "status", resp.StatusCode, "url", httpx.RedactURL(rl.o.URL))
}

// logUnreachable logs err, from the upstream client, without credentials.
func (rl *Relay) logUnreachable(err error) {
	rl.log.Warn("upstream unreachable", "url", httpx.RedactURL(rl.o.URL), "err", httpx.RedactError(err))
}

// errRefused is what a client is told when the upstream refuses
// Spillway's credentials.
const errRefused = "the upstream MCP server refused Spillway's credentials"

// roundTrip sends req upstream. When early, and the upstream sends no
// headers within Options.OpenAfter, the client's event stream opens
// first (200, SSE headers, keep-alive comments) and is returned: the
// response, or the error, must then go to it as events (relayLate).
func (rl *Relay) roundTrip(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, out *stallWriter,
	req *http.Request, early bool) (*http.Response, *stream, error) {
	if !early || rl.o.OpenAfter < 0 {
		resp, err := rl.send(req)
		return resp, nil, err
	}
	type result struct {
		resp *http.Response
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		resp, err := rl.send(req)
		ch <- result{resp, err}
	}()
	t := time.NewTimer(rl.o.OpenAfter)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.resp, nil, r.err
	case <-t.C:
	}
	sse.SetHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	// Final: the upstream replays a stream, never this process.
	sw := sse.NewWriter(out).Final()
	sw.Flush() // a client gone ends ctx, and with it the upstream request
	st := rl.newStream(ctx, cancel, sw, 0)
	r := <-ch
	return r.resp, st, r.err
}

// send sends req upstream as the configured client would, and without
// its cost per request where it adds nothing: http.Client.Do clones each
// request's headers and URL for the redirects it may follow (about a
// kilobyte and five allocations per call). Through the client when it
// has a cookie jar or a timeout, and until one of its answers came
// without a redirect; from then on through its transport alone. A
// redirect met there (an upstream that starts redirecting) is followed
// by sending the request again through the client, whose policy applies
// (the redirect was not processed upstream), and the client is used
// again until the next answer without one.
func (rl *Relay) send(req *http.Request) (*http.Response, error) {
	c := rl.o.Client
	if c.Jar != nil || c.Timeout != 0 || !rl.direct.Load() || req.GetBody == nil {
		resp, err := c.Do(req)
		if err == nil && c.Jar == nil && c.Timeout == 0 && resp.Request.URL.String() == req.URL.String() {
			rl.direct.Store(true) // answered where it was sent
		}
		return resp, err
	}
	resp, err := c.Transport.RoundTrip(req)
	if err != nil {
		return nil, &url.Error{Op: req.Method[:1] + strings.ToLower(req.Method[1:]), URL: req.URL.Redacted(), Err: err}
	}
	if !followed(resp) {
		return resp, nil
	}
	rl.direct.Store(false)
	resp.Body.Close()
	again := req.Clone(req.Context()) // the transport changed neither headers nor URL
	if again.Body, err = req.GetBody(); err != nil {
		return nil, err
	}
	return c.Do(again)
}

// followed reports whether http.Client follows resp: a redirect status
// with a Location.
func followed(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return resp.Header.Get("Location") != ""
	}
	return false
}

// relayLate writes the upstream's answer to a stream that opened before
// it (roundTrip): events as they come, a JSON body as events, and for
// anything else a JSON-RPC error for each request still owed (the HTTP
// status is spent).
func (rl *Relay) relayLate(ctx context.Context, st *stream, resp *http.Response, err error, rw *rewriter, pending [][]byte) {
	why := "upstream MCP server unreachable"
	switch {
	case err != nil:
		if ctx.Err() != nil {
			return
		}
		rl.logUnreachable(err)
	case resp.StatusCode < 300 && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"):
		defer resp.Body.Close()
		rl.relayEvents(ctx, st, resp, rw)
		return
	case refusesSpillway(resp):
		resp.Body.Close()
		rl.logRefused(resp)
		why = errRefused
	default:
		defer resp.Body.Close()
		why = fmt.Sprintf("upstream MCP server answered HTTP %d", resp.StatusCode)
		guard := stall.Message(resp.Body, rl.o.StallTimeout, resp.ContentLength)
		defer guard.Stop()
		body, err := httpx.ReadMessage(guard, resp.ContentLength, rl.o.MaxMessage, rw.spool)
		if s := guard.Why("answer"); s != "" {
			why = s
		}
		msgs, _, derr := jsonrpc.Decode(body)
		if err != nil || derr != nil {
			break
		}
		for _, m := range msgs {
			if st.write(sse.Event{HasData: true, Data: rw.rewrite(m).Raw}) != nil {
				return
			}
		}
	}
	for _, id := range pending {
		if _, owed := rw.open[jsonrpc.Key(id)]; !owed {
			continue // answered above
		}
		if st.write(sse.Event{HasData: true, Data: jsonrpc.ErrorResponse(id, jsonrpc.CodeUpstream, why).Raw}) != nil {
			return
		}
	}
}

// cutIfStalled cancels upstream the requests of a client cut for not
// reading (its upstream request ends with ServeHTTP; in a session the
// upstream is also told, see cancelUpstream).
func (rl *Relay) cutIfStalled(out *stallWriter, sid string, r *http.Request, pending [][]byte) {
	if !out.stalled() {
		return
	}
	rl.log.Warn("a client stopped reading its response; cut, and its requests cancelled upstream", "unanswered", len(pending))
	if sid != "" {
		go rl.cancelUpstream(sid, r.Header.Get("Mcp-Protocol-Version"), pending)
	}
}

// tellEnded tells Methods of the sessions the relay forgot.
func (rl *Relay) tellEnded() {
	for _, sid := range rl.endedSessions() {
		rl.o.Methods.Ended(sid)
	}
}

// rewriter rewrites the responses of one relayed HTTP exchange.
type rewriter struct {
	rl   *Relay
	ctx  context.Context
	open map[string]owed // the exchange's requests not yet answered, by jsonrpc.Key
	sess *session
	echo map[string][]byte // jsonrpc.Key → the client's bytes, for ids an upstream may respell
	// spool reads the exchange's upstream messages, for its tenant (nil: none).
	spool sse.Spooler
	// bound is the session the exchange's initialize created: its answer
	// settles the session's revision.
	bound string
}

// spoolFor returns the Spooler of tenant's messages, nil without one.
func (rl *Relay) spoolFor(tenant string) sse.Spooler {
	if rl.o.Spool == nil {
		return nil // not a nil *spill.Spooler in the interface
	}
	return rl.o.Spool.For(tenant)
}

// owed is a request of the exchange not yet answered: its id as the
// client sent it, and the proxy's own call when it rewrites the answer
// (nil: passed as it comes).
type owed struct {
	id   []byte
	call *ownmethods.Call
}

// respellable maps the ids among ids that an upstream may write with other
// bytes (1.0 as 1) to the bytes the client sent; nil when there are none.
func respellable(ids [][]byte) map[string][]byte {
	var out map[string][]byte
	for _, id := range ids {
		if jsonrpc.Respellable(id) {
			if out == nil {
				out = map[string][]byte{}
			}
			out[jsonrpc.Key(id)] = id
		}
	}
	return out
}

// rewrite returns m as the client gets it. A response is also struck
// from the requests not yet answered.
func (rw *rewriter) rewrite(m *jsonrpc.Message) *jsonrpc.Message {
	if !m.IsResponse() {
		return m
	}
	k := jsonrpc.Key(m.ID) // once per response: every table below is by key
	c := rw.open[k].call
	delete(rw.open, k)
	if id, ok := rw.echo[k]; ok && !bytes.Equal(id, m.ID) {
		m = m.WithID(id) // the client gets the id it sent, not the upstream's spelling
	}
	// This POST's own call first: the session's table (under the relay's
	// lock) is asked only when the POST has none for the response.
	if c == nil && rw.sess != nil {
		c = rw.rl.call(rw.sess, k) // wherever it arrives
	}
	if c == nil {
		return m
	}
	if v := httpx.Negotiated(m); c.Method == "initialize" && rw.bound != "" && v != "" {
		rw.rl.settle(rw.bound, v)
	}
	return rw.rl.o.Methods.After(rw.ctx, c, m)
}

// relayJSON rewrites a JSON response body. Headers go to w, the body to
// out. A body that cannot be read answers each request of req (the
// client's POST) with a JSON-RPC error saying why, as an event would be.
func (rl *Relay) relayJSON(w http.ResponseWriter, out io.Writer, resp *http.Response, rw *rewriter, req []byte) {
	guard := stall.Message(resp.Body, rl.o.StallTimeout, resp.ContentLength)
	defer guard.Stop()
	body, err := httpx.ReadMessage(guard, resp.ContentLength, rl.o.MaxMessage, rw.spool)
	if err != nil {
		rl.log.Warn("reading the upstream response failed", "err", err)
		why := "upstream response unreadable"
		switch {
		case guard.Why("answer") != "":
			why = guard.Why("answer")
		case errors.Is(err, spill.ErrFull):
			why = "no room to hold the upstream's answer now; try again later"
		case errors.Is(err, spill.ErrTooLarge) || errors.Is(err, httpx.ErrTooLarge):
			why = fmt.Sprintf("upstream message exceeds the %d byte limit", rl.o.MaxMessage)
		}
		httpx.UpstreamError(w, req, why)
		return
	}
	msgs, batch, err := jsonrpc.Decode(body)
	if err != nil {
		w.WriteHeader(resp.StatusCode) // not JSON-RPC: not ours to judge
		out.Write(body)
		return
	}
	status := resp.StatusCode
	msgsOut := make([][]byte, 0, len(msgs))
	for _, m := range msgs {
		n := rw.rewrite(m)
		if n != m && m.Error != nil && n.Error == nil && status >= 400 {
			status = http.StatusOK // the proxy answered what the upstream could not
		}
		msgsOut = append(msgsOut, n.Raw)
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	httpx.WriteMessages(out, msgsOut, batch)
}

// relaySSE relays an event stream event by event, as it came: ids, names,
// retry hints, comments, id-only events; only responses to owned calls
// are rewritten. An event over the message cap is replaced by an error
// response for the request it answered, when its id can be found.
//
// If the stream breaks, or ends without an event id to resume from, while
// requests of this POST are unanswered (open), each of them gets an
// error: no client waits for ever (the stdio face does the same).
//
// Headers go to w at once; events go to out. A stream with nothing to
// send for Options.KeepAlive gets a comment; a client that cannot take
// one is cut (cancel).
func (rl *Relay) relaySSE(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, out *stallWriter,
	resp *http.Response, rw *rewriter) {
	sw := sse.NewWriter(out).Final() // the upstream replays a stream, never this process
	w.WriteHeader(resp.StatusCode)
	// The headers go out with the first event, in one write, as a reverse
	// proxy sends them; an upstream slow to send one has its headers
	// relayed after headerWait (a client may wait for them before it sends
	// its next message).
	st := rl.newStream(ctx, cancel, sw, headerWait)
	defer st.stop()
	rl.relayEvents(ctx, st, resp, rw)
}

// headerWait is how long a response's headers wait for its first event.
const headerWait = 2 * time.Millisecond

// stream is a client's event stream with its keep-alive. One timer per
// stream serves both the headers' wait and the keep-alive (most streams
// end long before either is due, and a timer is cheaper than a goroutine).
type stream struct {
	sw     *sse.Writer
	busy   atomic.Bool // an event went out since the last tick
	ctx    context.Context
	cancel context.CancelFunc
	every  time.Duration // the keep-alive; <= 0: none

	mu      sync.Mutex // held by a tick while it writes: stop waits for it
	t       *time.Timer
	waiting bool // the first tick flushes the headers instead (see newStream)
	stopped bool
}

// write writes ev to the client.
func (st *stream) write(ev sse.Event) error {
	st.busy.Store(true)
	return st.sw.Write(ev)
}

// writeRaw writes events as an sse.Reader read them (sse.Reader.Raw).
func (st *stream) writeRaw(b []byte) error {
	st.busy.Store(true)
	return st.sw.WriteRaw(b)
}

// newStream returns sw as a stream that gets an SSE comment every
// Options.KeepAlive in which nothing else went out; a client that cannot
// take one is cut (cancel). When headers > 0, the response's headers
// (written, not yet sent) are flushed after that long unless an event
// took them first.
func (rl *Relay) newStream(ctx context.Context, cancel context.CancelFunc, sw *sse.Writer, headers time.Duration) *stream {
	st := &stream{sw: sw, ctx: ctx, cancel: cancel, every: rl.o.KeepAlive, waiting: headers > 0}
	first := headers
	if first <= 0 {
		first = st.every
	}
	if first <= 0 {
		return st
	}
	st.mu.Lock() // a tick waits until t is set
	defer st.mu.Unlock()
	st.t = time.AfterFunc(first, st.tick)
	return st
}

func (st *stream) tick() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.stopped || st.ctx.Err() != nil {
		return
	}
	busy := st.busy.Swap(false)
	switch {
	case st.waiting:
		st.waiting = false
		if !busy {
			st.sw.Flush() // the headers; a client gone ends ctx
		}
	case !busy && st.sw.Write(sse.Event{Comments: []string{"keep-alive"}}) != nil:
		st.cancel()
		return
	}
	if st.every > 0 {
		st.t.Reset(st.every)
	}
}

// stop ends the stream's timer, waiting for a tick under way: nothing
// touches the response once the handler returned.
func (st *stream) stop() {
	if st.t == nil {
		return
	}
	st.mu.Lock()
	st.stopped = true
	st.t.Stop()
	st.mu.Unlock()
}

// relayEvents relays resp's events to st (see relaySSE).
func (rl *Relay) relayEvents(ctx context.Context, st *stream, resp *http.Response, rw *rewriter) {
	guard := stall.Events(resp.Body, rl.o.StallTimeout)
	defer guard.Stop()
	sr := sse.NewReader(guard, rl.o.MaxMessage)
	defer sr.Release()
	if rw.spool != nil {
		sr.Spool(rw.spool)
	}
	resumable := false
	for {
		ev, err := sr.Next()
		if tooLarge := tooLargeOf(err); tooLarge != nil {
			if rl.dropTooLarge(st, rw.open, tooLarge) != nil {
				return
			}
			continue
		}
		if err != nil {
			if ctx.Err() != nil || len(rw.open) == 0 || (errors.Is(err, io.EOF) && resumable) {
				return
			}
			rl.failUnanswered(st, rw.open, err, guard.Why("stream"))
			return
		}
		resumable = resumable || (ev.HasID && ev.ID != "")
		if relayEvent(st, sr, ev, rw) != nil {
			return // the client went away or stalled; closing resp.Body tells the upstream
		}
	}
}

// relayEvent writes ev, the event sr read last, to the client: as it
// came, unless its data is a response the proxy rewrites or a line of it
// ends with CR. Those are written again, with LF, which every client
// splits lines on (TestRelayIsExact).
func relayEvent(st *stream, sr *sse.Reader, ev sse.Event, rw *rewriter) error {
	raw := sr.Raw()
	if bytes.IndexByte(raw, '\r') >= 0 {
		raw = nil
	}
	if ev.HasData && len(ev.Data) > 0 {
		if m, err := jsonrpc.DecodeMessage(ev.Data); err == nil {
			if n := rw.rewrite(m); n != m {
				ev.Data, raw = n.Raw, nil
			}
		}
	}
	if raw != nil {
		return st.writeRaw(raw)
	}
	return st.write(ev)
}

// dropTooLarge drops an upstream event over the message cap (logged).
// When it holds a response, the client gets in its place an error saying
// why, under the id the client spelt when the request is the exchange's,
// which is then answered.
func (rl *Relay) dropTooLarge(st *stream, open map[string]owed, tooLarge *sse.TooLargeError) error {
	g := jsonrpc.Peek(tooLarge.Head, tooLarge.Tail)
	id := g.ID
	rl.log.Warn("upstream event dropped", "limit", tooLarge.Limit, "bytes", tooLarge.Size, "id", string(id), "err", tooLarge.Err)
	if id == nil || !g.Response {
		return nil
	}
	if o, ok := open[jsonrpc.Key(id)]; ok {
		id = o.id // as the client spelt it
	}
	delete(open, jsonrpc.Key(id))
	why := fmt.Sprintf("upstream message exceeds the %d byte limit", tooLarge.Limit)
	if tooLarge.Err != nil {
		why = fmt.Sprintf("upstream message of %d bytes dropped: it is not one JSON value, or there is no room to hold it", tooLarge.Size)
	}
	return st.write(sse.Event{ID: tooLarge.ID, HasID: tooLarge.HasID, HasData: true,
		Data: jsonrpc.ErrorResponse(id, jsonrpc.CodeUpstream, why).Raw})
}

// failUnanswered answers each request of open with an error: the
// upstream's stream broke (err), or stalled (stalled says how), before
// their responses came, and no client may wait for ever.
func (rl *Relay) failUnanswered(st *stream, open map[string]owed, err error, stalled string) {
	why := "upstream MCP server ended the stream without answering"
	if stalled != "" {
		why = stalled
	}
	rl.log.Warn("upstream event stream ended before answering", "err", err, "unanswered", len(open), "why", why)
	for _, o := range open {
		if st.write(sse.Event{HasData: true, Data: jsonrpc.ErrorResponse(o.id, jsonrpc.CodeUpstream, why).Raw}) != nil {
			return
		}
	}
}

// tooLargeOf returns the *sse.TooLargeError err is or wraps, or nil. The
// common ends of a stream (none, io.EOF) and a bare *TooLargeError are
// told without errors.As, whose target escapes: an allocation per event.
func tooLargeOf(err error) *sse.TooLargeError {
	if err == nil || errors.Is(err, io.EOF) {
		return nil
	}
	if tl, ok := errors.AsType[*sse.TooLargeError](err); ok {
		return tl
	}
	var tl *sse.TooLargeError
	if errors.As(err, &tl) {
		return tl
	}
	return nil
}

// stallWriter writes a response body under a write deadline that extends
// on progress (httpsafe.WriteWithin): a client that stops reading fails
// the write after timeout, one that reads slowly never does. It keeps
// the first error. Once ctx is done every later write fails. Not safe
// for concurrent use (sse.Writer serialises).
type stallWriter struct {
	ctx     context.Context
	w       http.ResponseWriter
	ctl     http.ResponseController // by value: one allocation less per request
	timeout time.Duration
	err     error
	stop    func() bool
	closing context.Context
	armed   atomic.Bool // Close cuts a write to the client (see arm)
	used    bool        // written or flushed: done has something to finish
	dirty   bool        // written since the last flush
	until   time.Time   // the write deadline last set; zero: none
}

// stalled reports whether the client was cut for not reading (rather
// than gone, or ended by Close).
func (s *stallWriter) stalled() bool {
	return errors.Is(s.err, os.ErrDeadlineExceeded) && s.closing.Err() == nil
}

// newStallWriter returns a stallWriter to w. ctx is the request's; once
// closing is done, cancel is called (it ends ctx) and, once armed, a
// write blocked on the client fails at once.
func newStallWriter(ctx, closing context.Context, cancel context.CancelFunc, w http.ResponseWriter, timeout time.Duration) *stallWriter {
	s := &stallWriter{ctx: ctx, closing: closing, w: w, ctl: *http.NewResponseController(w), timeout: timeout}
	s.stop = context.AfterFunc(closing, func() {
		cancel()
		if s.armed.Load() {
			s.ctl.SetWriteDeadline(time.Now())
		}
	})
	return s
}

// arm makes Close cut writes to the client from now on: the relayed
// response's, not the ones the handler makes before it (an error, the
// proxy's own answer, another face's response).
func (s *stallWriter) arm() {
	s.armed.Store(true)
	if s.closing.Err() != nil { // Close came first: its hook may have passed
		s.ctl.SetWriteDeadline(time.Now())
	}
}

// deadlineSlack is how close to the deadline in force a new one may be
// and not be set: an event's write and its flush, microseconds apart,
// share one (each SetWriteDeadline takes the connection's lock and moves
// a runtime timer). A client is cut at most this much before timeout.
const deadlineSlack = time.Millisecond

func (s *stallWriter) deadline(t time.Time) error {
	if err := s.ctx.Err(); err != nil && !t.IsZero() {
		return err
	}
	if d := t.Sub(s.until); !t.IsZero() && !s.until.IsZero() && d < deadlineSlack && d > -deadlineSlack {
		return nil
	}
	err := s.ctl.SetWriteDeadline(t)
	if errors.Is(err, http.ErrNotSupported) {
		return nil
	}
	if err == nil {
		s.until = t
	}
	return err
}

func (s *stallWriter) keep(err error) error {
	if s.err == nil {
		s.err = err
	}
	return err
}

func (s *stallWriter) Write(p []byte) (int, error) {
	s.used, s.dirty = true, true
	if s.timeout < 0 {
		if err := s.ctx.Err(); err != nil {
			return 0, s.keep(err)
		}
		n, err := s.w.Write(p)
		return n, s.keep(err)
	}
	n, err := httpsafe.WriteWithin(s.w, p, s.timeout, s.deadline)
	return n, s.keep(err)
}

// Flush sends what is buffered, under the deadline.
func (s *stallWriter) Flush() error {
	s.used = true
	if s.timeout >= 0 {
		if err := s.deadline(time.Now().Add(s.timeout)); err != nil {
			return s.keep(err)
		}
	}
	if err := s.ctl.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return s.keep(err)
	}
	s.dirty = false
	return nil
}

// done flushes under the deadline what was written since the last flush,
// then clears the deadline: the connection may serve further requests,
// which must not inherit it. Unused, it does nothing (the response may be
// another face's, see Options.DetectLegacy).
func (s *stallWriter) done() {
	if !s.stop() || !s.used || s.ctx.Err() != nil {
		return
	}
	if s.dirty && s.Flush() != nil {
		return
	}
	s.deadline(time.Time{})
}

// cancelUpstream tells the upstream session sid that the requests ids,
// whose client was cut, are cancelled: in the session era a closed
// stream is not a cancellation (the client could resume it), so the
// upstream would otherwise run them to the end.
func (rl *Relay) cancelUpstream(sid, version string, ids [][]byte) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, id := range ids {
		body := []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + string(id) +
			`,"reason":"the client stopped reading its response"}}`)
		req, err := rl.ownRequest(ctx, body, sid, version)
		if err != nil {
			return
		}
		resp, err := rl.o.Client.Do(req)
		if err != nil {
			rl.log.Warn("cancelling a request upstream failed", "err", httpx.RedactError(err))
			return
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}
}

// ownRequest is a POST of the proxy's own message body to the upstream,
// in session sid and revision version (each "" for none). It carries the
// configured headers alone, never a client's credentials, and accepts
// JSON or an event stream.
func (rl *Relay) ownRequest(ctx context.Context, body []byte, sid, version string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rl.o.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, vs := range rl.o.Header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	if version != "" {
		req.Header.Set(mcpheader.ProtocolVersion, version)
	}
	return req, nil
}

// maxList caps one page of the proxy's own tools/list, as inMemory caps
// a client's.
const maxList = 64 << 20

// listTools returns how to list the upstream's tools for the caller of m,
// a tools/call in session sid ("" in the stateless era, whose envelope it
// carries instead) of revision version: a POST of the proxy's own
// tools/list per page (ownRequest), its answer read as JSON or as an
// event stream.
func (rl *Relay) listTools(sid, version string, m *jsonrpc.Message) offload.ListFunc {
	var meta []byte
	if sid == "" {
		meta = ownmethods.Envelope(m)
	}
	return func(ctx context.Context, cursor string) ([]byte, error) {
		lm := ownmethods.ListRequest(meta, cursor)
		req, err := rl.ownRequest(ctx, lm.Raw, sid, version)
		if err != nil {
			return nil, err
		}
		if mcpheader.Stateless(version) {
			req.Header.Set(mcpheader.Method, "tools/list")
		}
		resp, err := rl.send(req)
		if err != nil {
			return nil, fmt.Errorf("tools/list: %w", httpx.RedactError(err))
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("tools/list: the upstream answered %s", resp.Status)
		}
		return listResult(resp, lm.ID)
	}
}

// listResult reads the answer to the proxy's tools/list id from resp, a
// JSON body or an event stream, and returns a copy of its result; an
// error answer is an error.
func listResult(resp *http.Response, id []byte) ([]byte, error) {
	var r *jsonrpc.Message
	var err error
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		rd := sse.NewReader(resp.Body, maxList)
		defer rd.Release()
		r, err = listEvent(rd, id)
	} else {
		r, err = listJSON(resp.Body)
	}
	if err != nil {
		return nil, fmt.Errorf("tools/list: %w", err)
	}
	if r.Error != nil {
		return nil, fmt.Errorf("tools/list: the upstream answered error %d", r.ErrorCode())
	}
	return bytes.Clone(r.Result), nil // the reader's buffer goes back to its pool
}

// listEvent reads events until the response to id.
func listEvent(rd *sse.Reader, id []byte) (*jsonrpc.Message, error) {
	for {
		ev, err := rd.Next()
		if err != nil {
			return nil, err
		}
		if m, err := jsonrpc.DecodeMessage(ev.Data); err == nil && m.IsResponse() && bytes.Equal(m.ID, id) {
			return m, nil
		}
	}
}

// listJSON reads a JSON body of one message, within maxList.
func listJSON(body io.Reader) (*jsonrpc.Message, error) {
	b, err := io.ReadAll(io.LimitReader(body, maxList+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxList {
		return nil, fmt.Errorf("the answer is over %d bytes", maxList)
	}
	return jsonrpc.DecodeMessage(b)
}

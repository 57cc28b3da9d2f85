package relay

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spillway-dev/spillway/artifact/tracing"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/httpx"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/mcpheader"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/sse"
)

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
		ctx, ex, rq.Version, ok = rl.readPOST(ctx, w, r, rq, sess, maxBody)
		defer ex.span.End(nil) // nil (not traced) does nothing
		if !ok {
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
	// traced is the POST's one request when it has a server span, span
	// (tracing.go); nil for none.
	traced *jsonrpc.Message
	span   *tracing.Span
}

// readPOST reads and decodes a client's POST to session sess (nil: none)
// and shows each of its requests to the proxy's own methods, noting those
// whose answers they rewrite. It returns the revision the POST speaks.
// ok is false when it answered the POST itself: a body it refused, a
// request the proxy answers (outside a batch), a resources/stream it
// served. The context returned carries the POST's server span (see
// traceRequest), which the caller ends.
func (rl *Relay) readPOST(ctx context.Context, w http.ResponseWriter, r *http.Request, rq ownmethods.Request,
	sess *session, maxBody int64) (_ context.Context, ex exchange, version string, ok bool) {
	negotiated := ""
	if sess != nil {
		negotiated = rl.negotiated(sess)
	}
	if ex.body, ok = httpx.ReadBody(w, r, maxBody); !ok {
		return ctx, ex, "", false
	}
	msgs, batch, ok := httpx.DecodePOST(w, r, ex.body, negotiated)
	if !ok {
		return ctx, ex, "", false
	}
	rq.Version = httpx.RequestVersion(r, msgs)
	ctx = traceRequest(ctx, r, rq, msgs, batch, &ex)
	if !batch && msgs[0].Method == "resources/stream" {
		if ex.span != nil {
			r = r.WithContext(ctx) // the fetch's spans go under the request's
		}
		if rl.o.Methods.ServeStream(w, r, rq, msgs[0], rl.o.Methods.StreamCaps(rq, msgs[0])) {
			return ctx, ex, "", false
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
			return ctx, ex, "", false
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
	return ctx, ex, rq.Version, true
}

// forward sends the client's request upstream and relays the answer, as
// it came but for the responses the proxy rewrites. It returns true,
// having written nothing, when the upstream turned out to be legacy-only.
func (rl *Relay) forward(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, r *http.Request,
	out *stallWriter, rq ownmethods.Request, sess *session, ex *exchange) (legacy bool) {
	uctx, up, body := traceUpstream(ctx, rq, ex)
	req, err := rl.upstreamRequest(uctx, r, body)
	if err != nil {
		up.End(nil)
		http.Error(w, "bad upstream URL", http.StatusInternalServerError)
		return false
	}
	tracing.Inject(uctx, req.Header)
	out.arm()
	early := r.Method == http.MethodPost && rq.Session == "" && ex.init == nil && len(ex.pending) > 0 &&
		mcpheader.Stateless(rq.Version) && strings.Contains(r.Header.Get("Accept"), "text/event-stream")
	resp, opened, err := rl.roundTrip(ctx, cancel, w, out, req, early)
	defer endUpstream(up, resp, err)
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
			httpx.UpstreamError(w, ex.body, unreachable(err))
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

// refusesSpillway reports whether resp refuses Spillway's credentials: a
// 401, or a 403 with a challenge (more scopes). The client's credentials
// never reach the upstream, so the refusal is not the client's.
func refusesSpillway(resp *http.Response) bool {
	return resp.StatusCode == http.StatusUnauthorized ||
		(resp.StatusCode == http.StatusForbidden && resp.Header.Get("WWW-Authenticate") != "")
}

// logRefused logs that the upstream refused Spillway's credentials.
func (rl *Relay) logRefused(resp *http.Response) {
	rl.log.Warn("the upstream refused Spillway's credentials; check its headers or OAuth client settings", "status", resp.StatusCode, "url", httpx.RedactURL(rl.o.URL))
}

// logUnreachable logs err, from the upstream client, without credentials.
func (rl *Relay) logUnreachable(err error) {
	rl.log.Warn("upstream unreachable", "url", httpx.RedactURL(rl.o.URL), "err", httpx.RedactError(err))
}

// unreachable is what a client is told when its request could not be
// sent upstream: the upstream is down, or Spillway has no access token
// for it (httpx.ErrNoCredentials).
func unreachable(err error) string {
	if errors.Is(err, httpx.ErrNoCredentials) {
		return errNoToken
	}
	return "upstream MCP server unreachable"
}

// errNoToken is what a client is told when Spillway could not get its
// own access token for the upstream from the upstream's authorization
// server.
const errNoToken = "Spillway could not get its credentials for the upstream MCP server (its authorization server failed)"

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

package httpclient

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptrace"
	"sync"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/httpx"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// How messages go out. Each message is a POST of its own, and POSTs run
// side by side: a slow call (one whose response headers come only with
// its result, as in JSON-response mode) holds up nothing. The order the
// protocol fixes is kept: a message goes out once the one before it is
// written to the connection, so a cancellation never overtakes its
// request; and initialize and notifications/initialized are barriers,
// whose response headers arrive before anything else goes out (the
// session id comes with initialize's, and a server refuses a session's
// requests before it was told it is initialized). The legacy transport
// POSTs one at a time: its POSTs are answered at once, on the stream.

// Send hands m to the upstream (see Conn). A notifications/cancelled for a
// stateless-era request aborts that request's exchange instead of being
// POSTed; one for a subscriptions/listen request is POSTed and its stream
// aborted.
func (c *Conn) Send(ctx context.Context, m *jsonrpc.Message) error {
	if m.Method == jsonrpc.MethodCancelled && !c.cancel(m) {
		return nil
	}
	r := &sendReq{ctx: ctx, m: m, res: make(chan error, 1)}
	select {
	case c.queue <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return ErrClosed
	}
	select {
	case err := <-r.res:
		return err
	case <-ctx.Done():
		return ctx.Err() // the sender sees ctx too and abandons the POST
	case <-c.done:
		return ErrClosed
	}
}

// sender takes queued messages in turn, each until it may be followed.
func (c *Conn) sender() {
	for {
		select {
		case <-c.done:
			return
		case r := <-c.queue:
			if err := r.ctx.Err(); err != nil {
				r.res <- err
				continue
			}
			c.mu.Lock()
			legacy := c.legacy != nil
			c.mu.Unlock()
			if legacy || barrier(r.m) {
				r.res <- c.send(r.ctx, r.m)
			} else {
				r.res <- c.dispatch(r.ctx, r.m)
			}
		}
	}
}

// barrier reports whether nothing may follow m before its POST's response
// headers arrived.
func barrier(m *jsonrpc.Message) bool {
	return m.Method == "initialize" || m.Method == "notifications/initialized"
}

// send delivers m by the transport the server speaks, remembering the
// handshake for a replay, and returns once the server has it (its POST's
// response headers arrived).
func (c *Conn) send(ctx context.Context, m *jsonrpc.Message) error {
	c.mu.Lock()
	switch m.Method {
	case "initialize":
		c.init, c.ready = m, nil
	case "notifications/initialized":
		c.ready = m
	}
	l := c.legacy
	c.mu.Unlock()
	if l != nil {
		return l.send(ctx, m)
	}
	err := c.post(ctx, m, true)
	var refused *refusal
	if !errors.As(err, &refused) {
		return err
	}
	// The backwards-compatibility rule: an initialize refused with 400,
	// 404 or 405 may be a legacy-only server's doing.
	l = newLegacy(c)
	l.mu.Lock()
	err = l.connectLocked(ctx)
	l.mu.Unlock()
	if err != nil {
		// Not a legacy server either: the refusal is the answer.
		c.log.Debug("no legacy transport at the upstream either", "err", err)
		c.push(refused.answer(m))
		return nil
	}
	c.log.Info("the upstream speaks only the legacy HTTP+SSE transport", "url", httpx.RedactURL(c.o.URL))
	c.mu.Lock()
	c.legacy = l
	c.mu.Unlock()
	return l.send(ctx, m)
}

// dispatch POSTs m on a goroutine of its own and returns once the request
// is written, or with the error that kept it from being sent, or when ctx
// ends first (the POST is abandoned then). What happens later is m's
// exchange's business: a request's failure becomes its error response.
func (c *Conn) dispatch(ctx context.Context, m *jsonrpc.Message) error {
	ex := c.start(m, nil)
	sent := make(chan error, 1)
	c.goSafe("posting a message", func() { c.exchange(ex, sent, true) })
	select {
	case err := <-sent:
		return err
	case <-ctx.Done():
		ex.abort()
		return ctx.Err()
	}
}

// exchange runs a dispatched POST to its end. sent, when not nil, gets
// one value: nil once the request is written, or the error that came
// first. retry allows one re-initialization when the server has forgotten
// the session.
func (c *Conn) exchange(ex *exchange, sent chan<- error, retry bool) {
	var once sync.Once
	report := func(err error) (first bool) {
		once.Do(func() {
			first = sent != nil
			if first {
				sent <- err
			}
		})
		return first
	}
	resp, s, err := c.do(ex.ctx, ex, c.current(), func() { report(nil) })
	if err != nil {
		if !report(err) {
			c.failed(ex, "upstream MCP server unreachable", err)
		}
		c.finish(ex)
		return
	}
	report(nil)
	m := ex.m
	if resp.StatusCode == http.StatusNotFound && s != nil && s.id != "" && retry {
		discard(resp)
		c.log.Info("the upstream forgot the session: initializing again", "session", s.id)
		if err := c.reinit(c.life, s); err != nil {
			c.failed(ex, "the upstream forgot the session, and initializing another failed", err)
			c.finish(ex)
			return
		}
		c.finish(ex)
		c.exchange(c.start(m, nil), nil, false)
		return
	}
	if !m.IsRequest() {
		discard(resp)
		c.finish(ex)
		if resp.StatusCode >= 300 {
			c.log.Warn("the upstream refused a message", "message", describe(m), "status", resp.Status)
		}
		return
	}
	c.read(ex, resp)
}

// failed reports a dispatched message's failure after Send returned: in
// the log, and for a request as its error response, which says what
// failed but not why (the cause names the upstream).
func (c *Conn) failed(ex *exchange, what string, err error) {
	if ex.ctx.Err() != nil {
		return // aborted: nobody waits
	}
	c.log.Warn(what, "message", describe(ex.m), "err", err)
	if ex.m.IsRequest() {
		c.answerError(ex, what)
	}
}

// current is the live session, or nil.
func (c *Conn) current() *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session
}

// newPOST is a POST of raw; written, when not nil, is called once the
// request, body included, is written to its connection's buffer (flushed
// right after), so a message sent next does not overtake it. It may be
// called again for a retried request.
func newPOST(ctx context.Context, url string, raw []byte, written func()) (*http.Request, error) {
	if written != nil {
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				written()
			}
		}})
	}
	return http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(raw))
}

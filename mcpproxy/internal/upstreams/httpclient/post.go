package httpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/httpx"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/mcpheader"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/stall"
)

// refusal is an initialize refused as a legacy-only server refuses it
// (400, 404 or 405); it keeps the response, which answers the initialize
// when the server turns out not to be a legacy one either.
type refusal struct {
	status string
	body   []byte
}

func (r *refusal) Error() string { return "httpclient: the upstream refused initialize: " + r.status }

// answer is the refusal as a JSON-RPC response to req.
func (r *refusal) answer(req *jsonrpc.Message) *jsonrpc.Message {
	if m, err := jsonrpc.DecodeMessage(r.body); err == nil && m.IsResponse() && bytes.Equal(m.ID, req.ID) {
		return m
	}
	return jsonrpc.ErrorResponse(req.ID, jsonrpc.CodeUpstream, "upstream answered "+r.status)
}

// exchange is one request in flight: its POST and the response stream
// that answers it (resumed as often as it takes).
type exchange struct {
	m         *jsonrpc.Message
	ctx       context.Context // ends when the exchange is aborted or the Conn closed
	abort     context.CancelFunc
	stateless bool
	// answer, when set, receives the response instead of Recv (a replayed
	// initialize is the Conn's own business).
	answer chan *jsonrpc.Message
}

// post sends m in a POST of its own. A request's response body is read
// on a goroutine of its own once the headers are in. retry allows one
// re-initialization when the server has forgotten the session.
func (c *Conn) post(ctx context.Context, m *jsonrpc.Message, retry bool) error {
	ex := c.start(m, nil)
	s := c.current()
	if m.Method == "initialize" {
		s = nil // a new session, whatever the old one was
	}
	resp, s, err := c.do(ctx, ex, s, nil)
	if err != nil {
		c.finish(ex)
		return err
	}
	status := resp.StatusCode
	switch {
	case status == http.StatusNotFound && s != nil && s.id != "" && retry && m.Method != "initialize":
		discard(resp)
		c.finish(ex)
		c.log.Info("the upstream forgot the session: initializing again", "session", s.id)
		if err := c.reinit(ctx, s); err != nil {
			return err
		}
		return c.post(ctx, m, false)
	case m.Method == "initialize" && c.o.Transport == Auto &&
		(status == http.StatusBadRequest || status == http.StatusNotFound || status == http.StatusMethodNotAllowed):
		defer c.finish(ex)
		defer resp.Body.Close()
		body, _ := readBounded(resp.Body, resp.ContentLength, min(c.o.MaxMessage, 1<<20))
		return &refusal{status: resp.Status, body: body}
	}
	if m.Method == "initialize" && status < 300 {
		c.newSession(resp.Header.Get("Mcp-Session-Id"))
	}
	if !m.IsRequest() {
		discard(resp)
		c.finish(ex)
		if status >= 300 {
			return fmt.Errorf("httpclient: the upstream answered %s to %s", resp.Status, describe(m))
		}
		if m.Method == "notifications/initialized" {
			c.sessionReady()
		}
		return nil
	}
	c.goSafe("reading a response", func() { c.read(ex, resp) })
	return nil
}

// start registers a request's exchange (a notification's is not kept).
func (c *Conn) start(m *jsonrpc.Message, answer chan *jsonrpc.Message) *exchange {
	ex := &exchange{m: m, answer: answer}
	ex.ctx, ex.abort = context.WithCancel(c.life)
	c.mu.Lock()
	defer c.mu.Unlock()
	version := c.version
	if v := jsonrpc.MetaString(m, jsonrpc.MetaProtocolVersion); v != "" {
		version = v
	}
	// Set before the exchange is seen by cancel, which reads it.
	ex.stateless = mcpheader.Stateless(version) || (version == "" && m.Method != "initialize" && c.session == nil)
	if m.IsRequest() {
		c.calls[jsonrpc.Key(m.ID)] = ex
	}
	return ex
}

// finish forgets an exchange and releases what it holds.
func (c *Conn) finish(ex *exchange) {
	if ex.m.IsRequest() {
		c.mu.Lock()
		if c.calls[jsonrpc.Key(ex.m.ID)] == ex {
			delete(c.calls, jsonrpc.Key(ex.m.ID))
		}
		c.mu.Unlock()
	}
	ex.abort()
}

// do POSTs the exchange's message in session s (nil: none) and waits for
// the response headers, or for ctx: then the POST is abandoned and
// ctx.Err() returned. written, when not nil, is called once the request
// is written.
func (c *Conn) do(ctx context.Context, ex *exchange, s *session, written func()) (*http.Response, *session, error) {
	m := ex.m
	req, err := newPOST(ex.ctx, c.o.URL, m.Raw, written)
	if err != nil {
		return nil, nil, err
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	c.mu.Lock()
	version := c.version
	c.mu.Unlock()
	if v := jsonrpc.MetaString(m, jsonrpc.MetaProtocolVersion); v != "" {
		version = v
	}
	if s != nil && s.id != "" {
		h.Set("Mcp-Session-Id", s.id)
	}
	if version != "" && m.Method != "initialize" {
		h.Set("Mcp-Protocol-Version", version)
	}
	if mcpheader.Stateless(version) {
		mcpheader.Set(h, m, nil) // Mcp-Param-* come from the caller's hook
	}
	if c.o.Header != nil {
		c.o.Header(m, h)
	}
	// The caller's ctx bounds the wait for the headers only: the body is
	// read long after Send returned.
	stop := context.AfterFunc(ctx, ex.abort)
	resp, err := c.roundTrip(req)
	if !stop() {
		if err == nil {
			resp.Body.Close()
		}
		return nil, nil, ctx.Err()
	}
	if err != nil {
		if c.life.Err() != nil {
			return nil, nil, ErrClosed
		}
		return nil, nil, fmt.Errorf("httpclient: %s: %w", describe(m), err)
	}
	return resp, s, nil
}

// read handles the response to a request: a JSON body, an event stream
// (resumed when it breaks), or an error status.
func (c *Conn) read(ex *exchange, resp *http.Response) {
	defer c.finish(ex)
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case resp.StatusCode >= 300:
		c.readError(ex, resp)
	case ct == "text/event-stream":
		c.stream(ex, resp.Body)
	case ct == "application/json":
		c.readJSON(ex, resp)
	default:
		discard(resp)
		c.answerError(ex, fmt.Sprintf("upstream answered %s with content type %q, not a JSON-RPC response", resp.Status, ct))
	}
}

// readJSON reads a JSON body: one message or a batch.
func (c *Conn) readJSON(ex *exchange, resp *http.Response) {
	defer resp.Body.Close()
	guard := stall.Message(resp.Body, c.o.StallTimeout, resp.ContentLength)
	defer guard.Stop()
	var body []byte
	var err error
	if c.o.Spool != nil {
		body, err = httpx.ReadMessage(guard, resp.ContentLength, c.o.MaxMessage, c.o.Spool)
		switch {
		case errors.Is(err, jsonrpc.ErrMalformed):
			c.log.Warn("dropping a malformed upstream response", "err", err)
			c.answerError(ex, "upstream sent a malformed response")
			return
		case errors.Is(err, spill.ErrTooLarge), errors.Is(err, spill.ErrFull):
			err = errTooLarge
		}
	} else {
		body, err = readBounded(guard, resp.ContentLength, c.o.MaxMessage)
	}
	if why := guard.Why("answer"); err != nil && why != "" {
		c.log.Warn("the upstream stalled in the middle of its answer", "err", err, "request", describe(ex.m))
		c.answerError(ex, why)
		return
	}
	if errors.Is(err, errTooLarge) {
		c.log.Warn("dropping an upstream response over the size limit", "limit", c.o.MaxMessage, "request", describe(ex.m))
		c.answerError(ex, c.tooLarge())
		return
	}
	if err != nil {
		c.answerError(ex, "reading the upstream response failed: "+err.Error())
		return
	}
	msgs, _, err := jsonrpc.Decode(body)
	if err != nil {
		c.log.Warn("dropping a malformed upstream response", "err", err, "start", truncate(body))
		c.answerError(ex, "upstream sent a malformed response")
		return
	}
	answered := false
	for _, m := range msgs {
		answered = c.deliver(ex, m) || answered
	}
	if !answered {
		c.answerError(ex, "upstream answered without a response to the request")
	}
}

// readError turns an error status into the request's answer: the
// JSON-RPC error in its body when there is one (a stateless server's
// errors carry an HTTP status), a made-up one otherwise.
func (c *Conn) readError(ex *exchange, resp *http.Response) {
	defer resp.Body.Close()
	body, _ := readBounded(resp.Body, resp.ContentLength, min(c.o.MaxMessage, 1<<20))
	if m, err := jsonrpc.DecodeMessage(body); err == nil && m.IsResponse() && bytes.Equal(m.ID, ex.m.ID) {
		c.deliver(ex, m)
		return
	}
	c.answerError(ex, "upstream answered "+resp.Status)
}

// deliver passes one message of the exchange's response on and reports
// whether it answers the exchange's request.
func (c *Conn) deliver(ex *exchange, m *jsonrpc.Message) bool {
	answers := m.IsResponse() && bytes.Equal(m.ID, ex.m.ID)
	if m.HasMethod() && ex.m.IsRequest() {
		m.Related = ex.m.ID // the server sent it on this request's stream
	}
	if answers && ex.m.Method == "initialize" && m.Result != nil {
		var r struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		if json.Unmarshal(m.Result, &r) == nil && r.ProtocolVersion != "" {
			c.mu.Lock()
			c.version = r.ProtocolVersion
			c.mu.Unlock()
		}
	}
	if answers && ex.answer != nil {
		select {
		case ex.answer <- m:
		default:
		}
		return true
	}
	c.push(m)
	return answers
}

// answerError answers the exchange's request with a JSON-RPC error,
// unless the exchange was aborted (cancelled, or the Conn closed): then
// nobody waits for an answer.
func (c *Conn) answerError(ex *exchange, msg string) {
	if ex.ctx.Err() != nil {
		return
	}
	c.deliver(ex, jsonrpc.ErrorResponse(ex.m.ID, jsonrpc.CodeUpstream, msg))
}

// tooLarge is the error message for an upstream message over MaxMessage.
func (c *Conn) tooLarge() string {
	return fmt.Sprintf("upstream message exceeds the %d byte limit", c.o.MaxMessage)
}

// cancel applies the cancellation contract to a notifications/cancelled
// and reports whether it must still be POSTed.
func (c *Conn) cancel(n *jsonrpc.Message) bool {
	id := jsonrpc.CancelledID(n)
	c.mu.Lock()
	ex := c.calls[jsonrpc.Key(id)]
	legacy := c.legacy != nil
	stateless := c.session == nil && (c.version == "" || mcpheader.Stateless(c.version))
	c.mu.Unlock()
	if ex != nil {
		stateless = ex.stateless
	}
	switch {
	case legacy:
		return true
	case stateless:
		// Closing the stream is the stateless era's cancel: the server
		// has no session to route a notification to.
		if ex != nil {
			ex.abort()
		}
		return false
	case ex != nil && ex.m.Method == "subscriptions/listen":
		ex.abort()
	}
	return true
}

var errTooLarge = errors.New("httpclient: message too large")

// readBounded reads r whole, up to max bytes (errTooLarge past it),
// allocating once when the size is announced.
func readBounded(r io.Reader, size, max int64) ([]byte, error) {
	if size > max {
		return nil, errTooLarge
	}
	var b bytes.Buffer
	if size > 0 {
		b.Grow(int(size) + 1)
	}
	n, err := b.ReadFrom(io.LimitReader(r, max+1))
	if n > max {
		return nil, errTooLarge
	}
	return b.Bytes(), err
}

// discard drains a little of a body we do not read, so the connection
// can be reused, and closes it.
func discard(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

// describe names m in an error: its method, or "a response".
func describe(m *jsonrpc.Message) string {
	if m.HasMethod() {
		return m.Method
	}
	return "a response"
}

// truncate is the start of b, for a log line.
func truncate(b []byte) string { return string(b[:min(len(b), 200)]) }

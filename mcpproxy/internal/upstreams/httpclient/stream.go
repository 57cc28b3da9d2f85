package httpclient

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/sse"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/stall"
)

// cursor is where a stream stands: the last event id seen (to resume
// from) and the server's last retry hint.
type cursor struct {
	last     string
	retry    time.Duration
	hasRetry bool
}

// delay is the wait before reconnection attempt n, at most max.
func (cur *cursor) delay(n int, max time.Duration) time.Duration {
	if cur.hasRetry {
		return min(cur.retry, max)
	}
	return min(backoff(n), max)
}

// stream reads a request's event stream until its answer. A stream that
// ends before it is resumed with GET and Last-Event-ID, after the retry
// hint the server gave (SEP-1699 polling) or a backoff; MaxRetries
// attempts in a row without a new event id end the wait with an error
// response, as does a stream without ids (it cannot be resumed).
func (c *Conn) stream(ex *exchange, body io.ReadCloser) {
	var cur cursor
	tries := 0
	for {
		before := cur.last
		answered, stalled := c.events(body, &cur, ex)
		body.Close()
		if answered || ex.ctx.Err() != nil {
			return
		}
		if cur.last == "" {
			why := "upstream ended the stream without answering"
			if stalled != "" {
				why = stalled
			}
			c.answerError(ex, why)
			return
		}
		if cur.last != before {
			tries = 0
		}
		for body = nil; body == nil; {
			if tries++; tries > c.o.MaxRetries {
				c.answerError(ex, "upstream ended the stream without answering, and resuming it failed")
				return
			}
			if !sleep(ex.ctx, cur.delay(tries-1, c.o.MaxRetryDelay)) {
				return
			}
			var err error
			body, err = c.get(ex.ctx, cur.last)
			if errors.Is(err, errNoStream) {
				c.answerError(ex, "upstream ended the stream without answering and cannot resume it: "+err.Error())
				return
			}
			if err != nil {
				c.log.Debug("resuming an upstream stream failed", "err", err)
			}
		}
	}
}

// errNoStream is the error of a GET the server answered with something
// other than an event stream (405: it offers none).
var errNoStream = errors.New("no event stream")

// get opens the session's event stream with GET, resuming after last
// when it is set.
func (c *Conn) get(ctx context.Context, last string) (io.ReadCloser, error) {
	resp, err := c.getStream(ctx, func(h http.Header) {
		if last != "" {
			h.Set("Last-Event-ID", last)
		}
		c.mu.Lock()
		s := c.session
		c.mu.Unlock()
		c.streamHeaders(h, s)
	})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// getStream sends a GET of the configured URL that asks for an event
// stream, with header adding the request's other headers, and returns the
// response when it is one (200, text/event-stream). Both transports open
// their streams with it: the session's GET stream here, the legacy
// transport's one stream in legacy.go. Any other answer is discarded and
// returned as a *statusError.
func (c *Conn) getStream(ctx context.Context, header func(http.Header)) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.o.URL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	header(req.Header)
	resp, err := c.roundTrip(req)
	if err != nil {
		return nil, err
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		discard(resp)
		return nil, &statusError{status: resp.Status, code: resp.StatusCode, mediaType: ct}
	}
	return resp, nil
}

// statusError is a GET answered with something other than an event
// stream: its status line, code and Content-Type's media type.
type statusError struct {
	status    string
	code      int
	mediaType string
}

// none reports whether the server says it has no GET stream at all: 405,
// or a success that is not an event stream. Anything else (a 502 from a
// load balancer, a 409 for a stream another connection holds) may pass.
func (e *statusError) none() bool {
	return e.code == http.StatusMethodNotAllowed || (e.code >= 200 && e.code < 300)
}

func (e *statusError) Error() string   { return "the upstream answered " + e.status }
func (e *statusError) Is(t error) bool { return t == errNoStream }

// events reads events from body and passes their messages on until the
// exchange's answer (reported true), the end of the stream, or the
// exchange's end; stalled says why the stream was closed when it stopped
// mid-event (Options.StallTimeout), else "". ex is nil for the session's
// GET stream.
func (c *Conn) events(body io.ReadCloser, cur *cursor, ex *exchange) (answered bool, stalled string) {
	guard := stall.Events(body, c.o.StallTimeout)
	defer guard.Stop()
	rd := sse.NewReader(guard, c.o.MaxMessage)
	if c.o.Spool != nil {
		rd.Spool(c.o.Spool)
	}
	defer func() {
		if id := rd.LastEventID(); id != "" {
			cur.last = id
		}
		if d, ok := rd.Retry(); ok {
			cur.retry, cur.hasRetry = d, true
		}
	}()
	for {
		ev, err := rd.Next()
		var big *sse.TooLargeError
		var m *jsonrpc.Message
		switch {
		case errors.As(err, &big):
			m = c.tooLargeEvent(big)
		case err != nil:
			if ex != nil && ex.ctx.Err() == nil && !errors.Is(err, io.EOF) {
				c.log.Debug("an upstream event stream broke", "err", err, "stalled", guard.Why("stream"))
			}
			return false, guard.Why("stream")
		default:
			m = c.message(&ev)
		}
		if m == nil {
			continue
		}
		if ex == nil {
			c.push(m)
			continue
		}
		if c.deliver(ex, m) {
			return true, ""
		}
	}
}

// message is the MCP message an event carries, or nil: events without
// data are priming events and keepalives, events of another type are not
// MCP messages, and a malformed one is logged and dropped.
func (c *Conn) message(ev *sse.Event) *jsonrpc.Message {
	if len(ev.Data) == 0 || (ev.Name != "" && ev.Name != "message") {
		return nil
	}
	m, err := jsonrpc.DecodeMessage(ev.Data)
	if err != nil {
		c.log.Warn("dropping a malformed upstream message", "err", err, "start", truncate(ev.Data))
		return nil
	}
	return m
}

// tooLargeEvent stands in for an event over the size limit: it returns
// an error response for the request it answers (its id found at either
// end of it), or nil; a request from the server is refused.
func (c *Conn) tooLargeEvent(big *sse.TooLargeError) *jsonrpc.Message {
	g := jsonrpc.Peek(big.Head, big.Tail)
	log := c.log.With("bytes", big.Size, "limit", big.Limit, "id", string(g.ID))
	switch {
	case g.ID != nil && g.Response:
		log.Warn("an upstream response over the size limit: answering its request with an error")
		return jsonrpc.ErrorResponse(g.ID, jsonrpc.CodeUpstream, c.tooLarge())
	case g.ID != nil && g.Method:
		log.Warn("an upstream request over the size limit: refusing it")
		c.goSafe("refusing a request over the size limit", func() {
			ctx, cancel := context.WithTimeout(c.life, 5*time.Second)
			defer cancel()
			c.Send(ctx, jsonrpc.ErrorResponse(g.ID, jsonrpc.CodeInvalidRequest, "message exceeds the size limit"))
		})
	default:
		log.Warn("dropping an upstream message over the size limit", "start", truncate(big.Head))
	}
	return nil
}

// listen holds the session's GET stream open for the server's own
// messages until the session ends, reconnecting (with Last-Event-ID when
// the server gave ids) after its retry hint or a backoff that grows to 10
// s (MaxRetryDelay at most): a GET refused for a while (502, 409) or a
// stream cut is opened again, for as long as the session lasts. A server
// that answers 405, or a success that is no event stream, has none.
func (c *Conn) listen(s *session) {
	var cur cursor
	for fails := 0; s.ctx.Err() == nil; {
		body, err := c.get(s.ctx, cur.last)
		var st *statusError
		switch {
		case errors.As(err, &st) && st.none():
			c.log.Debug("the upstream offers no GET stream", "err", err)
			return
		case err != nil:
			c.log.Debug("opening the upstream's GET stream failed; trying again", "err", err, "attempt", fails+1)
			fails++
		default:
			before := cur.last
			c.events(body, &cur, nil)
			body.Close()
			fails++
			if cur.last != before {
				fails = 0 // it made progress: reconnect after the hint alone
			}
		}
		if !sleep(s.ctx, cur.delay(fails, c.o.MaxRetryDelay)) {
			return
		}
	}
}

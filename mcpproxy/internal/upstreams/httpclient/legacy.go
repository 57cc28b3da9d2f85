package httpclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/httpx"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/sse"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/stall"
)

// The legacy HTTP+SSE transport (protocol 2024-11-05): the client holds a
// GET event stream whose first event, "endpoint", names the URL to POST
// messages to; every answer arrives on that stream. A lost stream is
// reconnected in the background and the remembered handshake replayed;
// requests in flight on it are answered with an error (their answers are
// gone with it).

// endpointWait bounds the wait for a legacy stream's endpoint event.
const endpointWait = 10 * time.Second

// legacyConn is a Conn's state when the upstream speaks the legacy
// transport: the endpoint of the current stream and the requests that wait
// for their answers on it.
type legacyConn struct {
	c *Conn

	mu   sync.Mutex // held while connecting; guards post and gen
	post string     // the endpoint; "" while disconnected
	gen  int        // which stream is current

	pmu     sync.Mutex
	pending map[string][]byte                // requests awaiting their answer
	answer  map[string]chan *jsonrpc.Message // the Conn's own requests
}

func newLegacy(c *Conn) *legacyConn {
	return &legacyConn{c: c, pending: map[string][]byte{}, answer: map[string]chan *jsonrpc.Message{}}
}

// send POSTs m to the endpoint, connecting first (and replaying the
// handshake on a new stream) when there is none.
func (l *legacyConn) send(ctx context.Context, m *jsonrpc.Message) error {
	l.mu.Lock()
	if l.post == "" {
		if err := l.connectLocked(ctx); err != nil {
			l.mu.Unlock()
			return err
		}
		if m.Method != "initialize" {
			l.replayLocked(ctx)
		}
	}
	post := l.post
	l.mu.Unlock()
	key := jsonrpc.Key(m.ID)
	if m.IsRequest() {
		l.pmu.Lock()
		l.pending[key] = m.ID
		l.pmu.Unlock()
	}
	if err := l.postTo(ctx, post, m); err != nil {
		if m.IsRequest() {
			l.pmu.Lock()
			delete(l.pending, key)
			l.pmu.Unlock()
		}
		return err
	}
	return nil
}

// postTo POSTs one message; the answer comes on the stream.
func (l *legacyConn) postTo(ctx context.Context, post string, m *jsonrpc.Message) error {
	c := l.c
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, post, bytes.NewReader(m.Raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.o.Header != nil {
		c.o.Header(m, req.Header)
	}
	resp, err := c.roundTrip(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("httpclient: legacy %s: %w", describe(m), err)
	}
	discard(resp)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("httpclient: the legacy upstream answered %s to %s", resp.Status, describe(m))
	}
	return nil
}

// connectLocked opens the event stream and starts reading it.
func (l *legacyConn) connectLocked(ctx context.Context) error {
	post, rd, body, guard, err := l.c.openLegacy(ctx)
	if err != nil {
		return err
	}
	l.gen++
	l.post = post
	gen := l.gen
	l.c.goSafe("reading the legacy event stream", func() { l.read(gen, rd, body, guard) })
	return nil
}

// openLegacy opens a legacy event stream and waits (at most endpointWait)
// for its endpoint event, whose URL it returns as post. The stream lives
// until the Conn closes or the caller closes body. Its events' data goes
// through Options.Spool, and guard closes it when it stalls mid-event
// (Options.StallTimeout).
func (c *Conn) openLegacy(ctx context.Context) (post string, rd *sse.Reader, body io.ReadCloser, guard *stall.Reader, err error) {
	sctx, cancel := context.WithCancel(c.life)
	timer := time.AfterFunc(endpointWait, cancel)
	stop := context.AfterFunc(ctx, cancel)
	defer timer.Stop()
	defer stop()
	fail := func(err error) (string, *sse.Reader, io.ReadCloser, *stall.Reader, error) {
		guard.Stop() // once made: its clock must not outlive the stream
		cancel()
		if ctx.Err() != nil {
			return "", nil, nil, nil, ctx.Err()
		}
		return "", nil, nil, nil, fmt.Errorf("httpclient: connecting to the legacy upstream: %w", err)
	}
	resp, err := c.getEventStream(sctx)
	if err != nil {
		return fail(err)
	}
	guard = stall.Events(resp.Body, c.o.StallTimeout)
	rd = sse.NewReader(guard, c.o.MaxMessage)
	if c.o.Spool != nil {
		rd.Spool(c.o.Spool) // the answers of a legacy server come on this stream
	}
	post, err = c.readEndpoint(rd)
	if err == nil && (!timer.Stop() || !stop()) {
		err = errors.New("timed out")
	}
	if err != nil {
		resp.Body.Close()
		return fail(err)
	}
	return post, rd, &bodyCloser{resp.Body, cancel}, guard, nil
}

// getEventStream sends the GET that opens a legacy event stream and
// returns the response when it is one: 200 and text/event-stream.
func (c *Conn) getEventStream(ctx context.Context) (*http.Response, error) {
	resp, err := c.getStream(ctx, func(h http.Header) {
		if c.o.Header != nil {
			c.o.Header(nil, h)
		}
	})
	if st, ok := errors.AsType[*statusError](err); ok {
		return nil, fmt.Errorf("GET answered %s (%s)", st.status, st.mediaType)
	}
	return resp, err
}

// readEndpoint reads the stream's first event, which must be the endpoint
// event, and returns the URL to post messages to: the endpoint resolved
// against the configured URL, on its origin (messages and credentials are
// never posted to another), with the configured URL's query added.
func (c *Conn) readEndpoint(rd *sse.Reader) (string, error) {
	var ev sse.Event
	for ev.Name != "endpoint" {
		var err error
		if ev, err = rd.Next(); err != nil {
			return "", fmt.Errorf("no endpoint event: %w", err)
		}
		if ev.HasData && ev.Name != "endpoint" {
			return "", errors.New("the stream did not start with an endpoint event")
		}
	}
	ep, err := c.base.Parse(strings.TrimSpace(string(ev.Data)))
	if err != nil || !httpx.SameOrigin(ep, c.base) {
		return "", fmt.Errorf("a bad endpoint %q", truncate(ev.Data))
	}
	addQuery(ep, c.base)
	return ep.String(), nil
}

// addQuery adds to the endpoint the configured URL's query parameters it
// does not set itself: an upstream that takes its key in the query
// (…/sse?key=…) gets it with every message too. The endpoint's own query
// is kept as the server wrote it.
func addQuery(ep, configured *url.URL) {
	q := ep.Query()
	missing := url.Values{}
	for k, vs := range configured.Query() {
		if _, ok := q[k]; !ok {
			missing[k] = vs
		}
	}
	if len(missing) == 0 {
		return
	}
	if ep.RawQuery != "" {
		ep.RawQuery += "&"
	}
	ep.RawQuery += missing.Encode()
}

// bodyCloser closes a stream's body and releases its context.
type bodyCloser struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *bodyCloser) Close() error {
	b.cancel()
	return b.ReadCloser.Close()
}

// DetectLegacy reports whether the server at o.URL speaks the legacy
// HTTP+SSE transport: a GET opens an event stream whose first event is
// "endpoint" (the backwards-compatibility rule's second step, after an
// initialize POST was refused with 400, 404 or 405). It returns within
// 10 s or when ctx ends.
func DetectLegacy(ctx context.Context, o Options) bool {
	c, err := New(o)
	if err != nil {
		return false
	}
	defer c.Close()
	_, _, body, guard, err := c.openLegacy(ctx)
	if err != nil {
		c.log.Debug("no legacy transport at the upstream", "err", err)
		return false
	}
	guard.Stop()
	body.Close()
	return true
}

// read passes the stream's messages on until it ends, then fails the
// requests it owed answers and reconnects in the background.
func (l *legacyConn) read(gen int, rd *sse.Reader, body io.ReadCloser, guard *stall.Reader) {
	c := l.c
	for {
		ev, err := rd.Next()
		var big *sse.TooLargeError
		if err != nil && !errors.As(err, &big) {
			break
		}
		m := c.message(&ev)
		if big != nil {
			m = c.tooLargeEvent(big)
		}
		if m != nil {
			l.deliver(m)
		}
	}
	guard.Stop()
	body.Close()
	l.mu.Lock()
	if l.gen == gen {
		l.post = ""
	}
	l.mu.Unlock()
	if c.life.Err() != nil {
		return
	}
	l.pmu.Lock()
	lost := l.pending
	l.pending = map[string][]byte{}
	l.pmu.Unlock()
	why := "the upstream's event stream ended before answering"
	if s := guard.Why("stream"); s != "" {
		why = s
	}
	c.log.Warn("the legacy upstream's event stream ended", "unanswered", len(lost), "why", why)
	for _, id := range lost {
		c.push(jsonrpc.ErrorResponse(id, jsonrpc.CodeUpstream, why))
	}
	l.reconnect()
}

// deliver passes a message from the stream on: an answer to the Conn's
// own request to it, anything else to Recv.
func (l *legacyConn) deliver(m *jsonrpc.Message) {
	if m.IsResponse() {
		key := jsonrpc.Key(m.ID)
		l.pmu.Lock()
		ch := l.answer[key]
		delete(l.pending, key)
		l.pmu.Unlock()
		if ch != nil {
			select {
			case ch <- m:
			default:
			}
			return
		}
	}
	l.c.push(m)
}

// reconnect brings a lost stream back, with backoff, while the client
// has a session to go on with (an initialize to replay).
func (l *legacyConn) reconnect() {
	c := l.c
	for n := 0; ; n++ {
		c.mu.Lock()
		known := c.init != nil
		c.mu.Unlock()
		if !known || !sleep(c.life, backoff(n)) {
			return
		}
		l.mu.Lock()
		if l.post != "" { // a Send got there first
			l.mu.Unlock()
			return
		}
		err := l.connectLocked(c.life)
		if err == nil {
			l.replayLocked(c.life)
		}
		l.mu.Unlock()
		if err == nil {
			return
		}
		c.log.Debug("reconnecting to the legacy upstream failed", "err", err)
	}
}

// replayLocked sends the remembered handshake on a new stream and waits
// for the initialize answer (≤ 10 s); failures are logged: the messages
// that follow show the client what went wrong.
func (l *legacyConn) replayLocked(ctx context.Context) {
	c := l.c
	c.mu.Lock()
	init, ready := c.init, c.ready
	c.mu.Unlock()
	if init == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	id := []byte(`"spillway-reinitialize"`)
	ch := make(chan *jsonrpc.Message, 1)
	l.pmu.Lock()
	l.answer[jsonrpc.Key(id)] = ch
	l.pmu.Unlock()
	defer func() {
		l.pmu.Lock()
		delete(l.answer, jsonrpc.Key(id))
		l.pmu.Unlock()
	}()
	err := l.postTo(ctx, l.post, init.WithID(id))
	if err == nil {
		select {
		case m := <-ch:
			if m.Error != nil {
				err = fmt.Errorf("initialize failed: %s", m.Error)
			}
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err == nil && ready != nil {
		err = l.postTo(ctx, l.post, ready)
	}
	if err != nil {
		c.log.Warn("replaying the handshake to the legacy upstream failed", "err", err)
	}
}

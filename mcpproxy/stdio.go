package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/spillway-dev/spillway/mcpproxy/internal/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/mcpheader"
	"github.com/spillway-dev/spillway/mcpproxy/internal/owned"
	"github.com/spillway-dev/spillway/mcpproxy/internal/sse"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// ServeStdio serves one client speaking newline-delimited JSON-RPC on in
// and out (the stdio transport) until in ends or ctx is done. The
// upstream is a child process (restarted with backoff if it dies, the
// client's initialize replayed) or an HTTP server spoken to as a
// Streamable HTTP client.
func (p *Proxy) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := wire.NewConn(in, out, wire.Options{Peer: "client", Logger: p.log})
	defer client.Close()
	st := newStream(nil)
	defer st.close()

	// Everything for the client goes through one writer, in order.
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case d := <-st.ch:
				if err := client.Send(ctx, p.owned.After(ctx, d.c, d.m)); err != nil {
					cancel()
					return
				}
			}
		}
	}()
	serverMsg := func(m *jsonrpc.Message) { st.deliver(m, nil) }

	var upstream func() (*peer, error)
	var init struct {
		sync.Mutex
		req, done *jsonrpc.Message
	}
	// A restarted child (or reconnected legacy stream) knows nothing of
	// the client: replay its handshake so the session goes on.
	replay := func(pe *peer) error {
		init.Lock()
		req, done := init.req, init.done
		init.Unlock()
		if req == nil {
			return nil
		}
		return replayInit(pe, req, done)
	}
	var dial func() (conn, error)
	switch up := p.o.Upstream.(type) {
	case *CommandUpstream:
		dial = func() (conn, error) { return up.start(p.log) }
	case *HTTPUpstream:
		if legacy, _ := up.legacy(ctx); legacy {
			dial = func() (conn, error) { return dialLegacy(up, p) }
			break
		}
		hc := newHTTPConn(up, p)
		defer hc.Close()
		pe := newPeer(hc, serverMsg, p.log)
		upstream = func() (*peer, error) { return pe, nil }
	}
	if dial != nil {
		sv := newSupervisor(dial, p, serverMsg)
		sv.onStart = replay
		defer sv.close()
		upstream = sv.get
	}

	for {
		var m *jsonrpc.Message
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m = <-client.Recv():
		}
		if m == nil { // end of input
			return nil
		}
		pe, err := upstream()
		if err != nil {
			p.log.Warn("upstream unavailable", "err", err)
			if m.IsRequest() {
				st.deliver(jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeUpstream, "upstream MCP server unavailable: "+err.Error()), nil)
			}
			continue
		}
		switch m.Method {
		case "initialize":
			init.Lock()
			init.req = m
			init.Unlock()
		case "notifications/initialized":
			init.Lock()
			init.done = m
			init.Unlock()
		}
		if !m.IsRequest() {
			if err := pe.send(ctx, m); err != nil {
				p.log.Warn("sending to the upstream failed", "err", err)
			}
			continue
		}
		// The stdio face has no tenant; each request names its revision
		// in _meta when it is a stateless-era one.
		reply, c := p.owned.Before(ctx, owned.Request{Stdio: true}, m)
		if reply != nil {
			st.deliver(reply, nil)
			continue
		}
		if _, err := pe.call(ctx, m, c, st); err != nil {
			st.deliver(jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeUpstream, "upstream MCP server unavailable"), nil)
		}
	}
}

// replayInit sends a remembered initialize (and initialized) to a fresh
// child and waits for its answer.
func replayInit(pe *peer, req, done *jsonrpc.Message) error {
	st := newStream(nil)
	defer st.close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := pe.call(ctx, req, nil, st); err != nil {
		return err
	}
	select {
	case d := <-st.ch:
		if d.m.Error != nil {
			return fmt.Errorf("replayed initialize failed: %s", d.m.Error)
		}
	case <-ctx.Done():
		return errors.New("replayed initialize timed out")
	}
	if done != nil {
		return pe.send(ctx, done)
	}
	return nil
}

// httpConn speaks to a Streamable HTTP upstream as a client: one POST per
// message, responses read from JSON or SSE bodies, server messages from
// the GET stream once the session is initialized.
type httpConn struct {
	up   *HTTPUpstream
	p    *Proxy
	recv chan *jsonrpc.Message
	done chan struct{}
	once sync.Once

	mu      sync.Mutex
	session string
	version string
	getOpen bool
}

func newHTTPConn(up *HTTPUpstream, p *Proxy) *httpConn {
	return &httpConn{up: up, p: p, recv: make(chan *jsonrpc.Message, 16), done: make(chan struct{})}
}

func (h *httpConn) Recv() <-chan *jsonrpc.Message { return h.recv }
func (h *httpConn) Err() error                    { return nil }

func (h *httpConn) Close() error {
	h.once.Do(func() {
		close(h.done)
		h.mu.Lock()
		sid := h.session
		h.mu.Unlock()
		if sid != "" {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, h.up.URL, nil)
			req.Header.Set("Mcp-Session-Id", sid)
			h.setHeaders(req)
			if resp, err := h.up.client().Do(req); err == nil {
				resp.Body.Close()
			}
		}
	})
	return nil
}

func (h *httpConn) setHeaders(req *http.Request) {
	for k, vs := range h.up.Header {
		req.Header[k] = vs
	}
}

func (h *httpConn) push(m *jsonrpc.Message) {
	select {
	case h.recv <- m:
	case <-h.done:
	}
}

// Send posts m; its answers arrive on Recv. It returns once the request
// is under way, so a long tool call does not hold up the next message.
func (h *httpConn) Send(ctx context.Context, m *jsonrpc.Message) error {
	req, err := http.NewRequest(http.MethodPost, h.up.URL, bytes.NewReader(m.Raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	h.mu.Lock()
	version := h.version
	if v := metaProtocolVersion(m.Params); v != "" {
		version = v
	}
	if h.session != "" {
		req.Header.Set("Mcp-Session-Id", h.session)
	}
	h.mu.Unlock()
	if version != "" && m.Method != "initialize" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	if stateless(version) {
		var bs []mcpheader.Binding
		if m.Method == "tools/call" {
			name, _ := mcpheader.RoutingName(m)
			bs, _ = h.p.tools.Lookup(name)
		}
		mcpheader.Set(req.Header, m, bs)
	}
	h.setHeaders(req)
	go h.roundTrip(req, m)
	return nil
}

func (h *httpConn) roundTrip(req *http.Request, m *jsonrpc.Message) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-h.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	resp, err := h.up.client().Do(req.WithContext(ctx))
	if err != nil {
		if m.IsRequest() {
			h.push(jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeUpstream, "upstream MCP server unreachable"))
		}
		h.p.log.Warn("upstream request failed", "err", err)
		return
	}
	defer resp.Body.Close()
	if m.Method == "initialize" {
		h.mu.Lock()
		h.session = resp.Header.Get("Mcp-Session-Id")
		h.mu.Unlock()
	}
	ct := resp.Header.Get("Content-Type")
	got := false
	polling := false // the upstream closed the stream on purpose (SEP-1699)
	switch {
	case strings.HasPrefix(ct, "text/event-stream"):
		lastID := ""
		read := func(body io.Reader) {
			sr := sse.NewReader(body, h.up.maxMessage())
			for !got {
				ev, err := sr.Next()
				if err == io.EOF && !ev.HasRetry {
					_, hinted := sr.Retry()
					polling = polling || hinted
				}
				if err != nil {
					return
				}
				if ev.ID != "" {
					lastID = ev.ID
				}
				if msg, err := jsonrpc.DecodeMessage(ev.Data); err == nil {
					got = got || (msg.IsResponse() && bytes.Equal(msg.ID, m.ID))
					h.received(m, msg)
				}
			}
		}
		read(resp.Body)
		// The stream ended before the answer: resume it where it broke,
		// so a result in flight still reaches the client.
		for attempt := 0; !got && m.IsRequest() && lastID != "" && attempt < 10 && ctx.Err() == nil; attempt++ {
			time.Sleep(time.Duration(50<<min(attempt, 5)) * time.Millisecond)
			h.resume(ctx, lastID, read)
		}
	case strings.HasPrefix(ct, "application/json"):
		body, err := readAllSized(resp.Body, resp.ContentLength, h.up.maxMessage())
		if err == nil {
			msgs, _, err := jsonrpc.Decode(body)
			if err == nil {
				for _, msg := range msgs {
					got = got || (msg.IsResponse() && bytes.Equal(msg.ID, m.ID))
					h.received(m, msg)
				}
			}
		}
	}
	h.mu.Lock()
	listening := h.getOpen
	h.mu.Unlock()
	// A stream the upstream closed cleanly after a retry hint, with no id
	// to resume from, is SEP-1699 polling: the answer comes on the
	// session's GET stream, which is open.
	if m.IsRequest() && !got && !(polling && listening) {
		h.push(jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeUpstream, "upstream answered "+resp.Status+" without a response"))
	}
	if m.Method == "notifications/initialized" && resp.StatusCode < 300 {
		go h.listen()
	}
}

// resume reopens the session's stream with Last-Event-ID.
func (h *httpConn) resume(ctx context.Context, lastID string, read func(io.Reader)) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.up.URL, nil)
	if err != nil {
		return
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", lastID)
	h.mu.Lock()
	if h.session != "" {
		req.Header.Set("Mcp-Session-Id", h.session)
	}
	if h.version != "" {
		req.Header.Set("Mcp-Protocol-Version", h.version)
	}
	h.mu.Unlock()
	h.setHeaders(req)
	resp, err := h.up.client().Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		read(resp.Body)
	}
}

// received passes one upstream message on, learning the negotiated
// protocol version from the initialize result.
func (h *httpConn) received(req, msg *jsonrpc.Message) {
	if req.Method == "initialize" && msg.IsResponse() && msg.Result != nil {
		var r struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		if json.Unmarshal(msg.Result, &r) == nil {
			h.mu.Lock()
			h.version = r.ProtocolVersion
			h.mu.Unlock()
		}
	}
	h.push(msg)
}

// listen holds the session's GET stream open for server-initiated
// messages, reconnecting while the connection lives. A 405 means the
// upstream offers none.
func (h *httpConn) listen() {
	h.mu.Lock()
	if h.getOpen || h.session == "" {
		h.mu.Unlock()
		return
	}
	h.getOpen = true
	h.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-h.done
		cancel()
	}()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.up.URL, nil)
		req.Header.Set("Accept", "text/event-stream")
		h.mu.Lock()
		req.Header.Set("Mcp-Session-Id", h.session)
		req.Header.Set("Mcp-Protocol-Version", h.version)
		h.mu.Unlock()
		h.setHeaders(req)
		resp, err := h.up.client().Do(req)
		if err == nil {
			if resp.StatusCode != http.StatusOK {
				resp.Body.Close()
				if resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotFound {
					return
				}
			} else {
				backoff = 100 * time.Millisecond
				sr := sse.NewReader(resp.Body, h.up.maxMessage())
				for {
					ev, err := sr.Next()
					if err != nil {
						break
					}
					if msg, err := jsonrpc.DecodeMessage(ev.Data); err == nil {
						h.push(msg)
					}
				}
				resp.Body.Close()
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

package httpclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/mcpheader"
)

// session is one Streamable HTTP session (or the sessionless state a
// server without session ids keeps). Its context ends when the session is
// replaced or the connection closed, stopping its GET stream.
type session struct {
	id        string
	ctx       context.Context
	end       context.CancelFunc
	listening bool
}

// newSession starts the session an initialize response created.
func (c *Conn) newSession(id string) { c.useSession(c.makeSession(id)) }

// makeSession returns a session with the id the server gave ("" for
// none) whose context ends with the connection's.
func (c *Conn) makeSession(id string) *session {
	s := &session{id: id}
	s.ctx, s.end = context.WithCancel(c.life)
	return s
}

// useSession makes s the session later messages go in, ending the old one.
func (c *Conn) useSession(s *session) {
	c.mu.Lock()
	old := c.session
	c.session = s
	c.mu.Unlock()
	if old != nil {
		old.end()
	}
}

// sessionReady opens the session's GET stream for the server's own
// messages, once notifications/initialized was accepted (session era
// only: the stateless era has no GET stream).
func (c *Conn) sessionReady() {
	c.mu.Lock()
	s := c.session
	ok := s != nil && !s.listening && c.version != "" && !mcpheader.Stateless(c.version)
	if ok {
		s.listening = true
	}
	c.mu.Unlock()
	if ok {
		c.goSafe("listening on the session's GET stream", func() { c.listen(s) })
	}
}

// reinit replaces the expired session old, once however many exchanges
// found it expired: the remembered initialize and
// notifications/initialized are sent again (their answers kept from Recv:
// the client had its own), and only then do later messages go in the new
// session. Meanwhile they go in the old one, are refused, and wait here.
func (c *Conn) reinit(ctx context.Context, old *session) error {
	c.reinitMu.Lock()
	defer c.reinitMu.Unlock()
	c.mu.Lock()
	init, ready, cur := c.init, c.ready, c.session
	c.mu.Unlock()
	if cur != old {
		return nil // replaced meanwhile
	}
	if init == nil {
		return errors.New("httpclient: the upstream forgot the session, and no initialize is known to start another")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := c.replayInitialize(ctx, init)
	if err != nil {
		return err
	}
	if ready != nil {
		if err := c.replayInitialized(ctx, ready, s); err != nil {
			s.end()
			return err
		}
	}
	c.useSession(s)
	if ready != nil {
		c.sessionReady()
	}
	return nil
}

// replayInitialize sends the remembered initialize again, with an id of
// the Conn's own so that its answer stays here, and returns the new
// session once the upstream answered it without an error.
func (c *Conn) replayInitialize(ctx context.Context, init *jsonrpc.Message) (*session, error) {
	answer := make(chan *jsonrpc.Message, 1)
	ex := c.start(init.WithID([]byte(`"spillway-reinitialize"`)), answer)
	resp, _, err := c.do(ctx, ex, nil, nil)
	if err != nil {
		c.finish(ex)
		return nil, err
	}
	if resp.StatusCode >= 300 {
		discard(resp)
		c.finish(ex)
		return nil, fmt.Errorf("httpclient: initializing again: the upstream answered %s", resp.Status)
	}
	s := c.makeSession(resp.Header.Get("Mcp-Session-Id"))
	c.goSafe("reading a replayed initialize", func() { c.read(ex, resp) })
	select {
	case m := <-answer:
		if m.Error != nil {
			err = fmt.Errorf("httpclient: initializing again: %s", m.Error)
		}
	case <-ctx.Done():
		err = fmt.Errorf("httpclient: initializing again: %w", ctx.Err())
	}
	if err != nil {
		s.end()
		return nil, err
	}
	return s, nil
}

// replayInitialized sends the remembered notifications/initialized again,
// in the new session s.
func (c *Conn) replayInitialized(ctx context.Context, ready *jsonrpc.Message, s *session) error {
	ex := c.start(ready, nil)
	defer c.finish(ex)
	resp, _, err := c.do(ctx, ex, s, nil)
	if err != nil {
		return err
	}
	discard(resp)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("httpclient: initializing again: the upstream answered %s to notifications/initialized", resp.Status)
	}
	return nil
}

// deleteSession ends the session at the server, within 2 s.
func (c *Conn) deleteSession(s *session) {
	ctx, cancel := context.WithTimeout(c.life, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.o.URL, nil)
	if err != nil {
		return
	}
	c.streamHeaders(req.Header, s)
	if resp, err := c.roundTrip(req); err == nil {
		discard(resp)
	}
}

// streamHeaders sets the headers of a GET or DELETE of the session.
func (c *Conn) streamHeaders(h http.Header, s *session) {
	if s != nil && s.id != "" {
		h.Set("Mcp-Session-Id", s.id)
	}
	c.mu.Lock()
	v := c.version
	c.mu.Unlock()
	if v != "" {
		h.Set("Mcp-Protocol-Version", v)
	}
	if c.o.Header != nil {
		c.o.Header(nil, h)
	}
}

package mcpproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/spillway-dev/spillway/mcpproxy/internal/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/sse"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// The legacy HTTP+SSE transport (protocol 2024-11-05): the client holds a
// GET event stream whose first event, "endpoint", names the URL to POST
// messages to; every answer arrives on the event stream. Spillway speaks
// it upstream for servers that have nothing newer.

// legacy reports whether the upstream speaks only the legacy transport.
// With Transport "" it probes once: a GET for an event stream that opens
// with an "endpoint" event means legacy. A failed probe is retried on the
// next request.
func (u *HTTPUpstream) legacy(ctx context.Context) (bool, error) {
	switch u.Transport {
	case "streamable":
		return false, nil
	case "sse":
		return true, nil
	}
	u.probe.Lock()
	defer u.probe.Unlock()
	if u.probe.done {
		return u.probe.legacy, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.URL, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	for k, vs := range u.Header {
		req.Header[k] = vs
	}
	resp, err := u.client().Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	u.probe.done = true
	if resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		ev, err := sse.NewReader(resp.Body, u.maxMessage()).Next()
		u.probe.legacy = err == nil && ev.Name == "endpoint"
	}
	return u.probe.legacy, nil
}

// legacyConn is one legacy-transport connection, as a client.
type legacyConn struct {
	up     *HTTPUpstream
	post   string
	recv   chan *jsonrpc.Message
	done   chan struct{}
	cancel context.CancelFunc
	once   sync.Once
	err    error
}

func dialLegacy(up *HTTPUpstream, p *Proxy) (*legacyConn, error) {
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, up.URL, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	for k, vs := range up.Header {
		req.Header[k] = vs
	}
	resp, err := up.client().Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("legacy SSE upstream answered %s", resp.Status)
	}
	sr := sse.NewReader(resp.Body, up.maxMessage())
	timer := time.AfterFunc(10*time.Second, cancel) // no endpoint event: give up
	ev, err := sr.Next()
	timer.Stop()
	if err != nil || ev.Name != "endpoint" {
		resp.Body.Close()
		cancel()
		return nil, errors.New("legacy SSE upstream sent no endpoint event")
	}
	base, _ := url.Parse(up.URL)
	ep, err := base.Parse(strings.TrimSpace(string(ev.Data)))
	if err != nil || ep.Host != base.Host { // never post messages to another host
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("legacy SSE upstream sent a bad endpoint %q", ev.Data)
	}
	c := &legacyConn{up: up, post: ep.String(), recv: make(chan *jsonrpc.Message, 16), done: make(chan struct{}), cancel: cancel}
	go func() {
		defer resp.Body.Close()
		defer close(c.recv)
		for {
			ev, err := sr.Next()
			if err != nil {
				c.err = err
				return
			}
			if ev.Name != "" && ev.Name != "message" {
				continue
			}
			m, err := jsonrpc.DecodeMessage(ev.Data)
			if err != nil {
				p.log.Warn("dropping a malformed message from the upstream", "err", err)
				continue
			}
			select {
			case c.recv <- m:
			case <-c.done:
				return
			}
		}
	}()
	return c, nil
}

func (c *legacyConn) Send(ctx context.Context, m *jsonrpc.Message) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.post, bytes.NewReader(m.Raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, vs := range c.up.Header {
		req.Header[k] = vs
	}
	resp, err := c.up.client().Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("legacy SSE upstream answered %s", resp.Status)
	}
	return nil
}

func (c *legacyConn) Recv() <-chan *jsonrpc.Message { return c.recv }
func (c *legacyConn) Err() error                    { return c.err }

func (c *legacyConn) Close() error {
	c.once.Do(func() {
		close(c.done)
		c.cancel()
	})
	return nil
}

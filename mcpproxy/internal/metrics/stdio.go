package metrics

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// Client is a stdio client as the stdio face sees it (stdio.Client).
type Client interface {
	Send(ctx context.Context, m *jsonrpc.Message) error
	Recv() <-chan *jsonrpc.Message
}

// Stdio returns c measured: each request it receives is observed when
// the face sends its response, or as cancelled when the client cancels
// it or end is called first. route says where each request goes.
// Call end once the face is done with c. A nil s returns c and an end
// that does nothing.
func (s *Set) Stdio(ctx context.Context, c Client, route func(*jsonrpc.Message) Route) (_ Client, end func()) {
	if s == nil {
		return c, func() {}
	}
	sc := &stdioClient{Client: c, s: s, route: route, in: make(chan *jsonrpc.Message), open: map[string]call{}}
	go sc.read(ctx)
	return sc, sc.end
}

// stdioClient is a measured Client.
type stdioClient struct {
	Client
	s     *Set
	route func(*jsonrpc.Message) Route
	in    chan *jsonrpc.Message

	mu   sync.Mutex
	open map[string]call // the requests not answered yet, by id (jsonrpc.Key)
}

// call is one request in flight.
type call struct {
	method string
	route  Route
	start  time.Time
}

func (c *stdioClient) Recv() <-chan *jsonrpc.Message { return c.in }

// read passes what the client sends on to the face, noting each request
// and each cancellation, until the client's messages end or ctx does.
func (c *stdioClient) read(ctx context.Context) {
	defer close(c.in)
	for m := range c.Client.Recv() {
		switch {
		case m.IsRequest():
			c.mu.Lock()
			c.open[jsonrpc.Key(m.ID)] = call{method: m.Method, route: c.route(m), start: time.Now()}
			c.mu.Unlock()
		case m.Method == jsonrpc.MethodCancelled:
			c.finish(jsonrpc.Key(jsonrpc.CancelledID(m)), Cancelled, "")
		}
		select {
		case c.in <- m:
		case <-ctx.Done():
			return
		}
	}
}

// Send observes a response before it goes to the client.
func (c *stdioClient) Send(ctx context.Context, m *jsonrpc.Message) error {
	if m.IsResponse() {
		outcome, kind := OK, ""
		if m.Error != nil {
			var e struct {
				Code    int
				Message string
			}
			_ = json.Unmarshal(m.Error, &e)
			if !m.Local {
				e.Message = "" // the upstream's own error, whatever it says
			}
			outcome, kind = Outcome(true, e.Code, e.Message)
		}
		c.finish(jsonrpc.Key(m.ID), outcome, kind)
	}
	return c.Client.Send(ctx, m)
}

// finish observes the request id with outcome, once.
func (c *stdioClient) finish(id, outcome, kind string) {
	c.mu.Lock()
	rq, ok := c.open[id]
	delete(c.open, id)
	c.mu.Unlock()
	if ok {
		c.s.Request(rq.method, rq.route, outcome, kind, time.Since(rq.start))
	}
}

// end observes the requests still unanswered as cancelled.
func (c *stdioClient) end() {
	c.mu.Lock()
	open := c.open
	c.open = map[string]call{}
	c.mu.Unlock()
	for _, rq := range open {
		c.s.Request(rq.method, rq.route, Cancelled, "", time.Since(rq.start))
	}
}

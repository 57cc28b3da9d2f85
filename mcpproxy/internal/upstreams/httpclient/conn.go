// Package httpclient is Spillway as a client of an upstream MCP server
// over HTTP: the Streamable HTTP transport of both eras, and the legacy
// HTTP+SSE transport (2024-11-05) for servers that have nothing newer. It
// behaves like the reference client (the Go SDK's):
//
//   - POST first. An initialize answered 400, 404 or 405 means a
//     legacy-only server: the Conn falls back to a GET event stream and
//     the endpoint its "endpoint" event names.
//   - Each message is a POST of its own, and POSTs run side by side: a
//     slow call holds up no other message, even when its response headers
//     come only with its result (JSON-response mode). Only the protocol's
//     order is kept: a message goes out once the one before it is written,
//     and nothing follows initialize or notifications/initialized before
//     their response headers arrived.
//   - A response stream that ends before its answer is resumed with GET
//     and Last-Event-ID, after the stream's retry hint (or a backoff), a
//     bounded number of times without progress.
//   - Session era: the session id and Mcp-Protocol-Version go on every
//     request; after notifications/initialized a GET stream carries the
//     server's own messages (405: the server offers none; refused
//     otherwise, it is asked again with backoff); a 404 on a
//     known session replays the remembered initialize and
//     notifications/initialized, then the message once more; Close ends
//     the session with DELETE.
//   - Stateless era (a request whose _meta names 2026-07-28 or later):
//     Mcp-Method and Mcp-Name headers (SEP-2243), and cancelling a request
//     aborts its HTTP exchange.
//
// Every message is bounded by Options.MaxMessage, JSON bodies and events
// alike: a response over it becomes an error response for its request.
package httpclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/httpx"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/sse"
)

// Transports of Options.Transport.
const (
	Auto       = ""           // POST first, fall back to legacy on 400/404/405
	Streamable = "streamable" // Streamable HTTP only
	Legacy     = "sse"        // the legacy HTTP+SSE transport only
)

// DefaultMaxMessage caps a message when Options.MaxMessage is not set.
const DefaultMaxMessage = 1 << 30

// ErrClosed is returned by Send after Close.
var ErrClosed = errors.New("httpclient: connection closed")

// Options configure a Conn. URL is required; the rest may be zero.
type Options struct {
	// URL is the server's MCP endpoint (for a legacy server, its event
	// stream).
	URL string
	// Client does the HTTP, under the proxy's upstream client policy
	// (httpx.UpstreamClient: no redirect to another origin, bounded
	// dialing); nil means that policy's shared transport. It must not have
	// a Timeout: a response stream lasts as long as its tool runs.
	Client *http.Client
	// Header, when set, is called for every request the Conn makes, after
	// the transport's own headers are set, to add the caller's (the
	// upstream's credentials, Mcp-Param-* headers of a stateless tool
	// call). m is the message POSTed, nil for a GET or DELETE. It must not
	// keep h.
	Header func(m *jsonrpc.Message, h http.Header)
	// Transport is Auto (default), Streamable or Legacy.
	Transport string
	// MaxMessage caps one message from the upstream, in bytes (with
	// Spool, what stays of it in memory); default DefaultMaxMessage.
	MaxMessage int64
	// Spool, when set, takes every upstream message that may be large as
	// it streams in (a spill.Spooler): its long strings go to disk.
	Spool sse.Spooler
	// StallTimeout closes a body the upstream stopped sending in the
	// middle of a message (an event, a JSON answer) once a read has waited
	// that long: its request is answered with an error saying so, a
	// stream is resumed or reconnected as when it breaks (see package
	// stall). 0 waits for ever.
	StallTimeout time.Duration
	// MaxRetries bounds the reconnections of a response stream that make
	// no progress (no new event id); default 5.
	MaxRetries int
	// MaxRetryDelay caps the reconnection delay a server asks for with
	// its retry hint, so a hostile hint cannot park a request; default 1
	// minute.
	MaxRetryDelay time.Duration
	// Logger receives what the Conn drops and why; nil discards.
	Logger *slog.Logger
}

// Conn is one JSON-RPC connection to an upstream MCP server over HTTP. It
// implements the proxy's upstream connection contract:
//
//   - Send hands a message to the upstream, in call order, and returns
//     once it is written to the connection (initialize and
//     notifications/initialized: once their response headers arrived).
//     An upstream that cannot be reached before that is Send's error; a
//     failure later is the request's error response on Recv (a
//     notification's is logged). It honours ctx: a Send still waiting
//     when ctx ends returns ctx.Err() and its POST is abandoned; ctx does
//     not bound the exchange after Send returned.
//   - Recv yields every message from the upstream, in the order each stream
//     carries them; it is closed when the connection ends (after Close, or
//     after a panic, which Err reports). A server request or notification
//     that came on a request's response stream carries that request's id
//     in Related: it belongs to that request.
//   - Close ends the session (DELETE, bounded) and every exchange; it
//     returns within 5 s whatever the server does.
//
// A Conn recovers by itself from what a server may do to a long session:
// streams cut (resumed), sessions expired (re-initialized), a legacy
// stream lost (reconnected, handshake replayed; requests in flight on it
// are answered with an error). All methods are safe for concurrent use.
type Conn struct {
	o      Options
	log    *slog.Logger
	client *http.Client
	base   *url.URL

	recv  chan *jsonrpc.Message
	queue chan *sendReq // to the sender: unbuffered, so first come first served
	done  chan struct{} // closed by Close
	life  context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup // goroutines that push to recv
	ended chan struct{}  // closed with recv

	closeOnce sync.Once
	failOnce  sync.Once
	reinitMu  sync.Mutex // one re-initialization at a time

	mu      sync.Mutex
	err     error
	legacy  *legacyConn // set once the server turned out to be legacy-only
	init    *jsonrpc.Message
	ready   *jsonrpc.Message // the client's notifications/initialized
	session *session         // the live Streamable HTTP session, or nil
	version string           // the revision initialize negotiated
	calls   map[string]*exchange
}

// sendReq is one Send waiting for the sender goroutine; res gets the
// result of sending m.
type sendReq struct {
	ctx context.Context
	m   *jsonrpc.Message
	res chan error // buffered: the sender never waits for a caller gone
}

// New returns a Conn to the server at o.URL. It makes no request yet: the
// first Send does.
func New(o Options) (*Conn, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("httpclient: %q is not an http(s) URL", httpx.RedactURL(o.URL))
	}
	switch o.Transport {
	case Auto, Streamable, Legacy:
	default:
		return nil, fmt.Errorf("httpclient: unknown transport %q", o.Transport)
	}
	if o.MaxMessage <= 0 {
		o.MaxMessage = DefaultMaxMessage
	}
	if o.MaxRetries <= 0 {
		o.MaxRetries = 5
	}
	if o.MaxRetryDelay <= 0 {
		o.MaxRetryDelay = time.Minute
	}
	c := &Conn{
		o: o, log: o.Logger, client: httpx.UpstreamClient(o.Client), base: u,
		recv: make(chan *jsonrpc.Message, 16), queue: make(chan *sendReq), done: make(chan struct{}),
		ended: make(chan struct{}), calls: map[string]*exchange{},
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.life, c.stop = context.WithCancel(context.Background())
	if o.Transport == Legacy {
		c.legacy = newLegacy(c)
	}
	c.goSafe("sending", c.sender)
	go func() {
		c.wg.Wait()
		close(c.recv)
		close(c.ended)
	}()
	return c, nil
}

// Recv yields the upstream's messages; closed when the connection ends.
func (c *Conn) Recv() <-chan *jsonrpc.Message { return c.recv }

// Err says why the connection ended: nil after Close, the panic that
// ended it otherwise.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the connection: the session is deleted (within 2 s), every
// exchange aborted, and Recv closed. It returns within 5 s.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		s := c.session
		c.mu.Unlock()
		if s != nil && s.id != "" {
			c.deleteSession(s)
		}
		close(c.done)
		c.stop()
	})
	select {
	case <-c.ended:
	case <-time.After(3 * time.Second):
		c.log.Warn("httpclient: goroutines still running after Close")
	}
	return nil
}

// roundTrip does one HTTP exchange with the upstream. Its error names the
// URL without query or userinfo (the upstream's credentials may ride
// there), so it may go to a log or a client.
func (c *Conn) roundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.client.Do(req)
	return resp, httpx.RedactError(err)
}

// push delivers m on Recv; it gives up when the connection is closed.
func (c *Conn) push(m *jsonrpc.Message) {
	select {
	case c.recv <- m:
	case <-c.done:
	}
}

// goSafe runs f on a goroutine of its own that Recv's closing waits for.
// A panic in it is logged with its stack and ends the connection with an
// error: a bug here must not end the process.
func (c *Conn) goSafe(what string, f func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer func() {
			if p := recover(); p != nil {
				c.log.Error("httpclient: panic "+what, "panic", p, "stack", string(debug.Stack()))
				c.fail(fmt.Errorf("httpclient: panic %s: %v", what, p))
			}
		}()
		f()
	}()
}

// fail ends the connection with err.
func (c *Conn) fail(err error) {
	c.failOnce.Do(func() {
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		go c.Close()
	})
}

// sleep waits d and reports true, or returns false as soon as ctx ends.
// Its callers pass a context that ends with the connection (c.life, or
// one derived from it).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// backoff is the delay before reconnection attempt n (from 0) when the
// server gave no retry hint.
func backoff(n int) time.Duration {
	return min(100*time.Millisecond<<min(n, 7), 10*time.Second)
}

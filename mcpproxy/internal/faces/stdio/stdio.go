// Package stdio serves one client over stdio (newline-delimited
// JSON-RPC) in front of any upstream: a child process or legacy server
// kept by a supervisor (a restarted one gets the client's handshake
// replayed), or a Streamable HTTP server through Spillway's own client.
//
// Messages reach the upstream in the order the client sent them; every
// message to the client is one line, written by one goroutine. A response
// the proxy rewrites (storing a large result, shrinking) is rewritten
// apart from that writer, at most MaxRewrites at once (more wait their
// turn), so that a slow store holds only its own response: other
// responses, progress and pings go on meanwhile. Only what the protocol
// orders stays in order: a response still follows its own progress
// notifications, which reach the writer before it. Everything else goes
// out as it comes. The client is the upstream's only client, so
// backpressure is the right answer to a client that reads slowly: the
// upstream waits for it.
package stdio

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/mux"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/pool"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

// Upstream gives the face its upstream connection. Get is called for
// each client message and returns the live connection (restarting one
// that died), or an error: a request is then answered with it, and a
// notification dropped. Close ends the connection when Serve returns.
type Upstream interface {
	Get(ctx context.Context) (*mux.Mux, error)
	Close()
}

// Fixed is an Upstream of one connection that recovers by itself (the
// Streamable HTTP client resumes streams and re-initializes sessions).
type Fixed struct{ M *mux.Mux }

// Get returns the connection, or mux.ErrClosed once it ended.
func (f Fixed) Get(context.Context) (*mux.Mux, error) {
	if !f.M.Alive() {
		return nil, mux.ErrClosed
	}
	return f.M, nil
}

// Close closes the connection.
func (f Fixed) Close() { f.M.Close() }

// Client is the client's side of stdio: Recv delivers the client's
// messages (closed at the end of its input), Send writes one to it.
type Client interface {
	Send(ctx context.Context, m *jsonrpc.Message) error
	Recv() <-chan *jsonrpc.Message
}

// Options configure a Face. Methods is required.
type Options struct {
	Methods *ownmethods.Methods
	// MaxMessage caps what the face writes: a larger response becomes a
	// JSON-RPC error, a larger request or notification is dropped (and
	// logged). 0 or negative: no cap.
	MaxMessage int64
	// MaxRewrites bounds the responses rewritten at once; past it up to
	// 64 more wait their turn while other messages go on, and past those
	// the writer takes nothing new until a rewrite is done. Default 16.
	MaxRewrites int
	Logger      *slog.Logger
}

// DefaultMaxRewrites is Options.MaxRewrites when none is given.
const DefaultMaxRewrites = 16

// Face is one stdio client's session. Create it with New and run it with
// Serve, once. Deliver, OnServer and Replay are safe for concurrent use
// (the upstream's routing goroutine and a supervisor call them).
type Face struct {
	o   Options
	log *slog.Logger
	out chan item
	// done is closed when the client can no longer be written to.
	done chan struct{}
	// slots holds a token per rewrite under way; rewritten carries what
	// a rewrite made back to the writer.
	slots     chan struct{}
	rewritten chan *jsonrpc.Message

	mu          sync.Mutex
	init, ready *jsonrpc.Message // the client's handshake, replayed to a restarted upstream
	// listens are the client's subscriptions/listen by id key: true while
	// open, false once the face answered it (see listen.go).
	listens map[string]bool
	traces  inflight // the spans of requests in flight (tracing.go)
}

// item is one message on its way to the client, with the Call that
// rewrites it (nil: it goes out as it is).
type item struct {
	m    *jsonrpc.Message
	call *ownmethods.Call
}

// New returns a face for one client; serve it with Serve, once.
func New(o Options) *Face {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxRewrites <= 0 {
		o.MaxRewrites = DefaultMaxRewrites
	}
	return &Face{o: o, log: o.Logger, out: make(chan item, 64), done: make(chan struct{}),
		slots: make(chan struct{}, o.MaxRewrites), rewritten: make(chan *jsonrpc.Message)}
}

// Deliver queues a message for the client; it blocks while the client is
// behind (backpressure on its upstream) and drops once the client is gone.
func (f *Face) Deliver(m *jsonrpc.Message, tag any) {
	if m.IsResponse() && f.answered(m) {
		return
	}
	c, _ := tag.(*ownmethods.Call)
	f.send(item{m, c})
}

// send queues it for the client, as Deliver does.
func (f *Face) send(it item) {
	select {
	case f.out <- it:
	case <-f.done:
	}
}

// OnServer receives the messages the upstream sends on its own
// (notifications and requests) and passes them to the client.
func (f *Face) OnServer(m *jsonrpc.Message) { f.Deliver(m, nil) }

// Replay sends the client's handshake (initialize, then initialized) to a
// new upstream connection, so that the session goes on after a restart.
// It is the Init of the supervisor that restarts the upstream; before the
// client's initialize it sends nothing.
func (f *Face) Replay(ctx context.Context, m *mux.Mux) error {
	f.mu.Lock()
	init, ready := f.init, f.ready
	f.mu.Unlock()
	if init == nil {
		return nil
	}
	return pool.Handshake(m, init, ready)
}

// Serve relays between client and up until the client's input ends or ctx
// is done. It closes up before it returns. A rewrite still under way then
// ends by itself and its result is dropped (see rewrite).
func (f *Face) Serve(ctx context.Context, client Client, up Upstream) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer up.Close()
	defer f.traceEnded()
	go f.write(ctx, cancel, client)

	var sc scoped
	for {
		var m *jsonrpc.Message
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m = <-client.Recv():
		}
		if m == nil {
			return nil // end of input
		}
		f.handle(ctx, m, up, &sc)
	}
}

// scoped is the client's namespace on the upstream connection it last
// used. A restarted upstream is a new connection, and gets a fresh
// namespace: ids in flight on the dead one mean nothing on it.
type scoped struct {
	scope *mux.Scope
	of    *mux.Mux // the connection scope belongs to; nil before the first request
}

// on returns the client's namespace on mx, making a fresh one when mx is
// not the connection of the last.
func (sc *scoped) on(mx *mux.Mux) *mux.Scope {
	if sc.of != mx {
		sc.scope, sc.of = mx.NewScope(), mx
	}
	return sc.scope
}

// handle passes one client message on: a request to the proxy's own
// methods or upstream, anything else upstream. A panic answers a request
// with an error, and the face goes on serving.
func (f *Face) handle(ctx context.Context, m *jsonrpc.Message, up Upstream, sc *scoped) {
	defer f.recoverHandling(m)
	// The handshake is remembered once it went upstream, so the first
	// connection does not get it twice.
	defer f.rememberHandshake(m)
	if m.IsRequest() {
		f.request(ctx, m, up, sc)
		return
	}
	if m.IsNotification() && m.Method == jsonrpc.MethodCancelled {
		defer f.listenCancelled(m) // once the cancellation went upstream
	}
	f.pass(ctx, m, up, sc)
}

// recoverHandling, deferred by handle, turns a panic into an error
// response to the request m (a notification or response gets none): a
// bug met by one message must not end the client's session.
func (f *Face) recoverHandling(m *jsonrpc.Message) {
	if v := recover(); v != nil {
		f.log.Error("stdio face: handling a message panicked", "panic", v, "stack", string(debug.Stack()))
		if m.IsRequest() {
			f.Deliver(jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeInternalError, "the proxy failed to handle this request"), nil)
		}
	}
}

// rememberHandshake keeps the client's initialize and initialized, which
// Replay sends again to a restarted upstream.
func (f *Face) rememberHandshake(m *jsonrpc.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch m.Method {
	case "initialize":
		f.init = m
	case "notifications/initialized":
		f.ready = m
	}
}

// request answers the client's request m itself (the proxy's own
// methods, resources/stream) or sends it upstream in the client's
// namespace, with the Call that rewrites its response as its tag.
func (f *Face) request(ctx context.Context, m *jsonrpc.Message, up Upstream, sc *scoped) {
	if m.Method == "resources/stream" {
		f.Deliver(jsonrpc.ErrorResponse(m.ID, codeNotStreamable,
			"resources/stream needs HTTP; over stdio use resources/read or the resource_link's httpUrl"), nil)
		return
	}
	f.listenOpened(m)
	ctx = f.traceRequest(ctx, m)
	rq := ownmethods.Request{Stdio: true, Version: jsonrpc.MetaString(m, jsonrpc.MetaProtocolVersion)}
	reply, c := f.o.Methods.Before(ctx, rq, m)
	if reply != nil {
		f.Deliver(reply, nil)
		return
	}
	mx, err := up.Get(ctx)
	if err != nil {
		f.log.Warn("upstream unavailable", "err", err)
		f.Deliver(jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeUpstream, "upstream MCP server unavailable: "+err.Error()), nil)
		return
	}
	scope := sc.on(mx)
	if c != nil && m.Method == "tools/call" {
		c.List = ownmethods.ListTools(m, true, pool.Sender(mx))
	}
	cctx, sent := f.traceUpstream(ctx, m)
	if _, err := scope.Call(cctx, sent, f, c); err != nil {
		code, msg := jsonrpc.CodeUpstream, "upstream MCP server unavailable"
		if errors.Is(err, mux.ErrDuplicateID) {
			code, msg = jsonrpc.CodeInvalidRequest, "a request with this id is already in flight"
		}
		f.Deliver(jsonrpc.ErrorResponse(m.ID, code, msg), nil)
	}
}

// pass sends a client notification upstream in the client's namespace
// (a cancellation names the client's id), or a client's response to a
// server request as it is. With no upstream it is dropped, and logged.
func (f *Face) pass(ctx context.Context, m *jsonrpc.Message, up Upstream, sc *scoped) {
	mx, err := up.Get(ctx)
	if err != nil {
		f.log.Warn("upstream unavailable; dropping a client message", "method", m.Method, "err", err)
		return
	}
	if m.IsNotification() && sc.of == mx {
		err = sc.scope.Notify(ctx, m)
	} else {
		err = mx.Send(ctx, m) // a response to a server request, or nothing to map yet
	}
	if err != nil {
		f.log.Warn("sending to the upstream failed", "err", err)
	}
}

// codeNotStreamable is SEP-2532's "stream not supported": the SEP covers
// HTTP only.
const codeNotStreamable = -32003

// capped returns m, or what replaces it when it is over MaxMessage: the
// client's transport would otherwise end the whole connection (the
// TypeScript SDK's stdio client does past 10 MiB), losing every other
// call in flight with it.
func (f *Face) capped(m *jsonrpc.Message) *jsonrpc.Message {
	size := spill.ExpandedLen(m.Raw) // what the client gets: spilled strings put back
	if f.o.MaxMessage <= 0 || size <= f.o.MaxMessage {
		return m
	}
	if m.IsResponse() {
		f.log.Warn("stdio face: a response is over the client's message cap; it gets an error instead", "bytes", size, "cap", f.o.MaxMessage)
		return jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeInternalError, fmt.Sprintf(
			"the response is %d bytes, over the %d bytes this stdio connection carries (spillway --stdio-max-message)", size, f.o.MaxMessage))
	}
	f.log.Warn("stdio face: a message over the client's message cap was dropped", "method", m.Method, "bytes", size, "cap", f.o.MaxMessage)
	return nil
}

// write is the one writer of the client's output. A response to rewrite
// waits in pending for a free slot, then is handed to a goroutine of its
// own; what the rewrite makes comes back on f.rewritten. Meanwhile the
// writer goes on with every other message. Only while maxPending
// responses wait does it take nothing new from f.out (the upstream
// waits, as for a client that reads slowly); it still writes what
// finished rewrites bring back.
func (f *Face) write(ctx context.Context, cancel context.CancelFunc, client Client) {
	defer close(f.done)
	defer func() {
		if v := recover(); v != nil {
			f.log.Error("stdio face: writer panicked", "panic", v, "stack", string(debug.Stack()))
			cancel()
		}
	}()
	var pending []item // responses waiting for a slot, oldest first
	for {
		in, slot := f.out, chan<- struct{}(nil)
		if len(pending) >= maxPending {
			in = nil
		}
		if len(pending) > 0 {
			slot = f.slots
		}
		var m *jsonrpc.Message
		select {
		case <-ctx.Done():
			return
		case m = <-f.rewritten:
		case it := <-in:
			if it.call != nil {
				pending = append(pending, it)
				continue
			}
			m = it.m
		case slot <- struct{}{}:
			go f.rewrite(ctx, pending[0])
			pending[0] = item{}
			pending = pending[1:]
			continue
		}
		if m = f.capped(m); m == nil {
			continue
		}
		if err := client.Send(ctx, m); err != nil {
			f.log.Warn("writing to the client failed", "err", err)
			cancel()
			return
		}
		f.traceAnswered(m)
	}
}

// maxPending bounds the responses waiting for a rewrite slot: as many as
// f.out holds.
const maxPending = 64

// rewrite runs the proxy's rewrite of a response (offloading, its own
// additions) under ctx and a minute at most, hands the result to the
// writer and frees its slot. Once ctx is done (the client went away) the
// result is dropped, with what it held on disk. The offloader does not
// cut a store it began when ctx ends (a timeout of its own bounds
// it), so such a rewrite ends when its store does, holding its slot.
func (f *Face) rewrite(ctx context.Context, it item) {
	defer func() { <-f.slots }()
	m := f.after(ctx, it)
	select {
	case f.rewritten <- m:
	case <-ctx.Done():
		spill.Release(m.Raw)
	}
}

// after is Methods.After under ctx and a minute at most. A panic, which
// After promises not to raise, would end the process on this goroutine:
// the request gets an error instead.
func (f *Face) after(ctx context.Context, it item) (m *jsonrpc.Message) {
	defer func() {
		if v := recover(); v != nil {
			f.log.Error("stdio face: rewriting a response panicked", "panic", v, "stack", string(debug.Stack()))
			m = jsonrpc.ErrorResponse(it.m.ID, jsonrpc.CodeInternalError, "the proxy failed to process the upstream's response")
		}
	}()
	actx, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	return f.o.Methods.After(actx, it.call, it.m)
}

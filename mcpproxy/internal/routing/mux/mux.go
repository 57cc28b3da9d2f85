// Package mux shares one upstream connection among many clients. It is the
// half of the proxy's routing (with package session) that sends a client's
// request on its upstream connection and finds the way back to that client.
//
// Each client gets a Scope, its own namespace. The mux renumbers request ids
// to values it mints itself, and on a connection that clients share (New)
// it renames progress tokens too, so that two clients' "id": 1 (or progress
// token "t") never collide upstream. On a connection of one client, or of
// one tenant's requests (NewExclusive), the mux leaves the client's own
// progress token as it is, because a tool may read it; it renames the token
// only when the same one is already in flight. A progress notification for a
// token the mux minted, arriving after its call is over, is dropped, because
// the minted token means nothing to any client.
//
// The mux routes every response, progress notification and subscription
// notification to the Sink of the request it belongs to, with the client's
// own id and token restored. It hands a response over with the tag its
// request was sent with, so a face never has to look a call up by an id the
// client chose in a table that other clients share.
//
// A cancellation names the client's id, so the mux maps it within the
// sender's own scope, and drops it when it names no request there: a client
// cannot cancel another's call. The mux never blocks on a client: sinks must
// not block (a slow client's sink cuts that client's own stream instead), so
// one client cannot stall the upstream for the others.
//
// All methods of Mux and Scope are safe for concurrent use.
package mux

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// ErrStalled is what a Conn's Err wraps when the upstream was stopped
// because it stalled in the middle of a message. The mux then answers each
// call in flight with this error's message instead of "upstream MCP server
// exited", so the clients learn why.
var ErrStalled = errors.New("upstream MCP server stalled mid-message and was stopped")

// Conn is one JSON-RPC connection to an upstream MCP server, as the
// upstream clients provide it (see them for the full contract). The mux
// reads Recv until the channel is closed, then asks Err why the connection
// ended (nil for a clean exit).
type Conn interface {
	Send(ctx context.Context, m *jsonrpc.Message) error
	Recv() <-chan *jsonrpc.Message
	Err() error
	Close() error
}

// Sink receives what the mux routes to one client: responses, progress
// notifications and subscription notifications. The mux calls Deliver from
// the goroutine that reads the upstream for every client, so Deliver must
// not block. The exception is a sink that is the connection's only client
// (the stdio face): there blocking is the backpressure the upstream should
// feel. tag is the value the request was sent with (nil for notifications).
type Sink interface {
	Deliver(m *jsonrpc.Message, tag any)
}

// ErrClosed is returned by Call, Send and Notify when the upstream
// connection has ended, and by Call on a closed Scope.
var ErrClosed = errors.New("mux: upstream connection closed")

// Mux routes the messages of one upstream connection. Create it with New
// or NewExclusive; the zero value is not usable. It is safe for concurrent
// use.
type Mux struct {
	conn      Conn
	onServer  func(*jsonrpc.Message)
	log       *slog.Logger
	exclusive bool // made by NewExclusive: clients' progress tokens pass unchanged

	mu      sync.Mutex
	next    uint64
	pending map[string]*Pending // upstream id → call
	tokens  map[string]*Pending // upstream progress token → call
	ending  bool                // set when the connection ends; Call then refuses new calls
	dead    chan struct{}       // closed once every call in flight was answered
}

// New starts routing conn, a connection that clients share. It renames
// every progress token to one the mux mints, so that no two clients' tokens
// collide upstream, not even one after the other: a late progress
// notification of a finished call reaches nobody. onServer receives the
// messages the upstream sends on its own (server requests, and
// notifications that belong to no call); the routing goroutine calls it, so
// it must not block for long. A nil onServer drops those messages; a nil
// log discards the mux's logs.
func New(conn Conn, onServer func(*jsonrpc.Message), log *slog.Logger) *Mux {
	return newMux(conn, onServer, log, false)
}

// NewExclusive is New for a connection that serves one client (a session's
// own child, the stdio face) or one tenant's requests. There the clients'
// progress tokens reach the upstream unchanged, unless the same token is
// already in flight (then it is renamed as New does). The proxy's own
// requests may share the connection, because they carry no tokens. A late
// progress notification of a call that is over, whose token the mux left
// as the client sent it, goes to onServer, or to the call that uses the
// same token now (within one tenant, a token may be reused once its call
// is over).
func NewExclusive(conn Conn, onServer func(*jsonrpc.Message), log *slog.Logger) *Mux {
	return newMux(conn, onServer, log, true)
}

func newMux(conn Conn, onServer func(*jsonrpc.Message), log *slog.Logger, exclusive bool) *Mux {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if onServer == nil {
		onServer = func(*jsonrpc.Message) {}
	}
	m := &Mux{conn: conn, onServer: onServer, log: log, exclusive: exclusive,
		pending: map[string]*Pending{}, tokens: map[string]*Pending{}, dead: make(chan struct{})}
	go m.loop()
	return m
}

// Done returns a channel that is closed once the upstream connection has
// ended and every call that was in flight has had its error response.
func (m *Mux) Done() <-chan struct{} { return m.dead }

// Alive reports whether the connection still runs.
func (m *Mux) Alive() bool {
	select {
	case <-m.dead:
		return false
	default:
		return true
	}
}

// Close closes the upstream connection and returns its error. The routing
// goroutine then answers every call in flight with an error response.
func (m *Mux) Close() error { return m.conn.Close() }

// Send passes a message that needs no routing (a client's response to a
// server request, or a notification of a client that owns the connection)
// to the upstream as it is. It returns ErrClosed once the connection has
// ended, or the connection's send error.
func (m *Mux) Send(ctx context.Context, msg *jsonrpc.Message) error {
	if !m.Alive() {
		return ErrClosed
	}
	return m.conn.Send(ctx, msg)
}

// Caller returns the sink and tag of the call in flight upstream under id,
// the id the mux gave the request (what a server message names as its
// Related request). It returns a nil sink when no call with that id is in
// flight. A face uses it to send a server request that the upstream makes
// on behalf of a call to that call's client, even when clients share the
// connection.
func (m *Mux) Caller(id []byte) (Sink, any) {
	if id == nil {
		return nil, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.pending[string(id)]; p != nil {
		return p.sink, p.tag
	}
	return nil, nil
}

// Scope is one client's namespace on a Mux: a session, a stateless
// request, or the stdio client. The zero value is not usable; get one from
// NewScope. It is safe for concurrent use.
type Scope struct {
	m *Mux

	mu     sync.Mutex
	calls  map[string]*Pending // the client's id → its call in flight
	closed bool
}

// NewScope returns a new, empty client namespace.
func (m *Mux) NewScope() *Scope { return &Scope{m: m, calls: map[string]*Pending{}} }

// Pending is one client request in flight upstream, as Call returns it.
// Its methods only read fields fixed at creation, so they are safe for
// concurrent use.
type Pending struct {
	scope            *Scope
	clientID, upID   []byte
	clientTok, upTok []byte
	sink             Sink
	tag              any
}

// ClientID is the id the client gave the request.
func (p *Pending) ClientID() []byte { return p.clientID }

// ErrDuplicateID is returned by Call when the client already has a request
// with the same id in flight in this scope.
var ErrDuplicateID = errors.New("a request with this id is already in flight")

// Call sends request req upstream on behalf of the scope's client. Its
// response, and the notifications that belong to it, go to sink with tag.
// It fails with ErrDuplicateID, ErrClosed or the connection's send error,
// and then nothing is delivered for req.
func (s *Scope) Call(ctx context.Context, req *jsonrpc.Message, sink Sink, tag any) (*Pending, error) {
	m := s.m
	key := jsonrpc.Key(req.ID)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if _, dup := s.calls[key]; dup {
		s.mu.Unlock()
		return nil, ErrDuplicateID
	}
	m.mu.Lock()
	if !m.aliveLocked() {
		m.mu.Unlock()
		s.mu.Unlock()
		return nil, ErrClosed
	}
	m.next++
	p := &Pending{scope: s, clientID: req.ID, upID: jsonrpc.NumID(m.next), sink: sink, tag: tag}
	out := req.WithID(p.upID)
	if tok := jsonrpc.ProgressToken(req); tok != nil {
		p.clientTok, p.upTok = tok, tok
		if !m.exclusive || m.tokens[jsonrpc.Key(tok)] != nil {
			p.upTok = m.mintTokenLocked()
			out = out.WithProgressToken(p.upTok)
		}
		m.tokens[jsonrpc.Key(p.upTok)] = p
	}
	m.pending[string(p.upID)] = p
	m.mu.Unlock()
	s.calls[key] = p
	s.mu.Unlock()
	if err := m.conn.Send(ctx, out); err != nil {
		s.forget(p)
		return nil, err
	}
	return p, nil
}

// Notify passes a client notification upstream. A cancellation is renamed
// to the id the upstream knows, and once it is sent the call it names is
// forgotten. A cancellation that names no request of this scope is dropped
// without an error, because it cannot be meant for another client. It
// returns ErrClosed once the connection has ended, or the connection's
// send error.
func (s *Scope) Notify(ctx context.Context, n *jsonrpc.Message) error {
	if n.Method == jsonrpc.MethodCancelled {
		s.mu.Lock()
		p := s.calls[jsonrpc.Key(jsonrpc.CancelledID(n))]
		s.mu.Unlock()
		if p == nil {
			s.m.log.Debug("dropping a cancellation that names no request in flight")
			return nil
		}
		if err := s.m.Send(ctx, n.WithCancelledID(p.upID)); err != nil {
			return err
		}
		// The client no longer waits for it: a late answer is dropped, and
		// the call does not linger for the rest of the scope's life.
		s.forget(p)
		return nil
	}
	return s.m.Send(ctx, n)
}

// Cancel tells the upstream that the client no longer waits for p, and
// forgets p, so nothing more is delivered for it. It does nothing when p
// was already answered or cancelled.
func (s *Scope) Cancel(p *Pending, reason string) {
	if !s.forget(p) {
		return // answered or cancelled already
	}
	s.m.cancelUpstream(p, reason)
}

// Close cancels upstream every request of the scope still in flight (their
// sinks get nothing more) and makes Call refuse new ones with ErrClosed.
// It is safe to call more than once.
func (s *Scope) Close(reason string) {
	s.mu.Lock()
	s.closed = true
	calls := s.calls
	s.calls = map[string]*Pending{}
	s.mu.Unlock()
	for _, p := range calls {
		if s.m.unroute(p) {
			s.m.cancelUpstream(p, reason)
		}
	}
}

// InFlight returns how many of the scope's requests await their response.
func (s *Scope) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

func (m *Mux) cancelUpstream(p *Pending, reason string) {
	if !m.Alive() {
		return
	}
	ctx, stop := context.WithTimeout(context.Background(), cancelWait)
	defer stop()
	n := jsonrpc.Notification(jsonrpc.MethodCancelled, map[string]any{"requestId": rawJSON(p.upID), "reason": reason})
	if err := m.conn.Send(ctx, n); err != nil {
		m.log.Debug("cancelling upstream failed", "err", err)
	}
}

// forget removes p from its scope and from the mux's routes; it reports
// whether p was still in flight.
func (s *Scope) forget(p *Pending) bool {
	s.mu.Lock()
	if s.calls[jsonrpc.Key(p.clientID)] == p {
		delete(s.calls, jsonrpc.Key(p.clientID))
	}
	s.mu.Unlock()
	return s.m.unroute(p)
}

// mintTokenLocked returns a progress token no call in flight uses (on an
// exclusive connection, a client's own token may look like a minted one).
func (m *Mux) mintTokenLocked() []byte {
	for {
		tok := strconv.AppendQuote(nil, "p"+strconv.FormatUint(m.next, 10))
		if m.tokens[jsonrpc.Key(tok)] == nil {
			return tok
		}
		m.next++
	}
}

// mintedLocked reports whether tok, a progress token no call in flight
// uses, may be one the mux minted: "p" followed by a number no greater
// than the mux's counter. A client's own token of that form whose call is
// over is taken for a minted one, so its late progress is dropped too; the
// client cannot tell that from a server that sent no progress.
func (m *Mux) mintedLocked(tok []byte) bool {
	if len(tok) < 4 || tok[0] != '"' || tok[1] != 'p' || tok[len(tok)-1] != '"' {
		return false
	}
	n, err := strconv.ParseUint(string(tok[2:len(tok)-1]), 10, 64)
	return err == nil && n <= m.next
}

// unroute removes p from the mux's tables of ids and tokens; it reports
// whether p was still there (false: answered or cancelled already).
func (m *Mux) unroute(p *Pending) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pending[string(p.upID)] != p {
		return false
	}
	delete(m.pending, string(p.upID))
	if p.upTok != nil {
		delete(m.tokens, jsonrpc.Key(p.upTok))
	}
	return true
}

func (m *Mux) aliveLocked() bool { return !m.ending }

// loop routes what the upstream sends until the connection ends, then
// answers every call in flight with an error: no client waits for ever.
func (m *Mux) loop() {
	defer func() {
		if v := recover(); v != nil {
			m.log.Error("mux: routing panicked; closing the upstream connection", "panic", v, "stack", string(debug.Stack()))
			m.conn.Close()
		}
		m.mu.Lock()
		m.ending = true
		left := m.pending
		m.pending, m.tokens = map[string]*Pending{}, map[string]*Pending{}
		m.mu.Unlock()
		why := "upstream MCP server exited"
		if err := m.conn.Err(); err != nil {
			m.log.Warn("upstream connection ended", "err", err)
			if errors.Is(err, ErrStalled) {
				why = ErrStalled.Error()
			}
		}
		// Answered before Done is closed: whoever waits for Done finds
		// the errors already delivered.
		for _, p := range left {
			p.scope.mu.Lock()
			delete(p.scope.calls, jsonrpc.Key(p.clientID))
			p.scope.mu.Unlock()
			p.sink.Deliver(jsonrpc.ErrorResponse(p.clientID, jsonrpc.CodeUpstream, why), p.tag)
		}
		close(m.dead)
	}()
	for msg := range m.conn.Recv() {
		m.route(msg)
	}
}

// route delivers one message from the upstream: a response to the call
// that sent the request, a progress or subscription notification to the
// call it belongs to, and everything else to onServer.
func (m *Mux) route(msg *jsonrpc.Message) {
	if msg.IsResponse() {
		m.mu.Lock()
		p := m.pending[string(msg.ID)]
		m.mu.Unlock()
		if p == nil || !p.scope.forget(p) {
			m.log.Debug("dropping a response nobody waits for", "id", string(msg.ID))
			return
		}
		out := msg.WithID(p.clientID)
		if sub := jsonrpc.Path(out.Result, "_meta", jsonrpc.MetaSubscriptionID); sub != nil && string(sub) == string(p.upID) {
			out = out.WithResult(mustSet(out.Result, p.clientID, "_meta", jsonrpc.MetaSubscriptionID))
		}
		p.sink.Deliver(out, p.tag)
		return
	}
	if msg.IsNotification() {
		if msg.Method == jsonrpc.MethodProgress {
			if tok := jsonrpc.NotifiedToken(msg); tok != nil {
				m.mu.Lock()
				p := m.tokens[jsonrpc.Key(tok)]
				minted := p == nil && m.mintedLocked(tok)
				m.mu.Unlock()
				if p != nil {
					p.sink.Deliver(msg.WithNotifiedToken(p.clientTok), nil)
					return
				}
				if minted {
					m.log.Debug("dropping a progress notification of a call that is over", "token", string(tok))
					return
				}
			}
		}
		if sub := jsonrpc.SubscriptionID(msg); sub != nil {
			m.mu.Lock()
			p := m.pending[string(sub)]
			m.mu.Unlock()
			if p != nil {
				p.sink.Deliver(msg.WithSubscriptionID(p.clientID), nil)
				return
			}
		}
	}
	m.onServer(msg)
}

func mustSet(obj, v []byte, keys ...string) []byte {
	out, ok := jsonrpc.SetPath(obj, v, keys...)
	if !ok {
		return obj
	}
	return out
}

type rawJSON []byte

func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }

// cancelWait bounds a cancellation sent upstream: it is a courtesy, and a
// stuck upstream must not hold up the client that cancelled.
const cancelWait = time.Second
